# Guest side of make bench (busybox sh, sourced after /test/lib.sh).
# Set by the host: LAYOUT (raid5|raid1), SYSTEMS (list), RT (s per job),
# SIZE (job region), DRAIN_MB, JOBS (list of fio job names), REPEATS
# (runs of each timed job per system).
# Prints PROGRESS lines, BENCH sys=.. key=value lines, one
# "FIOJSON sys job repeat {json}" line per fio run and "HOSTMARK name"
# lines at which the host reads the QEMU process's CPU time (idle0/idle1,
# drain0-SYS/drain1-SYS around each timed drain; tests/bench/hostcpu.py).
set +e
dmesg -n 1
insmod /lib/modules/extra/dm-pmemcache.ko || echo "PROGRESS no dm-pmemcache.ko"
export RT SIZE
export DRAIN_SIZE=${DRAIN_MB}M DRAIN_OFF=512M

now() { awk '{print $1}' /proc/uptime; }
# busy and total CPU ticks (USER_HZ) over all CPUs
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
# kernel+anon RAM in use, kB (what is neither free nor page cache)
mem_used() { awk '/^MemTotal:/{t=$2} /^MemFree:/{f=$2} /^Buffers:/{b=$2} /^Cached:/{c=$2} END{print t-f-b-c}' /proc/meminfo; }
mem_free() { awk '/^MemFree:/{print $2}' /proc/meminfo; }
# what the kernel's allocators hand out, kB: slab + vmalloc + per-cpu
# (not disturbed by page cache or by user memory, unlike mem_used)
kern_kb() { awk '/^(Slab|VmallocUsed|Percpu):/{k+=$2} END{print k}' /proc/meminfo; }

members() { [ $LAYOUT = raid5 ] && echo "/dev/vda /dev/vdb /dev/vdc /dev/vdd" || echo "/dev/vda /dev/vdb"; }
md_up() {
	if [ $LAYOUT = raid5 ]; then make_md 5 4 "$@"; else make_md raid1 2 "$@"; fi
}
md_down() {
	mdadm --stop /dev/md0 >/dev/null 2>&1
	for d in $(members) /dev/vde; do mdadm --zero-superblock $d >/dev/null 2>&1; done
}
zero_pmem() { dd if=/dev/zero of=/dev/pmem0 bs=1M count=1 conv=fsync 2>/dev/null; }
ns_mode() {	# raw | fsdax-mem | fsdax-dev
	case $1 in
	raw) ndctl create-namespace -f -e namespace0.0 -m raw >/dev/null 2>&1 ;;
	fsdax-mem) ndctl create-namespace -f -e namespace0.0 -m fsdax -M mem >/dev/null 2>&1 ;;
	fsdax-dev) ndctl create-namespace -f -e namespace0.0 -m fsdax -M dev >/dev/null 2>&1 ;;
	esac || echo "PROGRESS ndctl $1 failed"
	[ -b /dev/pmem0 ] || die "no /dev/pmem0 after ndctl $1"
}
NS=raw

# dm_over_md NAME WHAT TABLE: fresh md and pmem, dm device NAME over all
# of md0 with TABLE (after "<start> <len>"); $DEV is it, or empty
dm_over_md() {
	md_up; zero_pmem
	dm_create $1 "0 $(blockdev --getsz /dev/md0) $3" ||
		{ echo "PROGRESS $2 create failed"; DEV=; return; }
	DEV=/dev/mapper/$1
}

# setup SYS: prints the device to measure in $DEV
setup() {
	sys=$1
	case $sys in
	raw) md_up; DEV=/dev/md0 ;;
	journal)
		zero_pmem
		md_up --write-journal /dev/pmem0
		echo write-back > /sys/block/md0/md/journal_mode || echo "PROGRESS journal_mode failed"
		echo "BENCH sys=$sys journal_mode=$(cat /sys/block/md0/md/journal_mode)"
		DEV=/dev/md0 ;;
	bcache)
		md_up; zero_pmem
		make-bcache --writeback -C /dev/pmem0 -B /dev/md0 >/dev/null 2>&1 || echo "PROGRESS make-bcache failed"
		echo /dev/pmem0 > /sys/fs/bcache/register 2>/dev/null
		echo /dev/md0 > /sys/fs/bcache/register 2>/dev/null
		i=0; while [ ! -b /dev/bcache0 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
		echo writeback > /sys/block/bcache0/bcache/cache_mode
		echo 0 > /sys/block/bcache0/bcache/sequential_cutoff
		echo "BENCH sys=$sys cache_mode=$(cat /sys/block/bcache0/bcache/cache_mode | tr ' ' ,)"
		DEV=/dev/bcache0 ;;
	pmc-*) dm_over_md pc dm-pmemcache "pmemcache /dev/md0 /dev/pmem0 4096 3 writeback ${sys#pmc-} format" ;;
	wc-*) dm_over_md wc dm-writecache "writecache p /dev/md0 /dev/pmem0 4096 0" ;;
	esac
}

teardown() {
	case $1 in
	bcache)
		echo 1 > /sys/block/bcache0/bcache/stop 2>/dev/null
		for u in /sys/fs/bcache/*-*; do [ -d "$u" ] && echo 1 > $u/unregister; done
		i=0; while [ -b /dev/bcache0 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
		sleep 1 ;;
	pmc-*) dmsetup remove pc ;;
	wc-*) dmsetup remove wc ;;
	esac
	md_down
	zero_pmem
}

# untimed or timed: write back everything
drain_all() {
	case $1 in
	pmc-*) dmsetup message pc 0 flush ;;
	wc-*) dmsetup message wc 0 flush ;;
	bcache)
		echo 0 > /sys/block/bcache0/bcache/writeback_percent
		echo 1 > /sys/block/bcache0/bcache/writeback_running
		i=0
		while [ "$(cat /sys/block/bcache0/bcache/state)" != clean ] && [ $i -lt $((DRAIN_CAP * 10)) ]; do
			sleep 0.1; i=$((i+1))
		done ;;
	*) sync ;;
	esac
}
dirty_state() {
	case $1 in
	# the writeback routes: blocks written back from pmem as page-less
	# bios, through DRAM bounce pages, and pfn bios the origin refused
	pmc-*) dmsetup status pc | awk '{print "dirty_blocks=" $5 " route=" $24 " ram_bytes_per_block=" $23 " wb_pfn_blocks=" $16 " wb_bounce_blocks=" $18 " wb_notsupp=" $21}' ;;
	wc-*) dmsetup status wc | awk '{print "status=" $4 "," $5 "," $6 "," $7}' ;;
	bcache) echo "state=$(cat /sys/block/bcache0/bcache/state) dirty=$(cat /sys/block/bcache0/bcache/dirty_data)" ;;
	esac
}

# route_check SYS "STATE": say how the drain went out (STATE: dirty_state
# after the drain; the counters were zero before the fill); a pmc-pfn
# drain that went through bounce pages, or the reverse, is reported here
# and by report.py, never counted as the other route's figure
route_check() {
	set -- $1 $(echo "$2" | tr ' ' '\n' | awk -F= '/^(route|wb_pfn_blocks|wb_bounce_blocks|wb_notsupp)=/{printf "%s ", $2}')
	echo "PROGRESS $LAYOUT/$1: drain written back as $3 pfn, $4 bounce blocks ($5 pfn refused), route now $2"
	case $1 in
	pmc-pfn) [ "$3" != 0 ] && [ "$4" = 0 ] && [ "$5" = 0 ] && [ "$2" = pfn ] ||
		echo "PROGRESS $LAYOUT/$1: WARNING: the drain did not go (only) through pfn bios" ;;
	pmc-bounce) [ "$4" != 0 ] && [ "$3" = 0 ] && [ "$2" = bounce ] ||
		echo "PROGRESS $LAYOUT/$1: WARNING: the drain did not go (only) through bounce pages" ;;
	esac
}

run_fio() {	# sys job repeat
	export DEV DRAIN_SIZE DRAIN_OFF RT SIZE
	fio --output-format=json --output=/tmp/fio.json /test/bench/$2.fio >/tmp/fio.err 2>&1 ||
		{ echo "PROGRESS $1 $2 fio failed: $(head -c 300 /tmp/fio.err | tr '\n' ' ')"; return 1; }
	echo "FIOJSON $1 $2 $3 $(tr -d '\n\t' < /tmp/fio.json)"
}

# the QEMU process's CPU time while the guest idles (report.py takes it
# off the QEMU CPU of the sleep before each drain)
echo "HOSTMARK idle0"
sleep 3
echo "HOSTMARK idle1"

for sys in $SYSTEMS; do
	case $sys in
	wc-mem) want=fsdax-mem ;;
	wc-dev) want=fsdax-dev ;;
	*) want=raw ;;
	esac
	mf0=$(mem_free)
	if [ $want != $NS ]; then ns_mode $want; NS=$want; fi
	memmap_kb=$((mf0 - $(mem_free)))
	sync; echo 3 > /proc/sys/vm/drop_caches
	u0=$(mem_used); k0=$(kern_kb)
	t0=$(now)
	setup $sys
	if [ -z "$DEV" ] || [ ! -b "$DEV" ]; then
		echo "PROGRESS $sys: $DEV is not a block device, skipped"
		echo "BENCH sys=$sys skipped=1"
		teardown $sys; continue
	fi
	u1=$(mem_used); k1=$(kern_kb)
	# in the kernel log too, so that a kernel report names the system
	echo "<4>pmc-bench: measuring $sys" > /dev/kmsg
	echo "PROGRESS $LAYOUT/$sys: set up on $DEV in $(awk "BEGIN{printf \"%.1f\", $(now)-$t0}") s"
	echo "BENCH sys=$sys dev=$DEV ns=$NS memmap_kb=$memmap_kb setup_used_kb=$((u1 - u0)) setup_kern_kb=$((k1 - k0))"
	for job in $JOBS; do
		[ $job = drain ] && { [ $sys = raw ] || [ $sys = journal ]; } || echo "PROGRESS $LAYOUT/$sys: $job"
		if [ $job = drain ] && { [ $sys = raw ] || [ $sys = journal ]; }; then
			continue	# no cache to drain
		elif [ $job = drain ]; then
			drain_all $sys >/dev/null 2>&1
			[ $sys = bcache ] && echo 0 > /sys/block/bcache0/bcache/writeback_running
			sync; echo 3 > /proc/sys/vm/drop_caches
			u2=$(mem_used); k2=$(kern_kb)
			run_fio $sys drain_fill 1
			echo 3 > /proc/sys/vm/drop_caches
			u3=$(mem_used); k3=$(kern_kb)
			echo "BENCH sys=$sys fill_used_kb=$((u3 - u2)) fill_kern_kb=$((k3 - k2)) fill_mb=$DRAIN_MB $(dirty_state $sys)"
			# the host reads the QEMU process's CPU time at each
			# HOSTMARK (within ~20 ms: hence the sleep before the drain)
			echo "HOSTMARK drain0-$sys"
			sleep 0.5
			set -- $(cpu_ticks); b0=$1 a0=$2
			t0=$(now)
			drain_all $sys >/dev/null 2>&1
			t1=$(now)
			set -- $(cpu_ticks)
			echo "HOSTMARK drain1-$sys"
			after=$(dirty_state $sys | sed 's/=/_after=/g')
			echo "BENCH sys=$sys drain_s=$(awk "BEGIN{print $t1-$t0}") drain_cpu_ticks=$(($1 - b0)) drain_total_ticks=$(($2 - a0)) $after"
			case $sys in pmc-*) route_check $sys "$(dirty_state $sys)" ;; esac
		else
			r=1
			while [ $r -le $REPEATS ]; do run_fio $sys $job $r; r=$((r + 1)); done
		fi
	done
	[ $sys = journal ] && echo "BENCH sys=$sys journal_mode=$(cat /sys/block/md0/md/journal_mode)"
	teardown $sys
done
echo "BENCH done=1 cpus=$(grep -c ^processor /proc/cpuinfo) memtotal_kb=$(awk '/^MemTotal:/{print $2}' /proc/meminfo)"
exit 0
