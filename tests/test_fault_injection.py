"""Fault injection, as the kernel's own test suites do it (issue 29).

The guest kernel has the fault-injection framework (qemu/kernel.config:
FAILSLAB, FAIL_PAGE_ALLOC, FAIL_MAKE_REQUEST, FAIL_IO_TIMEOUT). One boot
writes through a cache while failures are injected at random:

- failslab and fail_page_alloc, with the task filter: only tasks whose
  make-it-fail is 1 see failures. Those are the writer and reader threads
  of tests/guest/durable_io.c for the time of each write, fdatasync or
  read (the target's map and its allocations run in their context; their
  own output and page faults are never failed), and every unbound kworker
  (`kworker/u*`, where the target's workqueue runs writeback, write-through
  and completions), the workqueue's rescuer and md's raid1 thread, marked
  again every 300 ms as they come and go. Other subsystems' allocations in
  those kworkers fail too: any kernel report is a finding;
- fail_make_request on md0, the origin: any request the cache sends it
  (write-around, write-through, writeback, its flushes, read misses)
  fails with EIO at random.
- FAIL_IO_TIMEOUT does not fit: virtio-blk has no timeout handler in
  6.1, so a faked timeout (/sys/block/vdX/io-timeout-fail) leaves the
  request re-armed for ever, by design of the injection, not of the cache.

The cache is full from the start (64 MiB pmem, 72 MiB of dirty zeros
written first, then a 256 MiB working set; high_watermark 100, full_wait
10 ms): writers wait for a slot, write around and through. Three phases,
each PHASE_S seconds, 4 writer threads and one reader: "full", "cleaner"
(the cleaner message: writes to blocks not cached go around) and "flush"
(`dmsetup message pc 0 flush` again and again while writes go on). A
write that fails prints "E <id> <errno>" and is not acknowledged: its
sectors may hold the old or the new data, nothing else. After the
phases: injection off, the writers and the flush must end (no hang), and
the cache is removed.

The second boot loads the cache from pmem and checks every sector of the
working set through the cache (its last acknowledged write, or a failed
write after it), flushes, checks md0 against what the cache returned,
removes the cache and checks md0 again.

`make test` runs phases of 40 s; PMC_LONG=1 of 300 s, twice
(PMC_FAULT_SECONDS, PMC_FAULT_ROUNDS). PMC_MUTANT_KO=path runs another
build of dm-pmemcache.ko; PMC_FAULT_STRICT=1 checks the model itself: a
failed write taken as acknowledged must be reported as lost.
"""
import os
import random
import re
from pathlib import Path

# durable_io (and dm-volatile, unused here) built as for the power cuts,
# with PMC_MUTANT_KO as /test/mutant.ko
from test_durability import CHECK_FN, guest_tools  # noqa: F401
from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
from vm import add_figure

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
PHASE_S = int(os.environ.get("PMC_FAULT_SECONDS", "300" if LONG else "40"))
ROUNDS = int(os.environ.get("PMC_FAULT_ROUNDS", "2" if LONG else "1"))
MUTANT_KO = os.environ.get("PMC_MUTANT_KO")
STRICT = os.environ.get("PMC_FAULT_STRICT", "0") not in ("", "0")
SEED = int(os.environ.get("PMC_SEED", "2929"))

PMEM_MB = 64
REGION = 256 << 11              # working set, sectors (256 MiB)
PREFILL_MB = 72                 # > pmem: the cache is full of dirty blocks
THREADS = 4
TABLE = "8 high_watermark 100 low_watermark 90 full_wait 10 writeback_jobs 4"
PHASES = ["full", "cleaner", "flush"]
ID_STRIDE = 10 ** 9             # ids of phase p: (p + 1) * ID_STRIDE + n
TIMES = 10 ** 8                 # each fault attribute's budget: injections = TIMES - left
# percent: a writer's write makes a few allocations, a kworker many; the
# origin sees one request per write-around, through or writeback batch
PROB = {"failslab": 5, "fail_page_alloc": 5, "fail_make_request": 3}
FAULTS = list(PROB)


SETUP = PRELUDE + r"""
[ -b /dev/pmem0 ] || die "no /dev/pmem0"
insmod %(ko)s || die insmod
if [ %(first)d = 1 ]; then
	md_make md0 raid1 2 a
else
	mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
fi
dm_create pc "$(pmc_table md0 '%(table)s')" || die create
echo "LOADED=$(dmsetup status pc)"
"""

INJECT = r"""
D=/sys/kernel/debug
mount -t debugfs none $D 2>/dev/null || true
[ -d $D/failslab ] && [ -d $D/fail_page_alloc ] && [ -d $D/fail_make_request ] ||
	die "no fault injection in debugfs"
dd if=/dev/zero of=/dev/mapper/pc bs=1M count=%(prefill)d oflag=direct 2>/dev/null || die prefill
echo "PREFILLED=$(dmsetup status pc)"
for f in %(faults)s; do
	echo 0 > $D/$f/probability
	echo 1 > $D/$f/interval
	echo %(times)d > $D/$f/times
	echo 0 > $D/$f/space
	# an injected failure prints nothing: "Call Trace:" is a kernel report
	echo 0 > $D/$f/verbose
done
for f in failslab fail_page_alloc; do
	echo Y > $D/$f/task-filter
	echo N > $D/$f/ignore-gfp-wait
done
echo Y > $D/fail_page_alloc/ignore-gfp-highmem
echo 0 > $D/fail_page_alloc/min-order
echo N > $D/fail_make_request/task-filter
echo 1 > /sys/block/md0/make-it-fail
inject() {
	echo %(p_slab)d > $D/failslab/probability
	echo %(p_page)d > $D/fail_page_alloc/probability
	echo %(p_req)d > $D/fail_make_request/probability
}
no_inject() {
	for f in %(faults)s; do echo 0 > $D/$f/probability; done
}
ftimes() { echo "TIMES $1 $(for f in %(faults)s; do cat $D/$f/times; done | tr '\n' ' ')"; }

# the kernel threads of the target's work (unbound workqueue), its
# rescuer and md's raid thread fail too, as they come and go
: > /tmp/marked
(
	while [ ! -f /tmp/stop_mark ]; do
		for d in /proc/[0-9]*; do
			read -r c 2>/dev/null < $d/comm || continue
			case "$c" in
			kworker/u*|dm-pmemcache|md0_raid1)
				read -r v 2>/dev/null < $d/make-it-fail || continue
				[ "$v" = 1 ] && continue
				echo 1 > $d/make-it-fail 2>/dev/null && echo "${d#/proc/} $c" >> /tmp/marked
				;;
			esac
		done
		sleep 0.3
	done
) &
mark=$!

# wait_gone PID SECONDS WHAT: the process must end in time (no hang)
wait_gone() {
	i=0
	while kill -0 $1 2>/dev/null; do
		if [ $i -ge $(($2 * 2)) ]; then
			echo "HANG=$3"
			cat /proc/$1/task/*/stack 2>/dev/null | head -40
			echo w > /proc/sysrq-trigger
			return 1
		fi
		sleep 0.5
		i=$((i + 1))
	done
	wait $1 2>/dev/null || true
}

# phase NAME ID_BASE SEED
phase() {
	name=$1
	ftimes "$name-begin"
	inject
	DURABLE_IO_ERRORS=1 DURABLE_IO_INJECT=1 durable_io write /dev/mapper/pc 0 %(region)d \
		%(threads)d $2 $3 > /tmp/w.$name.$2 2>&1 &
	w=$!
	DURABLE_IO_INJECT=1 durable_io read /dev/mapper/pc 0 %(region)d $3 > /tmp/r.$name.$2 2>&1 &
	r=$!
	[ $name = cleaner ] && { dmsetup message pc 0 cleaner || die cleaner; }
	rm -f /tmp/stop_flush
	if [ $name = flush ]; then
		(
			while [ ! -f /tmp/stop_flush ]; do
				rc=0
				timeout 600 dmsetup message pc 0 flush 2>/dev/null || rc=$?
				echo "FLUSH $name $rc"
				sleep 0.2
			done
		) &
		f=$!
	fi
	i=0
	while [ $i -lt %(phase_s)d ]; do
		sleep 5
		i=$((i + 5))
		echo "ST $name $(dmsetup status pc)"
		kill -0 $w 2>/dev/null || { cat /tmp/w.$name.$2 | tail -5; die "writer $name ended"; }
	done
	kill -9 $w $r
	wait_gone $w 120 "writer $name" || die "writer $name hangs"
	wait_gone $r 120 "reader $name" || die "reader $name hangs"
	if [ $name = flush ]; then
		# the last flush ends without writers (injection still on)
		touch /tmp/stop_flush
		wait_gone $f 300 "flush" || die "flush hangs"
	fi
	[ $name = cleaner ] && { dmsetup message pc 0 nocleaner || die nocleaner; }
	no_inject
	ftimes "$name-end"
	echo "ST $name-end $(dmsetup status pc)"
	sed "s/^/$name.$2 /" /tmp/w.$name.$2
	echo "READS $name $(grep '^RD' /tmp/r.$name.$2 | tail -1) $(grep -c '^RE' /tmp/r.$name.$2)"
	grep '^RE' /tmp/r.$name.$2 | sort | uniq -c | sed "s/^/READERR $name /"
}
"""

END = r"""
touch /tmp/stop_mark
wait $mark
echo "MARKED $(wc -l < /tmp/marked) threads: $(awk '{print $2}' /tmp/marked | sed 's/[0-9:].*//' | sort | uniq -c | tr -s ' \n' ' ')"
echo "ZERO=$(for f in %(faults)s; do cat $D/$f/probability; done | tr '\n' ' ')"
echo 0 > /sys/block/md0/make-it-fail
# no injection: everything written back, then the cache removed (its
# dirty blocks would stay in pmem; there are none)
# (a flush ends with EIO at the first failed writeback: one of a batch
# that began while failures were still injected may fail it once)
n=1
until timeout 600 dmsetup message pc 0 flush; do
	[ $n -lt 3 ] || die "flush without injection"
	n=$((n + 1))
	sleep 2
done
echo "FINAL_FLUSHES=$n"
echo "ST final $(dmsetup status pc)"
dmsetup remove pc || die remove
echo PHASES_DONE=1
"""

CHECK = CHECK_FN + r"""
check CACHE /dev/mapper/pc /test/expect /tmp/observed
timeout 600 dmsetup message pc 0 flush || die flush
echo "ST check $(dmsetup status pc)"
check ORIGIN /dev/md0 /tmp/observed
dmsetup remove pc || die remove
check MD /dev/md0 /tmp/observed
echo CHECK_DONE=1
"""


def writes_script(ko):
    rng = random.Random(SEED)
    s = SETUP % dict(ko=ko, first=1, table=TABLE)
    s += INJECT % dict(prefill=PREFILL_MB, faults=" ".join(FAULTS), times=TIMES,
                       p_slab=PROB["failslab"], p_page=PROB["fail_page_alloc"],
                       p_req=PROB["fail_make_request"], region=REGION, threads=THREADS,
                       phase_s=PHASE_S)
    n = 0
    for _ in range(ROUNDS):
        for name in PHASES:
            n += 1
            s += "phase %s %d %d\n" % (name, n * ID_STRIDE, rng.randrange(1, 1 << 30))
    s += END % dict(faults=" ".join(FAULTS))
    return s


class Sectors:
    """What each sector of the working set may hold: its last acknowledged
    write (0: zeros, never written) and the failed or unfinished writes
    issued after it, in the order each writer issued them (a writer owns
    its part and has one write at a time; phases follow one another)."""

    def __init__(self, sectors):
        self.allowed = [[0] for _ in range(sectors)]
        self.issued = self.acked = self.failed = self.unfinished = 0
        self.errnos = {}

    def apply(self, output, tag, strict=False):
        ops, acked, failed = {}, set(), {}
        pat = r"^%s (W|ACK|E) (\d+)(?: (\d+))?(?: (\d+))?\r?$" % re.escape(tag)
        for m in re.finditer(pat, output, re.M):
            kind, i = m.group(1), int(m.group(2))
            if kind == "W":
                ops[i] = (int(m.group(3)), int(m.group(4)))
            elif kind == "ACK":
                acked.add(i)
            else:
                failed[i] = int(m.group(3))
        assert acked <= set(ops) and set(failed) <= set(ops), tag
        assert not acked & set(failed), sorted(acked & set(failed))[:5]
        unfinished = set(ops) - acked - set(failed)
        # the killed writer's threads: at most one write each
        assert len(unfinished) <= THREADS, sorted(unfinished)
        for i in sorted(ops):
            s, n = ops[i]
            for k in range(s, s + n):
                if i in acked or (strict and i in failed):
                    self.allowed[k] = [i]
                else:
                    self.allowed[k].append(i)
        self.issued += len(ops)
        self.acked += len(acked)
        self.failed += len(failed)
        self.unfinished += len(unfinished)
        for e in failed.values():
            self.errnos[e] = self.errnos.get(e, 0) + 1
        return len(ops), len(acked), len(failed)

    def expect(self, path):
        """durable_io check's input: runs of sectors with the same ids."""
        lines, run = [], None
        for k, ids in enumerate(self.allowed):
            assert len(ids) <= 32, (k, ids)     # MAX_IDS of the checker
            key = ",".join(str(i) for i in ids)
            if run and run[2] == key:
                run[1] += 1
                continue
            if run:
                lines.append("%d %d %s" % tuple(run))
            run = [k, 1, key]
        lines.append("%d %d %s" % tuple(run))
        Path(path).write_text("\n".join(lines) + "\n")
        return len(self.allowed)


def check_result(output, tag):
    bad = re.findall(r"^%s BAD .*$" % tag, output, re.M)
    m = re.search(r"^%s CHECK sectors=(\d+) ok=(\d+) bad=(\d+)" % tag, output, re.M)
    assert not bad and m and m.group(3) == "0", (
        "acknowledged writes lost (%s):\n%s" % (tag, "\n".join(bad[:40]) or
                                                (m.group(0) if m else output[-3000:])))
    return int(m.group(1))


def injections(output):
    """Injected failures per fault attribute, from its `times` budget."""
    t = {m.group(1): [int(x) for x in m.group(2).split()]
         for m in re.finditer(r"^TIMES (\S+) ([\d ]+?)\s*$", output, re.M)}
    total = dict.fromkeys(FAULTS, 0)
    for k, begin in t.items():
        if k.endswith("-begin"):
            end = t[k[:-len("-begin")] + "-end"]
            for f, a, b in zip(FAULTS, begin, end):
                total[f] += a - b
    return total


def test_faults_injected_while_writing_through_a_full_cache(vm, guest_tools, figures, tmp_path):
    ko = "/test/mutant.ko" if MUTANT_KO else "/lib/modules/extra/dm-pmemcache.ko"
    timeout = 600 + ROUNDS * len(PHASES) * (PHASE_S + 400)
    res = vm.run(writes_script(ko), files=guest_tools, pmem_size=PMEM_MB, timeout=timeout)
    out = res.output
    assert res.value("PHASES_DONE") == "1"
    assert "HANG=" not in out
    inj = injections(out)
    sectors = Sectors(REGION)
    per_phase = []
    n = 0
    for _ in range(ROUNDS):
        for name in PHASES:
            n += 1
            tag = "%s.%d" % (name, n * ID_STRIDE)
            per_phase.append((name,) + sectors.apply(out, tag, STRICT))
    for name, issued, acked, failed in per_phase:
        print("phase %s: %d writes issued, %d acknowledged, %d failed" % (
            name, issued, acked, failed))
        assert acked > 0, "phase %s: no write was acknowledged" % name
    flushes = re.findall(r"^FLUSH \S+ (\d+)$", out, re.M)
    assert flushes, "no flush ended during the flush phase"
    assert "124" not in flushes and "143" not in flushes, flushes
    reads = re.findall(r"^READS (\S+) RD (\d+) (\d+)", out, re.M)
    read_errs = re.findall(r"^READERR \S+ +(\d+) RE (\d+)$", out, re.M)
    m = re.search(r"^MARKED (.*)$", out, re.M)
    marked = m.group(1) if m else ""
    st = parse_status(re.search(r"^ST final (.*)$", out, re.M).group(1))
    statuses = [parse_status(x) for x in re.findall(r"^ST \S+ (.*)$", out, re.M)]
    # the modes ran: a full cache sent writes around and through, the
    # cleaner mode was on, writeback failed and was retried
    print("injected: %s; write errnos: %s; flush results: %s" % (
        inj, sectors.errnos, " ".join(flushes)))
    print("reads (phase, reads, failed): %s; read errnos: %s" % (reads, read_errs))
    print("kworkers etc. marked: %s" % marked)
    print("final status: %s" % st)
    assert st["dirty"] == 0, st
    assert any(s["mode"] == "cleaner" for s in statuses)
    assert max(s["full_around"] for s in statuses) > 0
    assert max(s["full_through"] for s in statuses) > 0

    expect = tmp_path / "expect"
    sectors.expect(expect)
    res2 = vm.run(SETUP % dict(ko=ko, first=0, table=TABLE) + CHECK,
                  files=guest_tools + [(expect, "/test/expect")], pmem_size=PMEM_MB, timeout=1200,
                  check=False)
    checked = check_result(res2.output, "CACHE")
    check_result(res2.output, "ORIGIN")
    check_result(res2.output, "MD")
    assert res2.rc == 0 and res2.value("CHECK_DONE") == "1", res2.tail()
    total = sum(inj.values())
    print("fault injection: %d injected (%s), writes %d issued, %d acknowledged, %d failed, "
          "%d unfinished; %d sectors verified (through the cache, on md0 before and after "
          "removing the cache); lost 0, hangs 0" % (
              total, ", ".join("%s %d" % kv for kv in inj.items()), sectors.issued,
              sectors.acked, sectors.failed, sectors.unfinished, checked))
    add_figure(figures, "fault injection: injected failures", "%d", total)
    add_figure(figures, "fault injection: writes acked / failed", "%d / %d",
               sectors.acked, sectors.failed)
    add_figure(figures, "fault injection: sectors verified", "%d", checked)
    figures["fault injection: lost, hangs"] = "0, 0"
    assert total > 0


def test_the_model_allows_a_failed_write_only_until_the_next_acknowledged_one():
    """Host only: the sectors of a failed write may hold it or what was
    there before, until a later write to them is acknowledged; a strict
    model takes the failed write as acknowledged."""
    out = "".join("x.1 %s\n" % l for l in (
        "W 10 0 4", "ACK 10",       # sectors 0-3: 10
        "W 11 2 4", "E 11 5",       # 2-3: 10 or 11, 4-5: 0 or 11
        "W 12 3 1", "ACK 12",       # 3: 12 only
        "W 13 5 1"))                # unfinished (the writer was killed)
    s = Sectors(8)
    assert s.apply(out, "x.1") == (4, 2, 1)
    assert s.allowed == [[10], [10], [10, 11], [12], [0, 11], [0, 11, 13], [0], [0]]
    assert (s.failed, s.unfinished, s.errnos) == (1, 1, {5: 1})
    strict = Sectors(8)
    strict.apply(out, "x.1", strict=True)
    assert strict.allowed[2] == [11] and strict.allowed[4] == [11]
