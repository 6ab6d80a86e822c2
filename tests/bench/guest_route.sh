# Guest side of the route bench (tests/bench/run_route_bench.py; busybox
# sh, sourced after /test/lib.sh).  Set by the host: LAYOUT (raid5|raid1),
# ROUNDS, DRAIN_MB.
# One md array for the whole boot.  Each round drains a fresh cache
# filled with DRAIN_MB of random 4 KiB writes twice, once through
# page-less bios (writeback pfn) and once through DRAM bounce pages
# (writeback bounce), in alternating order, so that drift over the boot
# falls on both routes alike.  Prints "HOSTMARK" lines around each timed
# drain (the host reads QEMU's CPU time there) and one "ROUTE" line per
# drain.
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
export DRAIN_SIZE=${DRAIN_MB}M DRAIN_OFF=512M DEV=/dev/mapper/pc

now() { awk '{print $1}' /proc/uptime; }
# busy and total CPU ticks (USER_HZ) over all CPUs
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
# written back through pfn bios, through bounce pages, pfn refused
routes() { dmsetup status pc | awk '{print $16, $18, $21}'; }

if [ "$LAYOUT" = raid5 ]; then make_md 5 4; else make_md raid1 2; fi
ndctl create-namespace -f -e namespace0.0 -m raw > /dev/null 2>&1
[ -b /dev/pmem0 ] || die "no /dev/pmem0"

echo "HOSTMARK idle0"
sleep 3
echo "HOSTMARK idle1"

r=1
while [ $r -le $ROUNDS ]; do
	if [ $((r % 2)) = 1 ]; then order="pfn bounce"; else order="bounce pfn"; fi
	for route in $order; do
		# in the kernel log too: run_bench.crash() names the route of a report
		echo "<4>pmc-bench: measuring $route" > /dev/kmsg
		dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 conv=fsync 2>/dev/null
		dm_create pc "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem0 4096 7 writeback $route high_watermark 100 low_watermark 100 format" ||
			die "create $route"
		fio /test/bench/drain_fill.fio > /tmp/fio.out 2>&1 || { cat /tmp/fio.out; die "fill"; }
		echo 3 > /proc/sys/vm/drop_caches
		dirty=$(dmsetup status pc | awk '{print $5}')
		echo "HOSTMARK d0-$route-$r"
		sleep 0.5	# the host reads the mark within about 20 ms
		set -- $(cpu_ticks); b0=$1 a0=$2
		t0=$(now)
		dmsetup message pc 0 flush || die "flush $route"
		t1=$(now)
		set -- $(cpu_ticks)
		echo "HOSTMARK d1-$route-$r"
		echo "ROUTE route=$route round=$r dirty=$dirty drain_s=$(awk "BEGIN{print $t1-$t0}") busy_ticks=$(($1 - b0)) total_ticks=$(($2 - a0)) routes=$(routes | tr ' ' ,)"
		dmsetup remove pc || die "remove $route"
	done
	echo "PROGRESS round $r of $ROUNDS done"
	r=$((r + 1))
done
echo DONE=1
