#!/bin/bash
# Build the guest's base initramfs: busybox plus the host's own dmsetup,
# mdadm, fio, ndctl, bcache tools, e2fsprogs, xfsprogs, fstrim and
# fsfreeze with the shared libraries they load.
# Per-run files (test script, modules, tools) are appended by run-vm.sh as
# a second cpio archive, so this image only changes when its inputs do.
# usage: mkimage.sh OUTPUT.cpio.gz
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bins=(/sbin/dmsetup /usr/sbin/mdadm /usr/bin/fio /usr/bin/ndctl
      /usr/sbin/make-bcache /usr/sbin/bcache-super-show /usr/sbin/blkdiscard
      /usr/sbin/losetup
      /sbin/mke2fs /sbin/e2fsck /usr/sbin/mkfs.xfs /usr/sbin/xfs_repair
      /usr/sbin/fstrim /usr/sbin/fsfreeze)
bins=($(for b in "${bins[@]}"; do [ -x "$b" ] && echo "$b"; done))

inputs=$( (cat "$0" "$here/guest-init.sh"; sha256sum /usr/bin/busybox "${bins[@]}") |
	 sha256sum | cut -d' ' -f1)
if [ -f "$out" ] && [ "$(cat "$out.from" 2>/dev/null)" = "$inputs" ]; then
	exit 0
fi
echo "  IMAGE   $out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,proc,sys,dev,tmp,run,var,root,test,lib/modules/extra}
cp /usr/bin/busybox "$stage/bin/busybox"
for applet in $(busybox --list); do
	[ -e "$stage/bin/$applet" ] || ln -s busybox "$stage/bin/$applet"
done
copy() {	# copy a file keeping its path, and follow one level of symlink
	local f=$1
	mkdir -p "$stage$(dirname "$f")"
	cp -L "$f" "$stage$f"
}
for b in "${bins[@]}"; do
	copy "$b"
	ldd "$b" | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | while read -r lib; do
		[ -e "$stage$lib" ] || copy "$lib"
	done
done
install -m 0755 "$here/guest-init.sh" "$stage/init"
echo 'root:x:0:0:root:/root:/bin/sh' > "$stage/etc/passwd"
echo 'root:x:0:' > "$stage/etc/group"
printf 'DEVICE /dev/vd*\nCREATE owner=root group=root mode=0660 auto=yes\n' > "$stage/etc/mdadm.conf"
mkdir -p "$stage/etc/mdadm"
cp "$stage/etc/mdadm.conf" "$stage/etc/mdadm/mdadm.conf"
(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
echo "$inputs" > "$out.from"
