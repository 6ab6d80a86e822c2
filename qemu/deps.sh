#!/bin/bash
# Install the Debian packages this project needs, only those missing.
set -euo pipefail
pkgs=(
	linux-source-6.1 build-essential bc bison flex libelf-dev libssl-dev
	dwarves ccache cpio kmod rsync zstd xz-utils sparse
	qemu-system-x86 qemu-utils
	dmsetup libdevmapper-dev mdadm fio ndctl busybox-static lvm2
	libjson-c-dev pkg-config valgrind
	clang llvm libclang-rt-14-dev	# fuzzing: libFuzzer, sanitizers, llvm-cov
	python3-pytest python3-pytest-xdist python3-matplotlib python3-git
	pyflakes3	# the tests' Python: no undefined name (test_harness)
	bcache-tools
	e2fsprogs xfsprogs	# file systems in the guest (issue 32)
	lintian fakeroot	# make deb, make deb-kernel (bindeb-pkg)
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} = 0 ] && exit 0
echo "  DEPS    installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
