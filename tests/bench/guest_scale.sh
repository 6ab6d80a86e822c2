# Guest side of the scale benchmark (issue 15), busybox sh, sourced after
# /test/lib.sh.  One boot per pmem size.  Set by the host: RT (s per timed
# run), WS_MB (working set of the timed runs), REPEATS (timed runs).
# Prints PROGRESS lines, "SCALE key=value" lines, "MEM at=WHEN ..." lines
# (/proc/meminfo, kB), one "FIOJSON qd1 REPEAT {json}" line per timed run,
# and "HOSTMARK NAME" lines at which the host reads the QEMU process's CPU
# time (run_scale_bench.py polls this channel every 20 ms).
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die "insmod dm-pmemcache"

now() { awk '{print $1}' /proc/uptime; }
since() { awk "BEGIN{printf \"%.2f\", $(now) - $1}"; }
# busy and total CPU ticks (USER_HZ) over all CPUs
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
# MEM at=WHEN MemFree=.. Slab=.. VmallocUsed=.. Percpu=.. (kB), after
# writing out and dropping the page cache, so that MemFree moves only
# with what the kernel allocated
mem() {
	sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
	echo "MEM at=$1 $(awk '/^(MemFree|Slab|VmallocUsed|Percpu|PageTables):/{sub(":", "", $1); printf "%s=%s ", $1, $2}' /proc/meminfo)"
}
field() { dmsetup status pc | awk "{print \$$1}"; }	# field N: status word N

# The origin: md raid1 over two unthrottled disks.  Nothing reaches it
# during the timed runs: the working set stays far below the low watermark.
make_md raid1 2
TABLE="0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem0 4096"
echo "SCALE pmem_bytes=$(blockdev --getsize64 /dev/pmem0) memtotal_kb=$(awk '/^MemTotal:/{print $2}' /proc/meminfo)"

echo "PROGRESS create with format"
mem before_format
t0=$(now)
dm_create pc "$TABLE 1 format" || die "create with format"
echo "SCALE create_format_s=$(since $t0)"
mem after_format
echo "SCALE blocks=$(field 4) ram_bytes_per_block=$(field 23) route=$(field 24)"
dmsetup remove pc || die "remove"
mem after_remove

echo "PROGRESS create again: recovery load of an empty cache"
t0=$(now)
dm_create pc "$TABLE" || die "create (load)"
echo "SCALE create_load_empty_s=$(since $t0)"
mem after_load

echo "PROGRESS prefill ${WS_MB} MiB"
fio --name=prefill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
	--rw=write --bs=1m --iodepth=4 --size=${WS_MB}m --offset=0 > /dev/null 2>&1 ||
	die "prefill fio"
echo "SCALE prefill_dirty=$(field 5)"

# the QEMU process's CPU time while the guest sleeps
echo "HOSTMARK idle0"
sleep 5
echo "HOSTMARK idle1"

r=1
while [ $r -le $REPEATS ]; do
	echo "PROGRESS 4 KiB random writes QD1 over ${WS_MB} MiB for ${RT} s (run $r)"
	set -- $(cpu_ticks); b0=$1 a0=$2
	echo "HOSTMARK run0-$r"
	sleep 0.5
	fio --name=qd1 --filename=/dev/mapper/pc --direct=1 --ioengine=psync \
		--rw=randwrite --bs=4k --size=${WS_MB}m --offset=0 \
		--time_based --runtime=$RT --percentile_list=50:99:99.9 \
		--output-format=json --output=/tmp/fio.json > /tmp/fio.err 2>&1 ||
		echo "PROGRESS fio failed: $(head -c 300 /tmp/fio.err | tr '\n' ' ')"
	echo "HOSTMARK run1-$r"
	set -- $(cpu_ticks)
	echo "SCALE r=$r busy_ticks=$(($1 - b0)) total_ticks=$(($2 - a0)) dirty=$(field 5) write_hits=$(field 11) write_new=$(field 12) write_around=$(field 13) wb_blocks=$(( $(field 16) + $(field 18) ))"
	echo "FIOJSON qd1 $r $(tr -d '\n\t' < /tmp/fio.json)"
	r=$((r + 1))
done

dmsetup remove pc || die "remove"
echo "PROGRESS create again: recovery load with ${WS_MB} MiB dirty"
t0=$(now)
dm_create pc "$TABLE" || die "create (load, dirty)"
echo "SCALE create_load_dirty_s=$(since $t0) dirty_after_load=$(field 5)"
dmsetup remove pc
echo "SCALE done=1 cpus=$(grep -c ^processor /proc/cpuinfo) clk_tck=100"
exit 0
