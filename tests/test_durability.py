"""Power cuts over an origin that loses unflushed writes (issue 14).

The VM disks keep every write that QEMU completed, so a plain power cut
never tests whether the cache flushes its origin. Here the origin is
tests/kmod/dm-volatile.c between md and the cache: md raid1 over virtio
-> dm volatile -> dm-pmemcache. dm volatile holds completed writes in
guest RAM until a REQ_PREFLUSH, writes REQ_FUA writes through, and
writes some held chunks early in random order, like a disk's volatile
write cache; a power cut loses what it held. The next boot stacks an
empty volatile layer over the same md.

Each boot of the guest (one per cut):
1. checks the writes of the previous boot: every sector that boot wrote
   must hold its last acknowledged write or a write that was in flight,
   whole (512 bytes of (id, sector)-derived data), read through the
   cache; then `flush`, and the same on md itself, bypassing the
   volatile layer: the origin must hold exactly what the cache returned;
2. runs tests/guest/durable_io.c: 4 threads, each on its own part of a
   256 MiB working set (4x the 64 MiB pmem), 512 B to 64 KiB O_DIRECT
   writes, plain, O_DSYNC or with fdatasync, each logged before it is
   issued (W) and after it completed (ACK);
3. is cut at a random moment once the mode's work is seen in the status:
   "full" (writeback ran in this boot), "cleaner" (the cleaner message,
   sent once the writer made the cache evict; then writes to blocks not
   cached go around with FUA), "seq_bypass" (a sequential writer whose
   runs go around), "pressure" (a region of its own filled with zeros
   first, so the cache is full of dirty blocks; full_wait 0 and
   writeback only for starved writers: writes go around and through the
   cache with FUA). In every mode the cache has evicted blocks before
   the cut, and the status sample before the cut (once a second, with
   the volatile layer's counters) must show what makes the cut mean
   something (asserted): the volatile layer holding data; in cleaner
   mode, where every write reaches the origin with FUA, no block dirty
   and AROUND_UNFLUSHED write-arounds since the layer's last flush (a
   write-around without FUA is then lost at the cut every time).

The first boot fills the cache with zeros so that eviction runs from
the first cut on; the last boot checks the whole working set.

The same chain runs on a mirrored cache (issue 31) with a half lost at
each boot (class Halves: half B left out of the guest, or half A's image
zeroed, at random; after a boot on A alone, B comes back): long form
only, PMC_MIRROR_CUTS (default 180 with PMC_LONG=1).

`make test` does 4 cuts (one per mode); PMC_LONG=1 does PMC_DURABLE_CUTS
(default 200) in PMC_DURABLE_CHAINS independent chains (default 2, side
by side under pytest -n 2). PMC_MUTANT_KO=path runs the guest with another build of
dm-pmemcache.ko (tests/mutants.sh).

Also here, host and VM tests of two defects of issue 14: recovery and a
record with an impossible seq (tests/host/seq_check.c), and concurrent
`flush` messages of which one is interrupted.
"""
import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
from test_target_powercut import cut_console, power_cut, wait_for_acks
from vm import KBUILD, KCACHE, REPO, GuestRun, add_figure, build, check_reports
from vm_mutants import LOST, NO_FUA   # failure tokens: only a failed check prints them

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
CUTS = int(os.environ.get("PMC_DURABLE_CUTS", "200" if LONG else "4"))
# independent chains of cuts (own disks and pmem, own seed), run side by
# side under pytest -n; the figures add up
CHAINS = int(os.environ.get("PMC_DURABLE_CHAINS", "2" if LONG else "1"))
# acknowledged writes a boot makes before it may be cut: the long form
# aims at 1,000,000 in 200 cuts; "pressure" writes around and through a
# full cache with FUA, a few a second under TCG, so it makes fewer
ACKS = (5000, 10000) if LONG else (50, 400)
PRESSURE_ACKS = (200, 800) if LONG else (50, 400)
MUTANT_KO = os.environ.get("PMC_MUTANT_KO")

KSRC = Path(os.environ.get("KSRC", KCACHE / "linux"))
KMOD = REPO / "tests/kmod"
GUEST_IO = REPO / "tests/guest/durable_io"
HOST = REPO / "tests/host"

PMEM_MB = 64
REGION = 256 << 11              # working set, sectors (256 MiB)
PRESSURE_AT = REGION + (64 << 11)     # pressure mode writes here
PRESSURE_SECTORS = 72 << 11     # > pmem: writes fill the cache with dirty blocks
PREFILL_MB = 72                 # > pmem: the cache is full from boot 1 on
THREADS = 4
VOLATILE = "32768 8"            # 32 MiB held at most, 1 chunk early per 8 writes
WATERMARKS = "high_watermark 10 low_watermark 1"
MODES = ["full", "cleaner", "seq_bypass", "pressure"]
TABLE = {"full": "4 " + WATERMARKS,
         # writeback only for starved writers, one block at a time, and
         # no wait for a slot: a full cache sends writes around (blocks
         # not cached) and through (cached blocks) at once
         "pressure": "8 high_watermark 100 low_watermark 100 writeback_jobs 1 full_wait 0",
         "cleaner": "4 " + WATERMARKS,
         "seq_bypass": "6 %s seq_bypass 32" % WATERMARKS}
ID_STRIDE = 10 ** 9             # ids of boot b: b * ID_STRIDE + n


@pytest.fixture(scope="module")
def guest_tools():
    """tests/kmod/dm-volatile.ko and the static tests/guest/durable_io."""
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)
    p = subprocess.run(["flock", str(KCACHE / "kernel-build.lock"),
                        "make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
                        "M=%s" % KMOD, "W=1", "modules"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "warning:" not in p.stderr, p.stderr
    assert (KMOD / "dm-volatile.ko").exists()
    p = build(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
               "-o", str(GUEST_IO), str(GUEST_IO) + ".c"])
    assert p.returncode == 0, p.stderr
    files = [(GUEST_IO, "/usr/bin/durable_io")]
    if MUTANT_KO:
        files.append((MUTANT_KO, "/test/mutant.ko"))
    return files


# ---- the host's model of what each sector must hold --------------------

# A cut loses the script's lines that QEMU had not yet copied out of the
# port's virtqueue (128 buffers, one line each, file backend): at most
# 129 writes of a boot, over all threads, are issued and never seen.
UNSEEN_MAX = 130
M64 = (1 << 64) - 1


def mix(x):
    """durable_io's mix()."""
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


class Writer:
    """The runs each thread of `durable_io write START SECTORS THREADS ID
    SEED [seq]` writes, in its order: a twin of its pick(), so that the
    host knows where the writes it never saw (lost with the cut) went."""

    def __init__(self, start, sectors, threads, seed, seq=False):
        self.start, self.threads, self.seed, self.seq = start, threads, seed, seq
        self.part = (sectors // threads) & ~7

    def thread_of(self, s):
        return (s - self.start) // self.part

    def runs(self, t):
        r, pos = self.seed * 1000 + t, 0
        first = self.start + t * self.part

        def rnd():
            nonlocal r
            r = mix(r)
            return r
        while True:
            x = rnd() % 10
            if self.seq and t == 0:
                n = 128
                pos = 0 if pos + n > self.part else pos
                s, pos = first + pos, pos + n
            else:
                n = 8 if x < 4 else 1 + rnd() % 7 if x < 6 else 8 * (2 + rnd() % 15)
                s = rnd() % (self.part - n + 1)
                s = (s & ~7 if n % 8 == 0 else s) + first
            rnd()                       # how: plain, O_DSYNC or fdatasync
            yield s, n


class Model:
    """Last acknowledged write of every sector written so far, and, for
    the last boot's writes, the writes that were still in flight."""

    def __init__(self):
        self.cur = {}           # sector -> id (absent: 0, never written)
        self.touched = {}       # sector -> allowed ids, writes of the last boot
        self.newer = []         # ranges of ids the host never saw issued
        self.acked = 0

    def resolve(self, output):
        """Check results of a boot: the id each ambiguous run held."""
        for m in re.finditer(r"^CACHE AMB (\d+) (\d+) (\d+)\r?\n", output, re.M):
            s, n, i = (int(x) for x in m.groups())
            for k in range(s, s + n):
                self.cur[k] = i

    def apply(self, output, boot, writer, zeroed=None):
        """W/ACK lines of a boot's @writer (a Writer); @zeroed: (sector,
        count) that the boot filled with zeros before its writer started."""
        ops, acked = {}, set()
        self.touched = {}
        if zeroed:
            assert re.search(r"^FILLED=1\r?\n", output, re.M), output[-3000:]
            for k in range(zeroed[0], zeroed[0] + zeroed[1]):
                self.cur[k] = 0
                self.touched[k] = [0]
        # whole lines only: a power cut can end the output inside one
        for m in re.finditer(r"^W (\d+) (\d+) (\d+)\r?\n", output, re.M):
            ops[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^ACK (\d+)\r?\n", output, re.M):
            acked.add(int(m.group(1)))
        assert acked <= set(ops), sorted(acked - set(ops))[:5]
        # each writer owns its sectors and writes one at a time: in id
        # order, a later acknowledged write replaces an earlier one
        for i in sorted(acked):
            s, n = ops[i]
            for k in range(s, s + n):
                self.cur[k] = i
        for i in sorted(ops):
            s, n = ops[i]
            for k in range(s, s + n):
                if self.touched.get(k, [None])[0] != self.cur.get(k, 0):
                    self.touched[k] = [self.cur.get(k, 0)]
                if i not in acked:
                    self.touched[k].append(i)
        inflight = [i for i in ops if i not in acked]
        assert len(inflight) <= THREADS, inflight
        self.unseen(writer, ops, boot * ID_STRIDE)
        self.acked += len(acked)
        return len(acked)

    def unseen(self, writer, ops, base):
        """The writes issued after the last line the host saw: any id it
        did not see may be anywhere in the next UNSEEN_MAX runs of each
        thread, so those sectors are checked (and resolved) too."""
        seen = sorted(ops)
        for t in range(writer.threads):
            mine = [ops[i] for i in seen if writer.thread_of(ops[i][0]) == t]
            runs = writer.runs(t)
            for i, run in enumerate(mine):
                want = next(runs)
                assert run == want, "thread %d, write %d: W %s, durable_io picks %s" % (
                    t, i, run, want)
            for _ in range(UNSEEN_MAX):
                s, n = next(runs)
                for k in range(s, s + n):
                    self.touched.setdefault(k, [self.cur.get(k, 0)])
        # ids are taken before the W line is printed: a thread can print
        # a later id first, so the gaps below the highest seen are unseen too
        gaps, nxt = [], base
        for i in seen + [base + ID_STRIDE]:
            if i > nxt:
                gaps.append((nxt, i))
            nxt = i + 1
        self.newer = gaps

    def expect(self, path, everything=False):
        """Write the checker's input: the last boot's sectors, or all."""
        if everything:
            allowed = {k: [v] for k, v in self.cur.items()}
            newer = []
        else:
            allowed, newer = self.touched, self.newer
        lines = ["# newer %d %d" % r for r in newer]
        run = None
        for k in sorted(allowed):
            ids = ",".join(str(i) for i in allowed[k])
            if run and run[0] + run[1] == k and run[2] == ids:
                run[1] += 1
                continue
            if run:
                lines.append("%d %d %s" % tuple(run))
            run = [k, 1, ids]
        if run:
            lines.append("%d %d %s" % tuple(run))
        Path(path).write_text("\n".join(lines) + "\n")
        return len(allowed)


def o_direct_dir(tmp_path):
    """A folder whose files take O_DIRECT (tmpfs does not before 6.6)."""
    for d in (tmp_path, KCACHE / "test-tmp"):
        d.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(d / "probe", os.O_RDWR | os.O_CREAT | os.O_DIRECT))
            return d
        except OSError:
            continue
    pytest.skip("no folder here takes O_DIRECT")


def test_the_model_checks_where_the_writes_it_never_saw_went(tmp_path):
    """durable_io on a host file, its output cut as a power cut cuts it
    (the last W lines lost): the model must check the sectors of the
    writes it never saw at once, and then know what the whole file holds.
    Seen in CI before the model did so: the final check found a write
    whose W line the cut had lost, in a sector no check had looked at."""
    p = build(["gcc", "-O2", "-Wall", "-Werror", "-pthread", "-o", str(GUEST_IO) + ".host",
               str(GUEST_IO) + ".c"])
    assert p.returncode == 0, p.stderr
    disk = o_direct_dir(tmp_path) / "disk"
    sectors, seed, lost = 1 << 18, 77, 24     # 128 MiB: most runs land on zeros
    with open(disk, "wb") as f:
        f.truncate(sectors * 512)
    w = subprocess.Popen([str(GUEST_IO) + ".host", "write", str(disk), "0", str(sectors),
                          str(THREADS), str(ID_STRIDE), str(seed)],
                         stdout=subprocess.PIPE, text=True)
    time.sleep(1)
    w.kill()
    out = w.communicate()[0]
    at = [m.start() for m in re.finditer(r"^W ", out, re.M)]
    assert len(at) > 4 * lost, out[-2000:]
    model = Model()
    model.cur = dict.fromkeys(range(sectors), 0)    # the whole file, for the last check
    model.apply(out[:at[-lost]], 1, Writer(0, sectors, THREADS, seed))
    expect = tmp_path / "expect"

    def check():
        r = subprocess.run([str(GUEST_IO) + ".host", "check", str(disk), str(expect)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-3000:]
        model.resolve("".join("CACHE " + line for line in r.stdout.splitlines(True)))
        return r.stdout
    model.expect(expect)
    found = [int(i) for i in re.findall(r"^AMB \d+ \d+ (\d+)$", check(), re.M)]
    seen = [int(i) for i in re.findall(r"^W (\d+) ", out[:at[-lost]], re.M)]
    assert max(found, default=0) > max(seen), "no write of the lost lines was found"
    model.expect(expect, everything=True)
    check()


# ---- the guest script ------------------------------------------------

# check TAG DEV EXPECT [OBSERVED] in a guest script (durable_io check);
# tests/test_fault_injection.py uses it too
CHECK_FN = r"""
# check TAG DEV EXPECT [OBSERVED]: prefix the checker's lines with TAG
check() {
	tag=$1
	shift
	rc=0
	durable_io check "$@" > /tmp/check.out || rc=$?
	sed "s/^/$tag /" /tmp/check.out
	[ $rc = 0 ] || die "$tag: acknowledged writes lost"
}
"""

SETUP = PRELUDE + r"""
T=/sys/kernel/tracing
insmod /lib/modules/extra/dm-volatile.ko || die "insmod dm-volatile"
[ -b /dev/pmem0 ] || die "no /dev/pmem0"
insmod %(ko)s || die insmod
if [ %(first)d = 1 ]; then
	md_make md0 raid1 2 a
else
	mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
fi
dmsetup create --noudevsync vol --table \
	"0 $(blockdev --getsz /dev/md0) volatile /dev/md0 %(volatile)s" || die volatile
dmsetup mknodes vol
dm_create pc "0 $(blockdev --getsz /dev/mapper/vol) pmemcache /dev/mapper/vol \
	/dev/%(pmem)s 4096 %(table)s" || die create
echo "LOADED=$(dmsetup status pc)"
""" + CHECK_FN + r"""if [ -f /test/expect ]; then
	check CACHE /dev/mapper/pc /test/expect /tmp/observed
	dmsetup message pc 0 flush || die flush
	check ORIGIN /dev/md0 /tmp/observed
fi
echo CHECK_DONE=1
"""

WRITE = r"""
if [ %(first)d = 1 ]; then
	dd if=/dev/zero of=/dev/mapper/pc bs=1M count=%(prefill)d oflag=direct 2>/dev/null ||
		die prefill
fi
mount -t tracefs tracefs $T 2>/dev/null || true
echo 'p:pmc_evict pmc_meta_evict' > $T/kprobe_events || die kprobe
echo 1 > $T/events/kprobes/enable
if [ %(mode)s = pressure ]; then
	# a cache full of dirty blocks of the region the writer uses
	dd if=/dev/zero of=/dev/mapper/pc bs=1M seek=%(fill_at)d count=%(fill_mb)d \
		oflag=direct 2>/dev/null || die fill
	echo FILLED=1
fi
dmsetup message pc 0 clear_stats
{ durable_io write /dev/mapper/pc %(start)d %(sectors)d %(threads)d %(id_base)d %(seed)d %(seq)s; rc=$?; [ $rc -ge 128 ] || echo "FAIL: durable_io write exited $rc"; } &
while true; do
	ev=$(awk '$1 == "pmc_evict" { print $2 }' $T/kprobe_profile)
	# cleaner: once the writer made the cache evict
	if [ %(mode)s = cleaner ] && [ "$ev" -gt 0 ] && [ -z "$cleaner" ]; then
		dmsetup message pc 0 cleaner || die cleaner
		cleaner=1
	fi
	# one line (one write): the writer's lines never come in between
	echo "ST $ev $(dmsetup status pc) VOL $(dmsetup status vol)"
	sleep 1
done
"""


def with_words(table, words):
    """A table's features (count first) with @words added."""
    n, rest = table.split(" ", 1)
    return " ".join([str(int(n) + len(words)), rest] + list(words))


def boot_script(mode, first, ko, write=None, pmem="pmem0", words=()):
    s = SETUP % dict(ko=ko, first=first, volatile=VOLATILE, pmem=pmem,
                     table=with_words(TABLE[mode], words))
    if write:
        s += WRITE % dict(write, first=first, mode=mode, prefill=PREFILL_MB,
                          threads=THREADS, fill_at=PRESSURE_AT >> 11,
                          fill_mb=PRESSURE_SECTORS >> 11)
    return s


VOL_FIELDS = ["held", "writes", "fua_writes", "flushes", "early_chunks", "full_writeouts"]
# cleaner mode is cut only after this many write-arounds were acknowledged
# since the volatile layer's last flush, with no block dirty (so nothing
# flushes the origin before the cut): a write-around without FUA is then
# held, and lost at the cut, every time (issue 30: 2 cuts caught it only
# now and then)
AROUND_UNFLUSHED = 16


def statuses(output):
    """(evictions, cache status, volatile status) of every whole ST line
    (the guest may be in the middle of printing the last one)."""
    out = []
    for m in re.finditer(r"^ST (\d*) (\S+ \S+ pmemcache [^\n]*?) "
                         r"VOL \S+ \S+ volatile ([\d ]+?)\r?\n", output, re.M):
        vol = dict(zip(VOL_FIELDS, map(int, m.group(3).split())))
        out.append((int(m.group(1) or 0), parse_status(m.group(2)), vol))
    return out


def around_unflushed(sts):
    """Write-arounds acknowledged since the volatile layer's last flush,
    counted from the first sample of that flush epoch in which the
    cleaner had written back every block (none dirty)."""
    _, last, vol = sts[-1]
    for _, s, v in sts:
        if v["flushes"] == vol["flushes"] and s["mode"] == "cleaner" and s["dirty"] == 0:
            return last["write_around"] - s["write_around"]
    return 0


def mode_ran(mode, sts):
    """Did the work the mode is about happen before the cut, evictions
    included, and is there something a cut can lose? sts: the samples so
    far; the last one decides. In cleaner mode every write reaches the
    origin with FUA, so the volatile layer may hold nothing: there the
    write-arounds since its last flush are what a cut tests."""
    ev, s, vol = sts[-1]
    if mode == "full":
        ran = s["wb_pfn_blocks"] + s["wb_bounce_blocks"] > 0
    elif mode == "pressure":
        ran = s["full_through"] > 0 and s["full_around"] > 0
    elif mode == "cleaner":
        return (ev > 0 and s["mode"] == "cleaner" and s["dirty"] == 0
                and around_unflushed(sts) >= AROUND_UNFLUSHED)
    else:
        ran = s["write_around"] > 0
    return ran and ev > 0 and vol["held"] > 0


def output_so_far(boot):
    """What the script printed so far (vm.start's log, or its BootFiles)."""
    if hasattr(boot, "read"):
        return boot.read()[1]
    text = boot.read_text(errors="replace") if boot.exists() else ""
    return GuestRun(None, text, boot).output


def console_so_far(boot):
    """The serial console so far (old harness: console and output are one)."""
    if hasattr(boot, "read"):
        return boot.read()[0]
    return boot.read_text(errors="replace") if boot.exists() else ""


def start(vm, script, **opts):
    """vm.start: the harness's one retry layer (tests/vm.py) boots again,
    once and counted, a boot that hangs before init or that QEMU aborts;
    a kernel panic before init is a kernel report and fails the test."""
    return vm.start(script, **opts)


def run(vm, script, **opts):
    """vm.run through start(): boot, run script to its end, check for
    kernel reports (the caller checks the exit status)."""
    proc, boot = start(vm, script, **opts)
    rc = proc.wait()
    if hasattr(GuestRun, "load"):
        res = GuestRun.load(rc, boot)
    else:
        res = GuestRun(rc, boot.read_text(errors="replace"), boot)
    check_reports(res)
    return res


def cut_output(boot):
    """The script output of a boot ended by a power cut."""
    text = cut_console(boot)
    return text if hasattr(boot, "read") else GuestRun(None, text, boot).output


def wait_for_mode(boot, mode, seconds=600):
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        text = output_so_far(boot)
        if "FAIL:" in text or "@@EXIT" in text:
            raise AssertionError("guest stopped:\n" + text[-3000:])
        sts = statuses(text)
        if sts and mode_ran(mode, sts):
            return
        if "Kernel panic" in console_so_far(boot):
            raise AssertionError("kernel panic:\n" + console_so_far(boot)[-3000:])
        time.sleep(0.5)
    raise AssertionError("mode %s never ran:\n%s" % (mode, text[-3000:]))


def cut_moment(boot, mode, rng, tries=30):
    """Wait for the mode's work, then a random 0-2 s, and return once the
    last sample still shows it (a sample is printed once a second): the
    number of samples seen, the last of which came before the cut."""
    for _ in range(tries):
        wait_for_mode(boot, mode)
        time.sleep(rng.random() * 2)
        sts = statuses(output_so_far(boot))
        if mode_ran(mode, sts):
            return len(sts)
    raise AssertionError("mode %s: the work came and went %d times" % (mode, tries))


def wait_for_check(boot, seconds=900):
    """Wait until the boot checked the previous cut's writes; fail with
    the checker's findings if it found lost writes."""
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        text = output_so_far(boot)
        if "CHECK_DONE=1" in text:
            return
        if "FAIL:" in text or "@@EXIT" in text:
            for tag in ("CACHE", "ORIGIN"):
                if re.search(r"^%s (BAD|CHECK) " % tag, text, re.M):
                    check_results(text, tag)
            raise AssertionError("guest stopped before its check ended:\n" + text[-3000:])
        if "Kernel panic" in console_so_far(boot):
            raise AssertionError("kernel panic:\n" + console_so_far(boot)[-3000:])
        time.sleep(0.5)
    raise AssertionError("check too slow:\n" + text[-3000:])


def check_results(output, tag):
    """The checker's summary for tag CACHE or ORIGIN; fails on lost writes."""
    bad = re.findall(r"^%s BAD .*$" % tag, output, re.M)
    m = re.search(r"^%s CHECK sectors=(\d+) ok=(\d+) bad=(\d+)" % tag, output, re.M)
    assert not bad and not (m and m.group(3) != "0"), (
        "%s (%s):\n%s" % (LOST, tag, "\n".join(bad[:40]) or m.group(0)))
    assert m, "no %s check result:\n%s" % (tag, output[-3000:])
    return int(m.group(1))


def write_args(mode, boot, rng):
    if mode == "pressure":
        start, sectors = PRESSURE_AT, PRESSURE_SECTORS
    else:
        start, sectors = 0, REGION
    return dict(start=start, sectors=sectors, id_base=boot * ID_STRIDE,
                seed=rng.randrange(1, 1 << 30), seq="seq" if mode == "seq_bypass" else "")


class OneDevice:
    """The cache's one NVDIMM, the same at every boot."""

    def next_boot(self, first, final=False):
        """(pmem device the table names first, extra table words, size of
        the second NVDIMM in MiB) of the next boot."""
        return "pmem0", (), 0


class Halves:
    """A mirrored cache (issue 31) that loses a half at each boot.

    After a boot that ran on both halves, the next one loses one at
    random: half B's NVDIMM is left out of the guest (the table names it
    "-", and `degraded` starts A alone: A cannot know B did not run on),
    or half A's image is zeroed on the host (the table starts from B,
    and `degraded` lets the start copy B to the blank A). After a boot on
    A alone, B comes back and the start copies A to it: no half is lost
    then, A alone holds the last writes. Either way the boot's checks
    read every acknowledged write through the survivor.
    """

    def __init__(self, vm, rng):
        self.vm, self.rng = vm, rng
        self.alone = False
        self.lost = {"A": 0, "B": 0}

    def next_boot(self, first, final=False):
        if first or final or self.alone:
            self.alone = False
            return "pmem0", ("mirror", "/dev/pmem1"), PMEM_MB
        # at random, but the first two losses are one of each
        lose_b = self.rng.random() < 0.5
        if not (self.lost["A"] and self.lost["B"]) and (self.lost["A"] or self.lost["B"]):
            lose_b = not self.lost["B"]
        if lose_b:
            self.lost["B"] += 1
            self.alone = True
            return "pmem0", ("mirror", "-", "degraded"), 0
        self.lost["A"] += 1
        img = self.vm.state / "pmem.img"
        size = img.stat().st_size
        os.truncate(img, 0)
        os.truncate(img, size)
        return "pmem1", ("mirror", "/dev/pmem0", "degraded"), PMEM_MB


@pytest.mark.parametrize("chain", range(CHAINS))
def test_power_cuts_over_a_volatile_origin(vm, guest_tools, figures, tmp_path, chain):
    rng = random.Random(int(os.environ.get("PMC_SEED", "1414")) + chain)
    cuts = CUTS // CHAINS + (chain < CUTS % CHAINS)
    model, checked, whole, held, evicted = power_cut_chain(
        vm, guest_tools, tmp_path, cuts, rng, OneDevice())
    print("cuts over the volatile origin: %d, acknowledged writes: %d, sectors checked: %d "
          "(+%d at the end); the volatile layer held data in %d of %d status samples "
          "(once a second), at most %d chunks of 4 KiB"
          % (cuts, model.acked, checked, whole, sum(v > 0 for v in held), len(held),
             max(held, default=0)))
    print("cuts with evictions before the cut: %d of %d (modes: %s)"
          % (len(evicted), cuts, ", ".join("%s %d" % (m, sum(MODES[c % len(MODES)] == m
                                                           for c in evicted)) for m in MODES)))
    add_figure(figures, "cuts over the volatile origin (ack. writes)", "%d (%d)",
               cuts, model.acked)
    figures["acknowledged writes lost"] = 0
    add_figure(figures, "cuts with evictions before the cut", "%d of %d", len(evicted), cuts)
    assert len(evicted) == cuts     # wait_for_mode waits for them


# 120 cuts acknowledged 9,560 writes a cut on average, 100 cuts 881,570:
# 180 for >= 1,000,000 in all (issue 31)
MIRROR_CUTS = int(os.environ.get("PMC_MIRROR_CUTS", "180" if LONG else "0"))


@pytest.mark.skipif(not MIRROR_CUTS, reason="long form: PMC_LONG=1 (make test-long)")
def test_power_cuts_with_a_mirror_half_lost_at_each_boot(vm, guest_tools, figures, tmp_path):
    """The chain above on a mirrored cache (`mirror /dev/pmem1`), a half
    lost at each boot (Halves): every acknowledged write must read back
    through the survivor, and reach the origin."""
    rng = random.Random(int(os.environ.get("PMC_SEED", "1414")) + 31)
    halves = Halves(vm, rng)
    model, checked, whole, _, _ = power_cut_chain(vm, guest_tools, tmp_path, MIRROR_CUTS,
                                                  rng, halves)
    # both kinds of loss (from 4 cuts on: a boot on A alone is followed by one without loss)
    assert halves.lost["A"] and halves.lost["B"] or MIRROR_CUTS < 4, halves.lost
    print("mirror cuts over the volatile origin: %d, a half lost at %d boots (A zeroed %d, "
          "B left out %d), acknowledged writes: %d, sectors checked: %d (+%d at the end), "
          "lost 0" % (MIRROR_CUTS, halves.lost["A"] + halves.lost["B"], halves.lost["A"],
                      halves.lost["B"], model.acked, checked, whole))
    add_figure(figures, "mirror cuts, a half lost at each boot (ack. writes)", "%d (%d)",
               MIRROR_CUTS, model.acked)
    figures["acknowledged writes lost"] = 0
    if MIRROR_CUTS >= 180:
        assert model.acked >= 1000000, model.acked


def power_cut_chain(vm, guest_tools, tmp_path, cuts, rng, halves):
    """@cuts boots, each checking the last one's writes and cut while it
    writes, then two boots checking the last cut's writes and the whole
    working set: (model, sectors checked, checked at the end, volatile
    samples, cuts with evictions before them)."""
    ko = "/test/mutant.ko" if MUTANT_KO else "/lib/modules/extra/dm-pmemcache.ko"
    model = Model()
    expect = tmp_path / "expect"
    checked = 0
    held = []                   # the volatile layer's held chunks, sampled once a second
    evicted = []                # cuts whose boot evicted before the cut
    for cut in range(cuts):
        mode = MODES[cut % len(MODES)]
        boot = cut + 1
        files = list(guest_tools)
        if cut:
            model.expect(expect)
            files.append((expect, "/test/expect"))
        args = write_args(mode, boot, rng)
        pmem, words, pmem2 = halves.next_boot(cut == 0)
        script = boot_script(mode, int(cut == 0), ko, args, pmem, words)
        proc, log = start(vm, script, files=files, pmem_size=PMEM_MB, pmem2_size=pmem2,
                          timeout=900)
        try:
            wait_for_check(log)
            wait_for_acks(log, rng.randrange(*(PRESSURE_ACKS if mode == "pressure" else ACKS)),
                          seconds=900)
            seen = cut_moment(log, mode, rng)
        finally:
            power_cut(vm, proc)
        out = cut_output(log)
        if cut:
            checked += check_results(out, "CACHE")
            check_results(out, "ORIGIN")
            model.resolve(out[:out.index("CHECK_DONE=1")])
        writer = Writer(args["start"], args["sectors"], THREADS, args["seed"], bool(args["seq"]))
        n_acked = model.apply(out, boot, writer,
                              (PRESSURE_AT, PRESSURE_SECTORS) if mode == "pressure" else None)
        held += [int(v) for v in re.findall(r" VOL \d+ \d+ volatile (\d+) .*\n", out)]
        sts = statuses(out)
        if sts and sts[-1][0] > 0:
            evicted.append(cut)
        # what makes the cut mean something, on the last sample before it
        assert sts[:seen] and mode_ran(mode, sts[:seen]), (
            "cut %d (%s) came before its mode's work: %s" % (
                cut + 1, mode, sts[seen - 1] if sts[:seen] else out[-2000:]))
        # progress, for a run of hours
        print("cut %d/%d %s: %d acknowledged (%d in all), %d evictions before the cut"
              % (cut + 1, cuts, mode, n_acked, model.acked,
                 sts[-1][0] if sts else 0), flush=True)

    # the last cut's writes, then the whole working set, through the
    # cache and on md after flush
    def final_boot():
        pmem, words, pmem2 = halves.next_boot(False, final=True)
        return run(vm, boot_script("full", 0, ko, pmem=pmem, words=words),
                   files=list(guest_tools) + [(expect, "/test/expect")],
                   pmem_size=PMEM_MB, pmem2_size=pmem2, timeout=900)
    model.expect(expect)
    res = final_boot()
    checked += check_results(res.output, "CACHE")
    check_results(res.output, "ORIGIN")
    assert res.rc == 0, res.tail()
    model.resolve(res.output)
    model.expect(expect, everything=True)
    res = final_boot()
    whole = check_results(res.output, "CACHE")
    check_results(res.output, "ORIGIN")
    assert res.rc == 0, res.tail()
    return model, checked, whole, held, evicted


PAST_CACHE = r"""
dd if=/dev/zero of=/dev/mapper/pc bs=1M count=%(prefill)d oflag=direct 2>/dev/null || die prefill
dd if=/dev/zero of=/dev/mapper/pc bs=1M seek=%(fill_at)d count=%(fill_mb)d \
	oflag=direct 2>/dev/null || die fill
dmsetup message pc 0 clear_stats
echo "VOL0=$(dmsetup status vol)"
# the file exists before the loop below reads it (the writer's shell may
# not have opened it yet)
: > /tmp/w.out
durable_io write /dev/mapper/pc %(start)d %(sectors)d %(threads)d 1 %(seed)d > /tmp/w.out &
w=$!
i=0
while [ "$(grep -c '^ACK' /tmp/w.out)" -lt %(acks)d ] && [ $i -lt 600 ]; do
	sleep 1
	i=$((i + 1))
done
kill $w
wait $w || true
echo "ACKS=$(grep -c '^ACK' /tmp/w.out)"
echo "ST=$(dmsetup status pc)"
echo "VOL1=$(dmsetup status vol)"
"""


def test_writes_past_a_full_cache_reach_the_origin_with_fua(vm, guest_tools):
    """Write-around and write-through skip the cache's durability (no
    record in pmem), so they must reach the origin with FUA: over the
    volatile layer, every write the cache sent to it during the writer's
    run, outside writeback, carries FUA.  Power cuts rarely catch a
    missing FUA here, because writeback flushes the origin every few
    milliseconds under pressure; this count always does.  The writer is
    stopped (and its writes completed) before both counters are read."""
    ko = "/test/mutant.ko" if MUTANT_KO else "/lib/modules/extra/dm-pmemcache.ko"
    script = boot_script("pressure", 1, ko)
    script += PAST_CACHE % dict(prefill=PREFILL_MB, fill_at=PRESSURE_AT >> 11,
                                fill_mb=PRESSURE_SECTORS >> 11, start=PRESSURE_AT,
                                sectors=PRESSURE_SECTORS, threads=THREADS,
                                seed=4711, acks=300 if not LONG else 3000)
    res = run(vm, script, files=list(guest_tools), pmem_size=PMEM_MB, timeout=900)
    assert res.rc == 0, res.tail()
    st = parse_status(res.value("ST"))
    vol0, vol1 = ([int(x) for x in res.value(k).split()[3:9]] for k in ("VOL0", "VOL1"))
    fua = vol1[2] - vol0[2]
    past = st["write_around"] + st["full_through"]
    print("acks %s: write_around %d (full_around %d), full_through %d, FUA writes at "
          "the origin %d" % (res.value("ACKS"), st["write_around"], st["full_around"],
                             st["full_through"], fua))
    assert st["full_through"] > 0 and st["full_around"] > 0, st
    assert fua >= past, "%s: %d sent, %d FUA" % (NO_FUA, past, fua)


@pytest.mark.skipif(not LONG, reason="mutation testing: set PMC_LONG=1")
def test_mutants_of_the_durability_sites_are_caught(guest_tools, figures):
    """tests/mutants.sh: each mutant removes one durability step; the
    origin flush and the FUA of write-around must be caught by the power
    cuts over the volatile origin, the two orderings that matter only
    inside a window by the cuts of tests/test_window_cuts.py. Every
    mutant caught, every control (the unmutated module under the same
    checker) not caught, exit status 0."""
    p = subprocess.run(["bash", str(REPO / "tests/mutants.sh")], capture_output=True,
                       text=True, timeout=4 * 3600)
    print(p.stdout + p.stderr[-2000:])
    m = re.search(r"durability sites (\d+), mutants caught (\d+)", p.stdout)
    assert m, p.stdout + p.stderr[-2000:]
    figures["durability sites, mutants caught"] = "%s, %s" % m.groups()
    c = re.search(r"controls (\d+), not caught (\d+)", p.stdout)
    assert c, p.stdout
    figures["mutant controls (unmutated), not caught"] = "%s, %s" % c.groups()
    for site in ("(pmc_env_origin_flush)", "(pmc_write_around)", "(W5 before W3)",
                 "(C1 before C0)"):
        line = [l for l in p.stdout.splitlines() if site in l and l.startswith("mutant ")]
        assert line and ": caught" in line[0], line or p.stdout
    assert int(m.group(1)) >= 14 and m.group(1) == m.group(2), p.stdout
    assert int(c.group(1)) >= 6 and c.group(1) == c.group(2), p.stdout
    assert p.returncode == 0, p.stdout


# ---- defects of issue 14 ----------------------------------------------

def test_recovery_drops_a_record_with_an_impossible_seq():
    """A record with a correct checksum and seq 2^64-1 must not wrap
    last_seq: the overwrite after it, cut after W4, must win."""
    p = build(["make", "-s", "-C", str(HOST), "seq_check"])
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([str(HOST / "seq_check")], capture_output=True, text=True)
    print(p.stdout + p.stderr)
    m = re.search(r"forged=(\d+) bad_seq=(\d+) last_seq=(\d+) lost=(\d+) mapped=(\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    forged, bad, last, lost, mapped = (int(x) for x in m.groups())
    assert p.returncode == 0 and lost == 0 and mapped == 0, p.stderr
    assert forged == bad == 6 and last == 1


FLUSH = PRELUDE + r"""
pmc_init
md_make md0 raid1 2 a
dm_create lin "0 $(blockdev --getsz /dev/md0) linear /dev/md0 0" || die lin
# below low_watermark and no max_age: only a flush writes these back
dm_create pc "$(pmc_table mapper/lin '2 writeback_jobs 1')" || die create
dd if=/dev/urandom of=/tmp/data bs=1M count=8 2>/dev/null
dd if=/tmp/data of=/dev/mapper/pc bs=64k oflag=direct 2>/dev/null || die write
status 0
# the origin stops taking writes: both flushes wait
dmsetup suspend lin || die suspend
dmsetup message pc 0 flush & a=$!
dmsetup message pc 0 flush & b=$!
# both wait inside the target (interruptible sleep) before one is killed
state() { awk '/^State/{print $2}' /proc/$1/status 2>/dev/null; }
i=0
until [ "$(state $a)$(state $b)" = SS ]; do
	[ $i -lt 300 ] || die "the flushes did not wait: $(state $a) $(state $b)"
	sleep 0.1
	i=$((i + 1))
done
kill -9 $a
wait $a || true
dmsetup resume lin || die resume
# the other flush must still write everything back
i=0
while kill -0 $b 2>/dev/null && [ $i -lt 240 ]; do
	sleep 0.5
	i=$((i + 1))
done
if kill -0 $b 2>/dev/null; then
	echo B_DONE=0
	status 1
	kill -9 $b
	wait $b || true
	exit 0
fi
rc=0
wait $b || rc=$?
echo B_DONE=1
echo B_RC=$rc
status 1
dmsetup remove pc
dd if=/dev/md0 of=/tmp/o bs=1M count=8 iflag=direct 2>/dev/null || die "read md0"
cmp /tmp/data /tmp/o && echo ORIGIN_SAME=1
"""


def test_an_interrupted_flush_does_not_stop_another(vm):
    """Two flush messages wait for writeback; one is killed. The other
    must still finish (issue 14: the killed one cleared the shared
    flag, writeback went idle below low_watermark and the other waited
    for ever)."""
    res = vm.run(FLUSH, timeout=600)
    st = parse_status(res.value("STATUS1"))
    assert parse_status(res.value("STATUS0"))["dirty"] > 0
    assert res.value("B_DONE") == "1", "the second flush never finished: %s" % st
    assert res.value("B_RC") == "0"
    assert st["dirty"] == 0
    assert res.value("ORIGIN_SAME") == "1"
