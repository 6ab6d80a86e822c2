#!/bin/bash
# Write $BUILD/.config from x86_64_defconfig plus the given fragments,
# but only when the fragments (or the tree) changed since the last time.
# Options that the tree does not define yet (a prefix of core-patches that
# does not add them) are skipped; any other option that does not end up as
# asked is an error, since a silently dropped option makes tests fail in
# odd ways.
# usage: kernel-config.sh SRC BUILD FRAGMENT...
set -euo pipefail
src=$1 build=$2
shift 2
want=$( (cat "$@"; git -C "$src" rev-parse HEAD) | sha256sum | cut -d' ' -f1)
stamp=$build/.config-from
[ -f "$build/.config" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && exit 0

echo "  CONFIG  x86_64_defconfig + $*"
known=$(mktemp)
trap 'rm -f "$known" "$known.frag"' EXIT
(cd "$src" && git grep -h -E '^[[:space:]]*(menu)?config [A-Z0-9_]+' -- '*Kconfig*') |
	awk '{print "CONFIG_" $2}' | sort -u > "$known"
cat "$@" | grep -E '^CONFIG_' | while IFS= read -r line; do
	grep -qxF "${line%%=*}" "$known" && echo "$line"
done > "$known.frag"

make -s -C "$src" O="$build" x86_64_defconfig
"$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$known.frag" >/dev/null
make -s -C "$src" O="$build" olddefconfig
bad=0
while IFS= read -r line; do
	opt=${line%%=*}
	case "$line" in
	*=n) grep -q "^$opt=" "$build/.config" && { echo "kernel-config: $opt is still set" >&2; bad=1; } ;;
	*)   grep -qxF "$line" "$build/.config" || { echo "kernel-config: $line did not stick" >&2; bad=1; } ;;
	esac
done < "$known.frag"
[ $bad = 0 ] || exit 1
echo "$want" > "$stamp"
