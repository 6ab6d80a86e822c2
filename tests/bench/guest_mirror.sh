# Guest side of the mirror benchmark (issue 31), busybox sh, sourced after
# /test/lib.sh.  One boot, two NVDIMMs (/dev/pmem0 and /dev/pmem1, each its
# own region), md raid1 over two unthrottled disks as the origin.  Set by
# the host: RT (s per timed fio run), WS_MB (working set of the timed
# runs), REPEATS (rounds of the fio part), RESYNC_REPEATS (rounds of the
# resync part), DD4K (1: also time a raw copy with 4 KiB blocks).
#
# Part 1, alternating rounds: in round r, single-device and mirrored
# dm-pmemcache one after the other (single first in odd rounds, mirrored
# first in even ones), each formatted afresh on the same origin, with
# writeback off (high_watermark 100 low_watermark 100): MemFree & co.
# before and after the create, a sequential prefill of the working set,
# then 4 KiB random writes QD1 with an fsync after each, then QD32 x 4
# jobs, every write a rewrite of a dirty cached block.
# Part 2, resync rounds: blank pmem1, a single-device cache on pmem0 filled
# with dirty blocks (all but 1 MiB of it, so that writeback never starts),
# its recovery load timed, then its first load with `mirror /dev/pmem1`
# (the copy to the blank half) timed, and a raw copy of the same bytes
# pmem0 -> pmem1 with dd (O_DIRECT), before the resync in odd rounds and
# after it in even ones.
#
# Prints PROGRESS lines, "MB key=value" lines (sys=, r= select the run),
# "MEM at=WHEN ..." lines (/proc/meminfo, kB) and one
# "FIOJSON SYS JOB ROUND {json}" line per timed fio run, and "HOSTMARK
# run0-SYS-JOB-rROUND" / "run1-..." around each, at which the host reads
# the QEMU process's CPU time (tests/bench/hostcpu.py); likewise around
# the timed creates and the raw copy of the resync part.
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die "insmod dm-pmemcache"
[ -b /dev/pmem1 ] || die "no /dev/pmem1"

now() { awk '{print $1}' /proc/uptime; }
since() { awk "BEGIN{printf \"%.3f\", $(now) - $1}"; }
# busy and total CPU ticks (USER_HZ) over all CPUs
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
# MEM at=WHEN MemFree=.. (kB) after writing out and dropping the page
# cache, so that MemFree moves only with what the kernel allocated
mem() {
	sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
	echo "MEM at=$1 $(awk '/^(MemFree|Slab|VmallocUsed|Percpu|PageTables):/{sub(":", "", $1); printf "%s=%s ", $1, $2}' /proc/meminfo)"
}
field() { dmsetup status pc | awk "{print \$$(($1 + 3))}"; }	# status field N (docs/dm-pmemcache.rst)
health() { dmsetup status pc | awk '{print $NF}'; }
# the cache's counters, as PREFIXname=value
counters() {
	echo "dirty$1=$(field 2) free$1=$(field 3) write_hits$1=$(field 8) write_new$1=$(field 9) write_around$1=$(field 10) flushes$1=$(field 12) wb_blocks$1=$(( $(field 13) + $(field 15) )) full_waits$1=$(field 28) health$1=$(health)"
}
# the time stamp of the last kernel log line matching $1 (printk clock, s)
klog_t() { dmesg | grep "$1" | tail -1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }

make_md raid1 2
SZ=$(blockdev --getsz /dev/md0)
P0=$(blockdev --getsize64 /dev/pmem0)
P1=$(blockdev --getsize64 /dev/pmem1)
region() { basename "$(dirname "$(readlink -f /sys/block/$1/device)")"; }	# its NFIT region
echo "MB origin_bytes=$((SZ * 512)) pmem0_bytes=$P0 pmem1_bytes=$P1 region0=$(region pmem0) region1=$(region pmem1) memtotal_kb=$(awk '/^MemTotal:/{print $2}' /proc/meminfo) cpus=$(grep -c ^processor /proc/cpuinfo)"
NOWB="high_watermark 100 low_watermark 100"
TABLE="0 $SZ pmemcache /dev/md0 /dev/pmem0 4096"
# table features per system, and the same with format
args() {
	case $1 in
	single) echo "4 $NOWB" ;;
	mirror) echo "6 $NOWB mirror /dev/pmem1" ;;
	single-format) echo "5 $NOWB format" ;;
	mirror-format) echo "7 $NOWB mirror /dev/pmem1 format" ;;
	esac
}

# Every page of both NVDIMM files written once before anything is timed:
# a first store to a page of a sparse share=on file costs the host a page
# fault and a block of its file system, which must not fall on one system.
for p in pmem0 pmem1; do
	echo "PROGRESS write all of /dev/$p once"
	t0=$(now)
	dd if=/dev/zero of=/dev/$p bs=1M count=$(($(blockdev --getsize64 /dev/$p) / 1048576)) \
		oflag=direct 2>/dev/null || die "write all of /dev/$p"
	echo "MB touch_$p=$(since $t0)"
done

# ---- part 1: latency, IOPS and DRAM, alternating rounds ----
fio_run() {	# fio_run SYS JOB ROUND FIO-ARGS...
	s=$1 job=$2 rr=$3
	shift 3
	echo "MB sys=$s r=$rr job=$job $(counters _before)"
	set -- $(cpu_ticks) "$@"
	b0=$1 a0=$2
	shift 2
	echo "HOSTMARK run0-$s-$job-r$rr"
	fio --name=$job --filename=/dev/mapper/pc --direct=1 --rw=randwrite --bs=4k \
		--size=${WS_MB}m --offset=0 --time_based --runtime=$RT \
		--percentile_list=50:99:99.9 --output-format=json --output=/tmp/fio.json \
		"$@" > /tmp/fio.err 2>&1
	rc=$?
	echo "HOSTMARK run1-$s-$job-r$rr"
	[ $rc = 0 ] || echo "PROGRESS $s $job fio rc $rc: $(head -c 300 /tmp/fio.err | tr '\n' ' ')"
	set -- $(cpu_ticks)
	echo "MB sys=$s r=$rr job=$job fio_rc=$rc busy_ticks=$(($1 - b0)) total_ticks=$(($2 - a0)) $(counters)"
	echo "FIOJSON $s $job $rr $(tr -d '\n\t' < /tmp/fio.json)"
}

measure() {	# measure SYS ROUND
	s=$1 rr=$2
	echo "<4>pmc-bench: measuring $s round $rr" > /dev/kmsg
	mem before_$s-$rr
	t0=$(now)
	dm_create pc "$TABLE $(args $s-format)" || die "create $s (round $rr)"
	echo "MB sys=$s r=$rr create_s=$(since $t0) blocks=$(field 1) ram_bytes_per_block=$(field 20) health=$(health) table=$(dmsetup table pc | cut -d' ' -f4- | tr ' ' ,)"
	mem after_$s-$rr
	echo "PROGRESS round $rr, $s: prefill ${WS_MB} MiB"
	fio --name=prefill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
		--rw=write --bs=1m --iodepth=4 --size=${WS_MB}m --offset=0 > /dev/null 2>&1 ||
		die "prefill fio ($s, round $rr)"
	mem prefilled_$s-$rr
	echo "PROGRESS round $rr, $s: 4 KiB random writes QD1 + fsync for ${RT} s"
	fio_run $s qd1_fsync $rr --ioengine=psync --fsync=1
	echo "PROGRESS round $rr, $s: 4 KiB random writes QD32 x 4 jobs for ${RT} s"
	fio_run $s qd32_4jobs $rr --ioengine=libaio --iodepth=32 --numjobs=4 --group_reporting
	dmsetup remove pc || die "remove $s (round $rr)"
}

r=1
while [ $r -le $REPEATS ]; do
	if [ $((r % 2)) = 1 ]; then order="single mirror"; else order="mirror single"; fi
	for s in $order; do
		measure $s $r
	done
	r=$((r + 1))
done

# ---- part 2: resync of a full single-device cache to a blank half ----
blank_pmem1() {	# every byte: a half left from before would make the copy skip equal records
	t0=$(now)
	dd if=/dev/zero of=/dev/pmem1 bs=1M count=$((P1 / 1048576)) oflag=direct 2>/dev/null ||
		die "blank pmem1"
	echo "MB sys=resync r=$1 $2=$(since $t0)"
}
raw_copy() {	# raw_copy ROUND BYTES: dd of BYTES from pmem0 to pmem1, O_DIRECT
	echo "PROGRESS resync round $1: raw copy of $2 bytes, pmem0 -> pmem1 (dd, 1 MiB blocks)"
	echo "HOSTMARK raw0-r$1"
	t0=$(now)
	dd if=/dev/pmem0 of=/dev/pmem1 bs=1M count=$2 iflag=direct,count_bytes oflag=direct \
		2>/dev/null || echo "PROGRESS raw copy failed"
	echo "MB sys=resync r=$1 raw_s=$(since $t0)"
	echo "HOSTMARK raw1-r$1"
	if [ "$DD4K" = 1 ]; then
		echo "PROGRESS resync round $1: raw copy, 4 KiB blocks"
		t0=$(now)
		dd if=/dev/pmem0 of=/dev/pmem1 bs=4k count=$2 iflag=direct,count_bytes oflag=direct \
			2>/dev/null || echo "PROGRESS raw copy (4 KiB) failed"
		echo "MB sys=resync r=$1 raw4k_s=$(since $t0)"
	fi
}

r=1
while [ $r -le $RESYNC_REPEATS ]; do
	echo "<4>pmc-bench: measuring resync round $r" > /dev/kmsg
	echo "PROGRESS resync round $r: blank pmem1, a single-device cache on pmem0"
	blank_pmem1 $r blank_s
	dm_create pc "$TABLE $(args single-format)" || die "create single (resync round $r)"
	N=$(field 1)
	# all but 1 MiB of the cache: below high_watermark 100, so no writeback
	FILL_MB=$(( (N - 1) * 4096 / 1048576 ))
	echo "PROGRESS resync round $r: fill ${FILL_MB} MiB of the ${N}-block cache"
	t0=$(now)
	fio --name=fill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
		--rw=write --bs=1m --iodepth=4 --size=${FILL_MB}m --offset=0 > /dev/null 2>&1 ||
		die "fill fio (resync round $r)"
	echo "MB sys=resync r=$r blocks=$N fill_mb=$FILL_MB fill_s=$(since $t0) $(counters _filled)"
	LIVE=$((N - $(field 3)))
	dmsetup remove pc || die "remove (resync round $r)"
	echo "PROGRESS resync round $r: recovery load of the single-device cache"
	echo "HOSTMARK load0-r$r"
	t0=$(now)
	dm_create pc "$TABLE $(args single)" || die "reload single (resync round $r)"
	t1=$(since $t0)
	echo "HOSTMARK load1-r$r"
	echo "MB sys=resync r=$r single_load_s=$t1 single_load_dirty=$(field 2) single_load_free=$(field 3)"
	dmsetup remove pc || die "remove (resync round $r)"
	# what the copy writes to the blank half: the superblock area, every
	# slot's record (each differs from a blank one) and a block of data per
	# live slot (mirror.c: pmc_mirror_copy_records(), pmc_mirror_copy_slot())
	BYTES=$(( 4096 + N * 32 + LIVE * 4096 ))
	BYTES=$(( (BYTES + 4095) / 4096 * 4096 ))
	echo "MB sys=resync r=$r live=$LIVE copy_bytes=$BYTES"
	if [ $((r % 2)) = 1 ]; then
		raw_copy $r $BYTES
		blank_pmem1 $r reblank_s
	fi
	echo "PROGRESS resync round $r: first load with mirror /dev/pmem1 (copy to the blank half)"
	echo "HOSTMARK resync0-r$r"
	echo "pmc-bench: first mirrored load r$r" > /dev/kmsg
	t0=$(now)
	# dm_create waits for the online copy to end (it polls once a second)
	dm_create pc "$TABLE $(args mirror)" || die "create mirror (resync round $r)"
	t1=$(since $t0)
	echo "HOSTMARK resync1-r$r"
	echo "MB sys=resync r=$r mirror_first_s=$t1 copy_t=$(klog_t "pmc-bench: first mirrored load r$r") loaded_t=$(klog_t 'mirror: copy done') mirror_dirty=$(field 2) mirror_free=$(field 3) mirror_health=$(health)"
	dmesg | grep 'mirror: copying the half on' | tail -1 | sed 's/^\[[^]]*\] */MB_LOG /'
	dmsetup remove pc || die "remove mirror (resync round $r)"
	echo "PROGRESS resync round $r: the second load of the pair (halves in sync)"
	t0=$(now)
	dm_create pc "$TABLE $(args mirror)" || die "reload mirror (resync round $r)"
	echo "MB sys=resync r=$r mirror_again_s=$(since $t0) mirror_again_dirty=$(field 2)"
	dmsetup remove pc || die "remove mirror (resync round $r)"
	if [ $((r % 2)) = 0 ]; then
		raw_copy $r $BYTES
	fi
	r=$((r + 1))
done
echo "MB done=1"
exit 0
