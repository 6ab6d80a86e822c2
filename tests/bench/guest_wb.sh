# Guest side of the writeback benchmark (issue #5), busybox sh, sourced
# after /test/lib.sh.  Set by the host: PHASE (drain|full), DRAIN_MB,
# OFF_MB, FULL_S.  Prints PROGRESS lines and WB key=value lines.
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die "insmod dm-pmemcache"

now() { awk '{print $1}' /proc/uptime; }
since() { awk "BEGIN{printf \"%.3f\", $(now) - $1}"; }
pmc() {		# pmc FEATURES...: a cache over md0
	sz=$(blockdev --getsz /dev/md0)
	dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 $*" || die "create $1"
}
field() { dmsetup status pc | awk "{print \$$1}"; }	# field N: status word N

make_md 5 4
STRIPE_KB=$(( $(cat /sys/block/md0/queue/optimal_io_size) / 1024 ))
echo "WB stripe_kb=$STRIPE_KB"

if [ "$PHASE" = drain ]; then
	# Raw md raid5, whole aligned stripes written sequentially.
	echo "PROGRESS raw md raid5: ${DRAIN_MB} MiB of ${STRIPE_KB} KiB full-stripe writes"
	t0=$(now)
	fio --name=stripe --filename=/dev/md0 --direct=1 --ioengine=libaio \
		--rw=write --bs=${STRIPE_KB}k --iodepth=8 --size=${DRAIN_MB}m \
		--offset=0 > /dev/null 2>&1 || die "raw stripe fio"
	echo "WB sys=raw mb=$DRAIN_MB s=$(since $t0)"

	for mode in on off; do
		mb=$DRAIN_MB feat="5 high_watermark 100 low_watermark 100 format"
		[ $mode = off ] && mb=$OFF_MB feat="7 high_watermark 100 low_watermark 100 stripe_blocks 0 format"
		# shellcheck disable=SC2086
		pmc $feat
		echo "PROGRESS dm-pmemcache stripe $mode: fill ${mb} MiB of random 4 KiB writes"
		fio --name=fill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
			--rw=randwrite --bs=4k --iodepth=16 --size=${mb}m \
			--offset=256m > /dev/null 2>&1 || die "fill fio"
		echo "PROGRESS dm-pmemcache stripe $mode: drain $(field 5) dirty blocks"
		set -- $(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
		c0=$1
		t0=$(now)
		dmsetup message pc 0 flush || die "flush"
		s=$(since $t0)
		set -- $(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
		echo "WB sys=stripe-$mode mb=$mb s=$s cpu_ticks=$(($1 - c0)) full_stripes=$(field 29) flushes=$(field 30) stripe_blocks=$(field 28) dirty_after=$(field 5)"
		t0=$(now)
		dmsetup message pc 0 flush || die "clean flush"
		echo "WB sys=clean-flush-$mode s=$(since $t0)"
		dmsetup remove pc
	done
fi

if [ "$PHASE" = full ]; then
	# What the origin absorbs: 4 KiB random writes straight to md raid5.
	echo "PROGRESS raw md raid5: 4 KiB random writes for 20 s"
	fio --name=raw --filename=/dev/md0 --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=16 --size=512m --offset=0 \
		--time_based --runtime=20 --output-format=terse \
		--output=/tmp/fio.terse > /dev/null 2>&1 || die "raw fio"
	# terse v3: field 49 is the write IOPS
	iops=$(cut -d';' -f49 /tmp/fio.terse | head -1)
	echo "WB sys=raw-rand iops=$iops"
	rate=$((iops * 2))
	pmc 3 full_wait 100 format
	echo "PROGRESS dm-pmemcache: $rate IOPS of 4 KiB random writes (2x the origin) for ${FULL_S} s into $(field 4) blocks"
	fio --name=full --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=16 --size=1024m --offset=0 \
		--rate_iops=$rate --time_based --runtime=$FULL_S \
		--percentile_list=50:99:99.9 --output-format=json \
		--output=/tmp/fio.json > /dev/null 2>&1
	rc=$?
	echo "FIOJSON full $(tr -d '\n\t' < /tmp/fio.json)"
	echo "WB sys=full rc=$rc rate=$rate blocks=$(field 4) dirty=$(field 5) full_waits=$(field 31) full_around=$(field 32) write_around=$(field 13) wb_errors=$(field 20)"
	dmsetup message pc 0 flush || die "flush"
	dmsetup remove pc
fi
echo "WB done=1"
exit 0
