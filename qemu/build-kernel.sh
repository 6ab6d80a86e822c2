#!/bin/bash
# Patch, configure and build the guest kernel, all under one lock so that
# two builds (make test, make check-series, a developer) never interleave.
# usage: build-kernel.sh TARBALL SRC BUILD JOBS FRAGMENT...
set -euo pipefail
tarball=$1 src=$2 build=$3 jobs=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build"
exec 9>"$(dirname "$src")/kernel-build.lock"
flock 9
"$here/kernel-tree.sh" "$tarball" "$src" "$here/../core-patches"
"$here/kernel-config.sh" "$src" "$build" "$@"
echo "  BUILD   $build (log: $build/build.log)"
if ! make -C "$src" O="$build" CC="ccache gcc" -j"$jobs" bzImage modules > "$build/build.log" 2>&1; then
	grep -E -B2 -A6 '(error|Error)[: ]' "$build/build.log" | tail -60
	exit 1
fi
grep -E 'warning:' "$build/build.log" | sort -u | head -20 || true
echo "  KERNEL  $(cat "$build/include/config/kernel.release") $build/arch/x86/boot/bzImage"
