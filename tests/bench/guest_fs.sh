# Guest side of the file-system benchmark (issue 32), busybox sh, sourced
# after /test/lib.sh.  Set by the host: RT (s per timed fio run), REPEATS
# (rounds), NFILES (files per fio job), FSIZE_K (KiB per file), JOBS.
# The files are laid out by a first fio run (create_only), not timed; the
# caches' status before and after the timed run is printed
# ("CST SYS-FS R before|after <dmsetup status>"), so that the host can
# tell what writeback and eviction did during it.
#
# One boot: md raid5 over vda..vdd as the origin, one NVDIMM.  Systems:
# md (the array alone), pmc (dm-pmemcache on the raw namespace, its
# defaults), wc (dm-writecache in pmem mode on the fsdax namespace, its
# defaults, as make bench sets it up).  In round r every system in turn,
# the order rotating round by round; on each, ext4 and then XFS made
# afresh on the whole device and mounted, and fio's small-file fsync load:
# JOBS jobs, each NFILES files of FSIZE_K KiB laid out first (not timed),
# then random 4 KiB writes over them with an fsync after each (fsync=1,
# a mail-server's pattern) for RT s.  Each cache is formatted afresh for
# each run and removed after it as it is.
#
# Prints PROGRESS lines, "FS key=value" lines and one
# "FIOJSON SYS-FS small R {json}" line per timed run; FSDONE=1 at the end.
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die "insmod dm-pmemcache"
make_md raid5 4
SZ=$(blockdev --getsz /dev/md0)
echo "FS origin_sectors=$SZ cpus=$(grep -c ^processor /proc/cpuinfo) kernel=$(uname -r)"

NS=none	# what ns_mode (lib.sh) last made of namespace0.0

# up SYS: the device of SYS in DEV
up() {
	case $1 in
	md) DEV=/dev/md0 ;;
	pmc)
		ns_mode raw
		dm_create pc "0 $SZ pmemcache /dev/md0 /dev/pmem0 4096 1 format" || die "create pmc"
		DEV=/dev/mapper/pc CACHE=pc ;;
	wc)
		ns_mode fsdax
		dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 conv=fsync 2>/dev/null
		dm_create wc "0 $SZ writecache p /dev/md0 /dev/pmem0 4096 0" || die "create wc"
		DEV=/dev/mapper/wc CACHE=wc ;;
	esac
}

# down SYS: the cache removed as it is (the next run formats it afresh)
down() {
	case $1 in
	pmc) dmsetup remove pc || die "remove pmc" ;;
	wc) dmsetup remove wc || die "remove wc" ;;
	esac
}

mkdir -p /mnt/fs
r=1
while [ $r -le "$REPEATS" ]; do
	case $((r % 3)) in
	1) order="md pmc wc" ;;
	2) order="pmc wc md" ;;
	0) order="wc md pmc" ;;
	esac
	for s in $order; do
		for fs in ext4 xfs; do
			echo "PROGRESS round $r: $s, $fs"
			echo "<4>pmc-bench: measuring $s-$fs round $r" > /dev/kmsg
			up $s
			case $fs in
			ext4) /sbin/mke2fs -q -t ext4 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$DEV" ;;
			xfs) /usr/sbin/mkfs.xfs -q -f -K "$DEV" ;;
			esac || die "mkfs $fs on $s"
			mount -t $fs "$DEV" /mnt/fs || die "mount $fs on $s"
			fio --name=small --directory=/mnt/fs --numjobs="$JOBS" --nrfiles="$NFILES" \
				--filesize="${FSIZE_K}k" --create_only=1 > /tmp/fio.err 2>&1 ||
				die "fio layout on $s $fs: $(head -c 300 /tmp/fio.err)"
			sync
			[ $s = md ] || echo "CST $s-$fs $r before $(dmsetup status $CACHE)"
			fio --name=small --directory=/mnt/fs --numjobs="$JOBS" --nrfiles="$NFILES" \
				--filesize="${FSIZE_K}k" --bs=4k --rw=randwrite --fsync=1 \
				--ioengine=psync --time_based --runtime="$RT" --group_reporting \
				--percentile_list=50:99:99.9 --output-format=json \
				--output=/tmp/fio.json > /tmp/fio.err 2>&1
			rc=$?
			[ $s = md ] || echo "CST $s-$fs $r after $(dmsetup status $CACHE)"
			[ $rc = 0 ] || echo "PROGRESS $s $fs fio rc $rc: $(head -c 300 /tmp/fio.err | tr '\n' ' ')"
			echo "FS sys=$s fs=$fs r=$r fio_rc=$rc"
			echo "FIOJSON $s-$fs small $r $(tr -d '\n\t' < /tmp/fio.json)"
			umount /mnt/fs || die "umount $fs on $s"
			down $s
		done
	done
	r=$((r + 1))
done
echo "FSDONE=1"
