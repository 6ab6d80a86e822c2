# Guest side of the instruction-counted benchmark (issue 33), busybox sh,
# sourced after /test/lib.sh; the boot runs under run-vm.sh --icount, so
# a clock_gettime() delta is an instruction count.
# Set by the host: SETS, one "SET SYSTEMS OPS COUNT REPEATS" per line
# (SYSTEMS and OPS comma-separated). For each set, REPEATS times, each
# system of SYSTEMS in turn is set up afresh and /usr/bin/cpubench
# (tests/guest/cpubench.c) times OPS on COUNT blocks; it prints
# "CPU tag=SET:SYSTEM:REPEAT op=.. mean=.. .." lines.
# Systems: floor-raw and floor-fsdax (bare /dev/pmem0 in the raw and in
# the fsdax namespace mode), pmc (dm-pmemcache, raw namespace), wc
# (dm-writecache in pmem mode, fsdax namespace as make bench sets it up),
# pmc-mutant (dm-pmemcache with /test/mutant.ko loaded in its place, then
# the real module again: tests/test_cpu_guard.py), pmc-crc (dm-pmemcache
# formatted with data_crc); wb-pfn, wb-bounce and
# wb-wc (COUNT new blocks written, then the busy time of their writeback
# by a flush message: dm-pmemcache's pfn and bounce routes, dm-writecache;
# OPS ignored; "WB tag=.. blocks=.. drain_busy_ns=.. clean_busy_ns=..");
# wbx-pfn, wbx-bounce, wbx-wc the same on every other block; zero
# (dm-zero: dm core and a target that does nothing) and linear (dm-linear
# on the raw namespace: dm core, and pmem's own path once more).
# Origin: md raid1 over two loop devices on tmpfs, so that an operation
# that reaches the origin (a discard) is guest CPU work too, never host
# I/O whose completion would land at a host-dependent virtual time.
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || die "insmod dm-pmemcache"
echo "CPUINFO clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) cpus=$(grep -c ^processor /proc/cpuinfo) kernel=$(uname -r)"

mkdir -p /orig
mount -t tmpfs -o size=3g tmpfs /orig || die "tmpfs"
truncate -s $((1024 * 1024 * 1024)) /orig/m0 /orig/m1
if ! { L0=$(losetup -f) && losetup "$L0" /orig/m0 && L1=$(losetup -f) && losetup "$L1" /orig/m1; }; then
	die "losetup"
fi
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean --level=1 \
	--raid-devices=2 "$L0" "$L1" 2>&1 || die "mdadm"
SZ=$(blockdev --getsz /dev/md0)

NS=raw	# what ns_mode (lib.sh) last made of namespace0.0
zero_pmem() { dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 conv=fsync 2>/dev/null; }

# Writeback goes to md raid1 over virtio disks vda and vdb (md1): loop
# devices take no page-less bios. Its I/O is the host's, so the virtual
# time of a drain includes idle time: busy_ns, the guest's busy time from
# /proc/timer_list (elapsed minus idle and iowait, ns), is what counts.
busy_ns() {
	awk '/^now at/ {now = $3} /\.idle_sleeptime/ && !i {i = $(NF - 1)} /\.iowait_sleeptime/ && !w {w = $(NF - 1)}
	     END {printf "%.0f\n", now - i - w}' /proc/timer_list
}
md1_up() {
	[ -b /dev/md1 ] && return
	mdadm --create /dev/md1 --run --quiet --metadata=1.2 --assume-clean --level=1 \
		--raid-devices=2 /dev/vda /dev/vdb 2>&1 || die "mdadm md1"
	SZ1=$(blockdev --getsz /dev/md1)
}
# drain_busy NAME: busy ns of a flush message and a second of sleep (the
# last completions)
drain_busy() {
	b0=$(busy_ns)
	dmsetup message "$1" 0 flush || die "flush $1"
	sleep 1
	b1=$(busy_ns)
	echo "$((b1 - b0))"
}

# wb TAG SYS COUNT: write COUNT new blocks, then time their writeback;
# wb-*: blocks 0 to COUNT - 1, wbx-*: every other block (no two adjacent)
wb() {
	tag=$1 sys=$2 count=$3
	md1_up
	stride=1
	case $sys in wbx-*) stride=2 ;; esac
	case $sys in
	wb-pfn|wb-bounce|wbx-pfn|wbx-bounce)
		ns_mode raw; zero_pmem; name="pc"
		dm_create pc "0 $SZ1 pmemcache /dev/md1 /dev/pmem0 4096 7 writeback ${sys#wb*-} high_watermark 100 low_watermark 100 format" ||
			die "create pc" ;;
	wb-wc|wbx-wc)
		ns_mode fsdax; zero_pmem; name="wc"
		dm_create wc "0 $SZ1 writecache p /dev/md1 /dev/pmem0 4096 0" || die "create wc" ;;
	esac
	echo "PROGRESS $tag: $count new blocks (stride $stride), then their writeback to md raid1 over virtio"
	cpubench "$tag" "/dev/mapper/$name" "$count" 0 new "$stride" > /tmp/cpu.out || die "cpubench $tag"
	sed 's/ op=new / op=wbfill /' /tmp/cpu.out
	st0=$(dmsetup status "$name" | tr ' ' ,)
	dirty=$(drain_busy "$name")
	clean=$(drain_busy "$name")
	echo "WB tag=$tag blocks=$count drain_busy_ns=$dirty clean_busy_ns=$clean"
	echo "STATUS tag=$tag $(dmsetup status "$name" | tr ' ' ,)"
	echo "STATUS0 tag=$tag $st0"
	dmsetup remove "$name"
}

# measure TAG SYS OPS COUNT: set SYS up, time OPS, take it down
measure() {
	tag=$1 sys=$2 ops=$3 count=$4
	case $sys in
	wb*-*) wb "$tag" "$sys" "$count"; return ;;
	floor-raw) ns_mode raw; dev=/dev/pmem0 first=32768 ;;
	floor-fsdax) ns_mode fsdax; dev=/dev/pmem0 first=32768 ;;
	pmc|pmc-mutant|pmc-crc)
		if [ "$sys" = pmc-mutant ]; then
			{ rmmod dm_pmemcache && insmod /test/mutant.ko; } || die "insmod mutant"
		fi
		feat="1 format"
		[ "$sys" = pmc-crc ] && feat="2 format data_crc"
		ns_mode raw; zero_pmem
		dm_create pc "0 $SZ pmemcache /dev/md0 /dev/pmem0 4096 $feat" || die "create pc"
		dev=/dev/mapper/pc first=0 ;;
	wc)
		ns_mode fsdax; zero_pmem
		dm_create wc "0 $SZ writecache p /dev/md0 /dev/pmem0 4096 0" || die "create wc"
		dev=/dev/mapper/wc first=0 ;;
	zero) dm_create dz "0 $SZ zero" || die "create zero"; dev=/dev/mapper/dz first=0 ;;
	linear)
		ns_mode raw
		dm_create dl "0 $(blockdev --getsz /dev/pmem0) linear /dev/pmem0 0" ||
			die "create linear"
		dev=/dev/mapper/dl first=32768 ;;
	*) die "no system $sys" ;;
	esac
	echo "PROGRESS $tag: $dev, $count blocks: $ops"
	cpubench "$tag" "$dev" "$count" "$first" "$ops" > /tmp/cpu.out || die "cpubench $tag"
	cat /tmp/cpu.out
	case $sys in
	pmc*) echo "STATUS tag=$tag $(dmsetup status pc | tr ' ' ,)"; dmsetup remove pc ;;
	wc) echo "STATUS tag=$tag $(dmsetup status wc | tr ' ' ,)"; dmsetup remove wc ;;
	zero) dmsetup remove dz ;;
	linear) dmsetup remove dl ;;
	esac
	if [ "$sys" = pmc-mutant ]; then
		{ rmmod dm_pmemcache && insmod /lib/modules/extra/dm-pmemcache.ko; } || die "insmod again"
	fi
}

echo "$SETS" > /tmp/sets
while read -r set systems ops count repeats; do
	[ -n "$set" ] || continue
	r=1
	while [ "$r" -le "$repeats" ]; do
		for sys in $(echo "$systems" | tr , ' '); do
			measure "$set:$sys:$r" "$sys" "$ops" "$count"
		done
		r=$((r + 1))
	done
done < /tmp/sets
# the profiling copy's sums (tests/bench/cpu_profile.py), printed by pmc_dtr
dmesg | grep 'pmc-prof ' | sed 's/^.*pmc-prof /PROF /'
echo "CPUDONE=1"
exit 0
