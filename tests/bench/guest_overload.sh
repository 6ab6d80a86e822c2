# Guest side of the sustained-overload benchmark (issue 15), busybox sh,
# sourced after /test/lib.sh.  Set by the host: RAW_S (s to measure bare
# md's IOPS), OVER_S (s per overload run), WS_MB (working set), QD (fio
# iodepth), REPEATS (rounds over SYSTEMS), SYSTEMS (md pmc wc), FILL_MB
# (random writes into a cache before its timed run, so that it starts full),
# RATE_X (the load offered, as a multiple of bare md's IOPS).
# Prints PROGRESS lines, "OVL key=value" lines and one
# "FIOJSON SYS REPEAT {json}" line per overload run.
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die "insmod dm-pmemcache"

MEMBERS="/dev/vda /dev/vdb /dev/vdc /dev/vdd"
md_up() { make_md 5 4; }
md_down() {
	mdadm --stop /dev/md0 >/dev/null 2>&1
	for d in $MEMBERS; do mdadm --zero-superblock $d >/dev/null 2>&1; done
}
zero_pmem() { dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 conv=fsync 2>/dev/null; }
NS=raw
ns_mode() {	# raw | fsdax (-M mem, as make bench's wc-mem)
	[ $1 = $NS ] && return
	case $1 in
	raw) ndctl create-namespace -f -e namespace0.0 -m raw >/dev/null 2>&1 ;;
	fsdax) ndctl create-namespace -f -e namespace0.0 -m fsdax -M mem >/dev/null 2>&1 ;;
	esac || echo "PROGRESS ndctl $1 failed"
	[ -b /dev/pmem0 ] || die "no /dev/pmem0 after ndctl $1"
	NS=$1
}
pmc_field() { dmsetup status pc | awk "{print \$$1}"; }
wc_field() { dmsetup status wc | awk "{print \$$1}"; }

# setup SYS: fresh md (and a fresh cache over it); $DEV to measure
setup() {
	case $1 in
	md) ns_mode raw; md_up; DEV=/dev/md0 ;;
	pmc)
		ns_mode raw; md_up; zero_pmem
		dm_create pc "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem0 4096 1 format" ||
			die "create dm-pmemcache"
		DEV=/dev/mapper/pc
		echo "OVL sys=pmc blocks=$(pmc_field 4) table=$(dmsetup table pc | cut -d' ' -f4- | tr ' ' ,)" ;;
	wc)
		ns_mode fsdax; md_up; zero_pmem
		dm_create wc "0 $(blockdev --getsz /dev/md0) writecache p /dev/md0 /dev/pmem0 4096 0" ||
			die "create dm-writecache"
		DEV=/dev/mapper/wc
		echo "OVL sys=wc blocks=$(wc_field 5) table=$(dmsetup table wc | cut -d' ' -f4- | tr ' ' ,)" ;;
	esac
}
after() {	# after SYS ROUND [PREFIX]: the cache's counters, as PREFIXname=value
	p=$3
	case $1 in
	pmc) echo "OVL sys=pmc r=$2 ${p}dirty=$(pmc_field 5) ${p}write_hits=$(pmc_field 11) ${p}write_new=$(pmc_field 12) ${p}write_around=$(pmc_field 13) ${p}full_waits=$(pmc_field 31) ${p}full_around=$(pmc_field 32) ${p}full_through=$(pmc_field 33) ${p}full_timeouts=$(pmc_field 34) ${p}wb_blocks=$(( $(pmc_field 16) + $(pmc_field 18) )) ${p}wb_errors=$(pmc_field 20) ${p}health=$(dmsetup status pc | awk '{print $NF}')" ;;
	wc) echo "OVL sys=wc r=$2 ${p}error=$(wc_field 4) ${p}free=$(wc_field 6) ${p}under_wb=$(wc_field 7) ${p}writes=$(wc_field 10) ${p}writes_around=$(wc_field 13) ${p}writes_allocate=$(wc_field 14) ${p}blocked_on_freelist=$(wc_field 15)" ;;
	esac
}
teardown() {
	case $1 in
	pmc) dmsetup remove pc || echo "PROGRESS remove pc failed" ;;
	wc) dmsetup remove wc || echo "PROGRESS remove wc failed" ;;
	esac
	md_down
}

# What the origin absorbs: 4 KiB random writes straight to md raid5, same
# queue depth and working set as the overload runs, no rate limit.
md_up
echo "PROGRESS bare md raid5: 4 KiB random writes QD$QD for ${RAW_S} s"
fio --name=raw --filename=/dev/md0 --direct=1 --ioengine=libaio \
	--rw=randwrite --bs=4k --iodepth=$QD --size=${WS_MB}m --offset=0 \
	--time_based --runtime=$RAW_S --output-format=terse \
	--output=/tmp/fio.terse > /dev/null 2>&1 || die "raw fio"
# terse v3: field 49 is the write IOPS
IOPS=$(cut -d';' -f49 /tmp/fio.terse | head -1)
RATE=$((IOPS * RATE_X))
[ $RATE -gt 0 ] || die "bare md took $IOPS IOPS"
echo "OVL raw_iops=$IOPS rate=$RATE"
md_down

r=1
while [ $r -le $REPEATS ]; do
	for sys in $SYSTEMS; do
		setup $sys
		echo "<4>pmc-bench: measuring $sys" > /dev/kmsg
		if [ $sys != md ]; then
			# Start full: FILL_MB of distinct random 4 KiB blocks of the
			# working set, unthrottled, with another random sequence than
			# the timed run's.  Bare md has no cache to fill.
			echo "PROGRESS round $r, $sys: fill ${FILL_MB} MiB"
			t0=$(awk '{print $1}' /proc/uptime)
			fio --name=fill --filename=$DEV --direct=1 --ioengine=libaio \
				--rw=randwrite --bs=4k --iodepth=$QD --size=${WS_MB}m --offset=0 \
				--io_size=${FILL_MB}m --randrepeat=0 --randseed=4242 > /dev/null 2>&1 ||
				echo "PROGRESS $sys fill failed"
			echo "OVL sys=$sys r=$r fill_s=$(awk "BEGIN{print $(awk '{print $1}' /proc/uptime) - $t0}")"
			after $sys $r fill_
		fi
		echo "PROGRESS round $r, $sys: $RATE IOPS offered (${RATE_X}x bare md) for ${OVER_S} s over ${WS_MB} MiB"
		fio --name=over --filename=$DEV --direct=1 --ioengine=libaio \
			--rw=randwrite --bs=4k --iodepth=$QD --size=${WS_MB}m --offset=0 \
			--rate_iops=$RATE --time_based --runtime=$OVER_S \
			--percentile_list=50:99:99.9 --output-format=json \
			--output=/tmp/fio.json > /tmp/fio.err 2>&1
		rc=$?
		[ $rc = 0 ] || echo "PROGRESS $sys fio rc $rc: $(head -c 300 /tmp/fio.err | tr '\n' ' ')"
		echo "OVL sys=$sys r=$r fio_rc=$rc"
		echo "FIOJSON $sys $r $(tr -d '\n\t' < /tmp/fio.json)"
		after $sys $r
		teardown $sys
	done
	r=$((r + 1))
done
echo "OVL done=1"
exit 0
