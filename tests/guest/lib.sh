# Helpers for guest scripts (busybox sh). Sourced by every test script.
# Results are KEY=value lines on the script's own output channel (not the
# kernel console), which the host parses.

die() {
	echo "FAIL: $*"
	exit 1
}

# make_md LEVEL NDISKS [extra mdadm args]: /dev/md0 over vda, vdb, ...
# --assume-clean: the members are fresh zeroed files, so there is nothing
# to resync (and a TCG resync would take minutes).
make_md() {
	level=$1 count=$2 n=$2
	shift 2
	devs=
	for l in a b c d e f g h; do
		[ $n -gt 0 ] || break
		devs="$devs /dev/vd$l"
		n=$((n - 1))
	done
	chunk=--chunk=64
	[ "$level" = raid1 ] || [ "$level" = 1 ] && chunk=
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean \
		--level="$level" --raid-devices=$count $chunk "$@" $devs 2>&1 ||
		die "mdadm --create level $level"
	[ -b /dev/md0 ] || die "no /dev/md0"
}

# dm_create NAME TABLE: create a dm device and make its /dev/mapper node
# (there is no udev in the guest). A mirrored cache that copies a half
# online is waited for: the tests use both halves as current.
dm_create() {
	dmsetup create --noudevsync "$1" --table "$2" || return 1
	dmsetup mknodes "$1"
	[ -b "/dev/mapper/$1" ] || die "no block device /dev/mapper/$1"
	wait_resync "$1"
}

# wait_resync NAME [SECONDS]: until the online copy of a mirrored cache
# ended (health without mirror_resync); fails the script after SECONDS.
# (busybox sh has no "local": the name is its own, callers use $t and such)
wait_resync() {
	_resync_wait=${2:-300}
	while dmsetup status "$1" | grep -q mirror_resync; do
		_resync_wait=$((_resync_wait - 1))
		[ $_resync_wait -ge 0 ] || die "resync of $1 still running"
		sleep 1
	done
}

# fio_verify DEV [fio args]: write then read back with crc32c checksums;
# fails the script on any mismatch.
fio_verify() {
	dev=$1
	shift
	[ -b "$dev" ] || die "$dev is not a block device"
	fio --name=verify --filename="$dev" --direct=1 --ioengine=psync \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "$@" ||
		die "fio verify on $dev"
}

# klog_run TAG CMD...: run CMD, then append "@@ TAG rc" and the kernel
# lines it caused (raw, with their levels) to /tmp/k. Start with
# "dmesg -c" so that nothing older is counted. klog_summary sums it up.
klog_run() {
	tag=$1
	shift
	rc=0
	"$@" 2>/dev/null || rc=$?
	echo "@@ $tag $rc" >> /tmp/k
	dmesg -r -c >> /tmp/k
}

# dm_try NAME TABLE: create a device and remove it again; fails if refused.
dm_try() {
	dmsetup create --noudevsync "$1" --table "$2" || return 1
	dmsetup remove --noudevsync "$1" || die "remove $1"
}

# klog_summary: one line per klog_run, "R TAG rc T I O|reason": T lines
# "device-mapper: table:" (the reason a table was refused), I lines
# "device-mapper: ioctl: error adding target to table" (dm core's own),
# O other error/warning lines (the reason of a refused message). Info
# lines are not counted; other kernel lines (e.g. "hrtimer: interrupt
# took", TCG noise) are printed as "KLOG ..." for the harness to check.
klog_summary() {
	awk '
	function out() { if (tag != "") printf "R %s %d %d %d %d|%s\n", tag, rc, nt, ni, no, why }
	/^@@ / { out(); tag = $2; rc = $3; nt = ni = no = 0; why = ""; next }
	/^<[5-7]>/ { next }
	/device-mapper: table: / { nt++; sub(/.*device-mapper: table: [0-9:]+: /, ""); why = $0; next }
	/device-mapper: ioctl: error adding target to table/ { ni++; next }
	/device-mapper: (pmemcache|ioctl): / { no++; sub(/.*device-mapper: [a-z]+: /, ""); why = $0; next }
	{ print "KLOG " $0 }
	END { out() }' /tmp/k
	: > /tmp/k
}

# tagged_blocks TAG N FILE: N blocks of 4 KiB into FILE, block i starting
# with TAG and i in 4 digits, then random bytes and a NUL (where
# `strings` stops); tag_offsets TAG DEV then prints the byte offset of
# each such block on DEV (busybox grep has no -b: the offset of the tag
# in its printable run).
tagged_blocks() {
	i=0
	: > "$3"
	while [ $i -lt "$2" ]; do
		printf "%s%04d" "$1" $i > /tmp/blk
		head -c $((4096 - ${#1} - 5)) /dev/urandom >> /tmp/blk
		printf '\000' >> /tmp/blk
		cat /tmp/blk >> "$3"
		i=$((i + 1))
	done
}

tag_offsets() {
	strings -t d -n $((${#1} + 4)) "$2" | awk -v t="$1" '{ s = $0;
		sub(/^ *[0-9]+ /, "", s); i = index(s, t); if (i) print $1 + i - 1 }'
}

# read_back TAG N: the first N blocks of 4 KiB of /dev/mapper/pc into
# /tmp/r, compared with /tmp/a: READ_RC_TAG, and READ_OK_TAG=1 if equal
read_back() {
	rc=0
	dd if=/dev/mapper/pc of=/tmp/r bs=4096 count="$2" iflag=direct 2>/dev/null || rc=$?
	echo "READ_RC_$1=$rc"
	if cmp -s /tmp/a /tmp/r; then echo "READ_OK_$1=1"; fi
}

# flush_pc: the flush message to pc (at most 120 s): FLUSH_RC
flush_pc() {
	rc=0
	timeout 120 dmsetup message pc 0 flush || rc=$?
	echo "FLUSH_RC=$rc"
}

# unbind_pmem DEV: take pmem disk DEV's namespace away (a dead NVDIMM)
unbind_pmem() {
	ns=$(basename "$(readlink -f /sys/block/$1/device)")
	echo "$ns" > /sys/bus/nd/drivers/nd_pmem/unbind || die "unbind $1"
	[ ! -b /dev/$1 ] || die "$1 still there"
}

# ns_mode raw|fsdax: namespace0.0 in that mode (fsdax with its struct pages
# in RAM, -M mem), unless $NS says it is already; the benchmarks' guests
ns_mode() {
	[ "$1" = "${NS:-}" ] && return
	case $1 in
	raw) ndctl create-namespace -f -e namespace0.0 -m raw >/dev/null 2>&1 ;;
	fsdax) ndctl create-namespace -f -e namespace0.0 -m fsdax -M mem >/dev/null 2>&1 ;;
	esac || die "ndctl $1"
	[ -b /dev/pmem0 ] || die "no /dev/pmem0 after ndctl $1"
	NS=$1
}
