#!/bin/bash
# Build the Debian packages of dm-pmemcache with dpkg-deb from staged trees
# (no debian/rules: the module is built out of tree against $KBUILD):
#   pmemcachectl                       the tool, man page, udev rule, unit, completion
#   dm-pmemcache-modules-<release>     dm-pmemcache.ko for the patched kernel <release>
# and run lintian on each (a lintian error fails the build).
# usage: mkdeb.sh OUTDIR KSRC KBUILD KCACHE PACKAGE...   (PACKAGE: pmemcachectl | modules)
# Everything is built in OUTDIR/build from copies of the sources, so that
# the build products of the checkout (userspace/pmemcachectl, the test
# builds of the module) are neither used nor touched.
set -euo pipefail
out=$1 ksrc=$2 kbuild=$3 kcache=$4
shift 4
repo=$(cd "$(dirname "$0")/.." && pwd)
pkgdir=$repo/packaging
umask 022
export LC_ALL=C.UTF-8

arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:?DEB_MAINTAINER is set by the Makefile}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct)}
upstream=$(sed -n 's/^#define PMCTL_VERSION[[:space:]]*"\(.*\)"/\1/p' "$repo/userspace/pmemcachectl.h")
commit=$(git -C "$repo" log -1 --format=%h)
snapshot=$upstream+git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d).$commit
git -C "$repo" diff --quiet HEAD -- userspace dm-pmemcache docs packaging || snapshot=$snapshot+dirty
version=${DEB_VERSION:-$snapshot-1}

build=$out/build
mkdir -p "$out" "$build"

# Copy the sources the packages are built from, without build products.
copy_sources() {
	rm -rf "$build/src"
	mkdir -p "$build/src/docs"
	rsync -a --exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
		--exclude='.*.cmd' --exclude='*.a' --exclude=modules.order --exclude=Module.symvers \
		--exclude=pmemcachectl --exclude=unit_test --exclude=mkimage \
		"$repo/userspace" "$repo/dm-pmemcache" "$build/src/"
	cp "$repo/docs/pmemcachectl.8" "$build/src/docs/"
}

# /usr/share/doc/PKG: the copyright file and changelog.Debian.gz.
add_doc() {
	local pkg=$1 root=$2 doc=$2/usr/share/doc/$1
	install -d "$doc"
	install -m 0644 "$pkgdir/copyright" "$doc/copyright"
	{
		echo "dm-pmemcache ($version) unstable; urgency=medium"
		echo
		echo "  * Snapshot of commit $commit, built by make deb."
		echo
		echo " -- $maintainer  $(date -R -u -d "@$SOURCE_DATE_EPOCH")"
	} | gzip -9n > "$doc/changelog.Debian.gz"
	chmod 0644 "$doc/changelog.Debian.gz"
}

# DEBIAN/md5sums, Installed-Size, dpkg-deb, lintian.
finish() {
	local pkg=$1 root=$2 deb=$out/${1}_${version}_$arch.deb
	(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
		xargs -0r md5sum) > "$root/DEBIAN/md5sums"
	chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control"
	find "$root" -type d -exec chmod 0755 {} +
	echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)" >> "$root/DEBIAN/control"
	rm -f "$out/${pkg}"_*.deb "$out/${pkg}"_*.deb.lintian
	dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
	echo "  DEB     $deb"
	# --fail-on error: warnings are printed (and explained in
	# packaging/*.lintian-overrides or the README) but do not fail.
	lintian --fail-on error --display-info "$deb" | tee "$deb.lintian"
}

build_pmemcachectl() {
	local root=$build/pmemcachectl src=$build/src/userspace
	echo "  BUILD   pmemcachectl $version"
	rm -rf "$root"
	# Debian's hardening flags (from the environment, so that the Makefile's
	# own flags are added to them), in the copy of the sources.
	(cd "$src" &&
		eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)" &&
		make -s pmemcachectl &&
		make -s install DESTDIR="$root" PREFIX=/usr SBINDIR=/usr/sbin \
			MANDIR=/usr/share/man UDEVRULESDIR=/usr/lib/udev/rules.d \
			SYSTEMDUNITDIR=/usr/lib/systemd/system \
			BASHCOMPDIR=/usr/share/bash-completion/completions)
	# What dh_strip does (no -dbgsym package), what dh_installman does.
	strip --remove-section=.comment --remove-section=.note --strip-unneeded \
		"$root/usr/sbin/pmemcachectl"
	gzip -9n "$root/usr/share/man/man8/pmemcachectl.8"
	add_doc pmemcachectl "$root"
	install -d "$root/DEBIAN"
	install -m 0755 "$pkgdir/pmemcachectl.postinst" "$root/DEBIAN/postinst"
	install -m 0755 "$pkgdir/pmemcachectl.postrm" "$root/DEBIAN/postrm"
	install -d "$root/usr/share/lintian/overrides"
	install -m 0644 "$pkgdir/pmemcachectl.lintian-overrides" \
		"$root/usr/share/lintian/overrides/pmemcachectl"

	# Depends from the ELF's NEEDED libraries and their shlibs/symbols files.
	local shl=$build/shlibdeps
	rm -rf "$shl" && mkdir -p "$shl/debian"
	printf 'Source: dm-pmemcache\n\nPackage: pmemcachectl\nArchitecture: any\n' > "$shl/debian/control"
	local depends
	depends=$(cd "$shl" && dpkg-shlibdeps -O "$root/usr/sbin/pmemcachectl" |
		sed -n 's/^shlibs:Depends=//p')
	[ -n "$depends" ] || { echo "mkdeb: dpkg-shlibdeps found no dependency" >&2; exit 1; }

	cat > "$root/DEBIAN/control" <<EOF
Package: pmemcachectl
Source: dm-pmemcache
Version: $version
Architecture: $arch
Maintainer: $maintainer
Depends: $depends
Recommends: dm-pmemcache-modules
Suggests: ndctl, mdadm
Section: admin
Priority: optional
Description: administration tool of dm-pmemcache, a write-back cache on pmem
 dm-pmemcache is a device-mapper target that uses persistent memory
 without struct page (a raw pmem namespace) as a crash-consistent
 write-back cache in front of md software RAID.
 .
 pmemcachectl creates, activates, inspects, drains and removes the caches.
 This package also has the udev rule and the systemd unit that activate
 the caches at boot, by identity, and the bash completion.
EOF
	finish pmemcachectl "$root"
}

build_modules() {
	[ -f "$kbuild/Module.symvers" ] ||
		{ echo "mkdeb: no kernel build at $kbuild (make kernel first)" >&2; exit 1; }
	local krel pkg root src=$build/src/dm-pmemcache
	krel=$(cat "$kbuild/include/config/kernel.release")
	pkg=dm-pmemcache-modules-$krel
	root=$build/modules
	echo "  BUILD   dm-pmemcache.ko for $krel"
	# The product module (no PMC_CUT_HOOKS), under the kernel build lock
	# (it builds in the kernel's O= folder), as tests/test_window_cuts.py.
	flock "$kcache/kernel-build.lock" \
		make -s -C "$ksrc" O="$kbuild" CC="ccache gcc" M="$src" modules
	local vermagic
	vermagic=$(modinfo -F vermagic "$src/dm-pmemcache.ko" | cut -d' ' -f1)
	[ "$vermagic" = "$krel" ] ||
		{ echo "mkdeb: module vermagic $vermagic is not $krel" >&2; exit 1; }
	rm -rf "$root"
	# extra/: where `make modules_install M=` puts out-of-tree modules.
	install -d "$root/lib/modules/$krel/extra"
	install -m 0644 "$src/dm-pmemcache.ko" "$root/lib/modules/$krel/extra/"
	# What dh_strip does to kernel modules.
	strip --remove-section=.comment --remove-section=.note --strip-debug \
		"$root/lib/modules/$krel/extra/dm-pmemcache.ko"
	add_doc "$pkg" "$root"
	install -d "$root/DEBIAN" "$root/usr/share/lintian/overrides"
	sed "s|@KREL@|$krel|g" "$pkgdir/modules.lintian-overrides.in" \
		> "$root/usr/share/lintian/overrides/$pkg"
	chmod 0644 "$root/usr/share/lintian/overrides/$pkg"
	local s
	for s in postinst postrm; do
		sed "s|@KREL@|$krel|g" "$pkgdir/modules.$s.in" > "$root/DEBIAN/$s"
		chmod 0755 "$root/DEBIAN/$s"
	done
	# linux-image-<release>: the name scripts/package/builddeb gives the
	# kernel image package (make deb-kernel); kmod for depmod.
	cat > "$root/DEBIAN/control" <<EOF
Package: $pkg
Source: dm-pmemcache
Version: $version
Architecture: $arch
Maintainer: $maintainer
Depends: linux-image-$krel, kmod
Provides: dm-pmemcache-modules
Section: kernel
Priority: optional
Description: dm-pmemcache kernel module for Linux $krel
 dm-pmemcache is a device-mapper target that uses persistent memory
 without struct page (a raw pmem namespace) as a crash-consistent
 write-back cache in front of md software RAID.
 .
 This package has dm-pmemcache.ko for the kernel $krel,
 which has the pfn I/O patches of dm-pmemcache (core-patches/).
EOF
	finish "$pkg" "$root"
}

copy_sources
for p in "$@"; do
	case $p in
	pmemcachectl) build_pmemcachectl ;;
	modules) build_modules ;;
	*) echo "mkdeb: unknown package $p" >&2; exit 2 ;;
	esac
done
