# Helpers for guest scripts (busybox sh). Sourced by every test script.
# Results go to the console as KEY=value lines that the host parses.

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
# (there is no udev in the guest).
dm_create() {
	dmsetup create --noudevsync "$1" --table "$2" || return 1
	dmsetup mknodes "$1"
	[ -b "/dev/mapper/$1" ] || die "no block device /dev/mapper/$1"
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
