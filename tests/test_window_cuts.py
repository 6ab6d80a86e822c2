"""Power cuts placed in the windows of the commit protocol (issue 14).

tests/test_durability.py cuts the power at random moments. Most windows of
the protocol last a few instructions (an overwrite between W4 and W6, an
eviction between its FREE store and the fence, writeback between the
origin flush and the CLEAN stores, recovery itself), so a random cut
almost never lands in one. Here the module cuts the power itself, at a
named point:

- a test build of dm-pmemcache (PMC_CUT_HOOKS: dm-pmemcache/pmc_cut.h and
  cut.c; the product module compiles the points to nothing) gets
  `cut_at=<point>` and `cut_after=<N>`. The N-th hit of the point prints
  "dm-pmemcache: power cut at <point> (hit N)" on the console and writes
  the point's number + 1 to QEMU's isa-debug-exit port; QEMU exits at
  once (run-vm.sh: exit status 123 and "run-vm: power cut by the guest:
  isa-debug-exit value V" at the end of the console log). Whatever the
  guest held in RAM is gone, dm-volatile's unflushed origin writes too;
  pmem keeps every store issued so far (QEMU has no volatile pmem cache:
  what a missing fence or flush does is tests/host/crash_model's job).
- the stack, the writer and the checks are test_durability's: md raid1
  -> dm volatile -> the cache on 64 MiB of pmem, 4 writer threads, here
  over 96 MiB (most writes replace a cached copy, and blocks are still
  evicted), and one thread that writes and discards runs of a 4 MiB
  region. Each boot checks every sector the last writer boot wrote,
  through the cache, then after `flush` on md itself, and that the status
  counters add up; the last boot checks the whole working set.
- a point of the workload is armed once the writers have made 40 % of
  the cache dirty (writeback starts at 50 %, so that a cut overwrite
  often replaces a dirty copy, and the writeback points come soon after),
  with N drawn from a seeded range. The recovery points
  (recover_load: after N live records were put in the index,
  recover_repair: after a loser or torn record was made FREE) are insmod
  parameters, so the cut comes during the table load; the boot after it
  recovers again. recover_repair follows a cut at over_w4 (both copies of
  a block live), so that there is a record to repair.

Each cut must have happened at its point: QEMU's exit status, the
debug-exit value (the point's number) and the kernel's line naming the
point and the hit.

`make test`: over_w4, recover_repair, wb_flushed, evict_e1, discard_d1,
through_t1 (armed in cleaner mode once no block is dirty: every cached
copy a write replaces through the origin is clean).
PMC_LONG=1: every point PMC_WINDOW_ROUNDS times (default 3), seeded order.
PMC_CUT_POINTS=a,b,c: those points, in that order (tests/mutants.sh).
PMC_CUT_KO=path: a hooked module built elsewhere (a mutant) instead.
"""
import os
import random
import re
import shutil
import subprocess
import time

import pytest

from test_durability import (ID_STRIDE, PMEM_MB, SETUP, THREADS, VOLATILE, Model, Writer,
                             check_results, cut_output, guest_tools, output_so_far,  # noqa: F401
                             run, start, wait_for_check)
from test_target import parse_status
from test_target_powercut import power_cut
from vm import CUT_LINE, EXIT_CUT, KBUILD, KCACHE, REPO

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
ROUNDS = int(os.environ.get("PMC_WINDOW_ROUNDS", "3"))
ONLY = [p for p in os.environ.get("PMC_CUT_POINTS", "").split(",") if p]
# PMC_CUT_QUIET=1: stop the writers before arming, let writeback go quiet,
# then flush: the first writeback batch after that was covered by no
# earlier origin flush (tests/mutants.sh: CLEAN before the origin flush).
# PMC_CUT_AFTER=N: cut at the N-th hit instead of a seeded draw.
QUIET = os.environ.get("PMC_CUT_QUIET", "0") not in ("", "0")
FIXED_AFTER = int(os.environ.get("PMC_CUT_AFTER", "0"))
CUT_KO = os.environ.get("PMC_CUT_KO")
SHORT = ["over_w4", "recover_repair", "wb_flushed", "evict_e1", "discard_d1", "through_t1"]
KSRC = KCACHE / "linux"

REGION = 96 << 11                       # the writers' working set, sectors
DISCARD_AT = 128 << 11                  # 4 MiB written and discarded
DISCARD_SECTORS = 4 << 11
DISCARD_ID = 1                          # writer ids are >= ID_STRIDE
# writeback from 50 % dirty on; a point is armed at 40 % (or after 30 s)
TABLE = "4 high_watermark 70 low_watermark 50"
ARM_DIRTY = 40
GUEST_KO = "/test/dm-pmemcache-cut.ko"

# cut_after is drawn from these ranges (hits after arming)
CUT_AFTER = {"new_w2": (1, 300), "new_w3": (1, 300), "new_w4": (1, 300),
             "over_w2": (1, 100), "over_w3": (1, 100), "over_w4": (1, 100),
             "over_w5": (1, 100), "over_w6": (1, 100), "evict_e1": (1, 300),
             "discard_d1": (1, 200), "through_t1": (1, 200), "wb_start": (1, 50),
             "wb_written": (1, 20), "wb_flushed": (1, 20), "wb_c1": (1, 500),
             "recover_load": (1, 4000), "recover_repair": (1, 1)}
RECOVERY = ("recover_load", "recover_repair")
# cuts after which two live copies of a block are left for recovery
LEAVES_LOSER = ("over_w3", "over_w4")


def cut_points():
    """The points of dm-pmemcache/pmc_cut.h in enum order: a point's
    debug-exit value is its index + 1."""
    text = (REPO / "dm-pmemcache/pmc_cut.h").read_text()
    body = re.search(r"enum pmc_cut \{(.*?)\};", text, re.S).group(1)
    names = [n.lower() for n in re.findall(r"^\s*PMC_CUT_([A-Z0-9_]+)", body, re.M)]
    assert names[-1] == "nr", names
    return names[:-1]


POINTS = cut_points()


def plan(rng, only=ONLY, long=LONG):
    """The points of this run, one per boot."""
    if only:
        order = list(only)
    elif not long:
        order = list(SHORT)
    else:
        writes = [p for p in POINTS if p not in RECOVERY] * ROUNDS
        rng.shuffle(writes)
        order = []
        loads = set(rng.sample(range(1, len(writes)), min(ROUNDS, len(writes) - 1)))
        for i, p in enumerate(writes):
            if i in loads:
                order.append("recover_load")
            order.append(p)
            if p in LEAVES_LOSER:
                order.append("recover_repair")
    for i, p in enumerate(order):
        assert p in POINTS, "unknown point %s (pmc_cut.h has %s)" % (p, POINTS)
        if p == "recover_repair":
            assert i and order[i - 1] in LEAVES_LOSER, "recover_repair needs a loser: %s" % order
    assert order and order[0] not in RECOVERY, "the first boot must write: %s" % order
    return order


# the sources with cut points: the shared policy units too
HOOKED = ("pmc_meta.c", "writeback.c", "pmc_wb.c", "pmc_io.c", "pmc_write.c")


def test_cut_points_are_named_placed_and_documented():
    """Host only: cut.c names the points of pmc_cut.h in enum order (the
    debug-exit value is the index + 1), each point is placed in the code,
    documented in format.md, has a cut_after range, and the long plan cuts
    at every one of them."""
    names = re.findall(r'\[PMC_CUT_([A-Z0-9_]+)\] = "([a-z0-9_]+)"',
                       (REPO / "dm-pmemcache/cut.c").read_text())
    assert [n.lower() for n, _ in names] == POINTS
    assert [v for _, v in names] == POINTS
    code = "".join((REPO / "dm-pmemcache" / f).read_text() for f in HOOKED)
    doc = (REPO / "docs/format.md").read_text()
    for p in POINTS:
        assert re.search(r"PMC_CUT_%s\b" % p.upper(), code), p
        assert "| `%s` |" % p in doc, p
    assert sorted(CUT_AFTER) == sorted(POINTS)
    assert set(plan(random.Random(1), only=None, long=True)) == set(POINTS)


HOOK_CALL = re.compile(r"^(\s*)pmc_cut_point\(.*\);$", re.M)


def text_sections(src, objs):
    """{object: bytes of every .text* section}, objdump's view."""
    out = {}
    for o in objs:
        p = subprocess.run(["objdump", "-s", "-j", ".text", "-j", ".text.unlikely",
                            "-j", ".init.text", "-j", ".exit.text", str(src / o)],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        out[o] = p.stdout.split("\n", 2)[2]     # without the file name line
    return out


def build_objects(tmp, name, edit=None):
    """Build the hooked objects of a copy of dm-pmemcache/ (product flags),
    with edit(text) applied to each hooked source and to pmc_cut.h."""
    src = tmp / name
    shutil.copytree(REPO / "dm-pmemcache", src,
                    ignore=shutil.ignore_patterns("*.o", "*.ko", ".*.cmd", "*.mod*",
                                                  "modules.order", "Module.symvers"))
    if edit:
        for f in HOOKED + ("pmc_cut.h",):
            (src / f).write_text(edit(f, (src / f).read_text()))
    objs = [f[:-2] + ".o" for f in HOOKED]
    p = subprocess.run(["flock", str(KCACHE / "kernel-build.lock"),
                        "make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
                        "M=%s" % src] + objs, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return text_sections(src, objs)


def test_product_text_is_the_same_without_the_cut_points(tmp_path):
    """docs/format.md: in the product module pmc_cut_point() compiles to
    nothing.  The .text sections of pmc_meta.o, writeback.o, pmc_wb.o,
    pmc_io.o and pmc_write.o are byte for byte those of a copy whose calls
    are deleted (each replaced by an empty statement, so no line number
    moves); a control copy whose pmc_cut_point() emits one nop must
    differ, or the check could not fail."""
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)

    def unhook(f, text):
        if f == "pmc_cut.h":
            return text
        n = len(HOOK_CALL.findall(text))
        assert n, f
        return HOOK_CALL.sub(r"\1;", text)

    def nop(f, text):
        if f != "pmc_cut.h":
            return text
        body = "{\n\t(void)point;\n}"
        assert text.count(body) == 1
        return text.replace(body, '{\n\t(void)point;\n\tasm volatile("nop");\n}')

    product = build_objects(tmp_path, "product")
    assert build_objects(tmp_path, "unhooked", unhook) == product, \
        "the product's .text changes when the cut points are deleted"
    control = build_objects(tmp_path, "nop", nop)
    differ = [o for o in product if control[o] != product[o]]
    print("objects compared: %s; the nop control differs in: %s"
          % (", ".join(sorted(product)), ", ".join(differ)))
    assert sorted(differ) == sorted(product), "control: a one-nop hook left .text unchanged"


@pytest.fixture(scope="module")
def cut_ko(tmp_path_factory):
    """dm-pmemcache.ko built with PMC_CUT_HOOKS=1 (W=1, no warning), from a
    copy of dm-pmemcache/, as tests/mutants.sh builds its copies."""
    if CUT_KO:
        return CUT_KO
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)
    src = tmp_path_factory.mktemp("cut") / "dm-pmemcache"
    shutil.copytree(REPO / "dm-pmemcache", src,
                    ignore=shutil.ignore_patterns("*.o", "*.ko", ".*.cmd", "*.mod*",
                                                  "modules.order", "Module.symvers"))
    p = subprocess.run(["flock", str(KCACHE / "kernel-build.lock"),
                        "make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
                        "M=%s" % src, "W=1", "PMC_CUT_HOOKS=1", "modules"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "warning:" not in p.stderr, p.stderr
    return str(src / "dm-pmemcache.ko")


WRITE = r"""
dmesg | sed -n 's/.*: recovery: \([0-9]*\) superseded, \([0-9]*\) torn.*/RECOVERY=\1 \2/p' | tail -1
echo "AFTER=$(dmsetup status pc)"
P=/sys/module/dm_pmemcache/parameters
{ durable_io discard /dev/mapper/pc %(dstart)d %(dsectors)d %(did)d %(dseed)d; rc=$?; [ $rc -ge 128 ] || echo "FAIL: durable_io discard exited $rc"; } &
dpid=$!
{ durable_io write /dev/mapper/pc 0 %(sectors)d %(threads)d %(id_base)d %(seed)d; rc=$?; [ $rc -ge 128 ] || echo "FAIL: durable_io write exited $rc"; } &
wpid=$!
i=0
armed=0
while true; do
	st=$(dmsetup status pc)
	echo "ST $st"
	# shellcheck disable=SC2086
	set -- $st
	# fields 4 and 5: blocks, dirty
	if [ $i -ge 0 ] && { [ $(($5 * 100)) -ge $(($4 * %(arm_dirty)d)) ] || [ $i -ge 60 ]; }; then
		if [ %(quiet)d = 1 ]; then
			# the writers, not the subshells that report their exit
			kill $(pidof durable_io) 2>/dev/null || true
			wait $wpid $dpid 2>/dev/null || true
			sleep 3
			echo "QUIET=$(dmsetup status pc)"
		fi
		# write-through: cleaner mode, and only once every cached block
		# is clean (a cut after T1 must not leave a clean copy live)
		case %(point)s in
		through_*)
			dmsetup message pc 0 cleaner || die cleaner
			n=0
			while [ "$(dmsetup status pc | awk '{print $5}')" != 0 ]; do
				n=$((n + 1))
				[ $n -lt 240 ] || die "cleaner: blocks stay dirty"
				sleep 0.5
			done
			echo "CLEANER=$(dmsetup status pc)"
			;;
		esac
		echo %(after)d > $P/cut_after
		echo %(point)s > $P/cut_at || die "cut_at %(point)s"
		echo "ARMED=$(cat $P/cut_at) $(cat $P/cut_after)"
		if [ %(quiet)d = 1 ]; then
			dmsetup message pc 0 flush &
		fi
		i=-1
	fi
	[ $i -ge 0 ] && i=$((i + 1))
	# armed for 20 s and still running: the writers may keep the cache
	# below the low watermark, where writeback rests; a flush makes it run
	if [ $i -lt 0 ]; then
		armed=$((armed + 1))
		case %(point)s in
		wb_*)
			if [ $armed = 40 ]; then
				dmsetup message pc 0 flush &
				echo FLUSH_STARTED=1
			fi
			;;
		esac
	fi
	sleep 0.5
done
"""

AFTER = r"""
dmesg | sed -n 's/.*: recovery: \([0-9]*\) superseded, \([0-9]*\) torn.*/RECOVERY=\1 \2/p' | tail -1
echo "AFTER=$(dmsetup status pc)"
"""


def setup(ko, first=0):
    return SETUP % dict(ko=ko, first=first, volatile=VOLATILE, table=TABLE, pmem="pmem0")


def writer_script(point, after, boot, rng):
    """The script and its writer (the runs durable_io will write)."""
    dseed, seed = rng.randrange(1, 1 << 30), rng.randrange(1, 1 << 30)
    script = setup(GUEST_KO, int(boot == 1)) + WRITE % dict(
        arm_dirty=ARM_DIRTY, after=after, point=point, quiet=int(QUIET), dstart=DISCARD_AT,
        dsectors=DISCARD_SECTORS, did=DISCARD_ID, dseed=dseed, sectors=REGION,
        threads=THREADS, id_base=boot * ID_STRIDE, seed=seed)
    return script, Writer(0, REGION, THREADS, seed)


def recovery_script(point, after):
    """insmod with the point armed: the cut comes in the table load."""
    return setup("%s cut_at=%s cut_after=%d" % (GUEST_KO, point, after))


def write_expect(model, path, everything=False):
    """The model's expectations plus the discard region (zeros or its id).
    A cut by the guest loses the last lines the script wrote to its port;
    the model checks where the writes it never saw may have gone."""
    n = model.expect(path, everything)
    with open(path, "a") as f:
        f.write("%d %d 0,%d\n" % (DISCARD_AT, DISCARD_SECTORS, DISCARD_ID))
    return n


def resolve(model, output):
    """model.resolve without the discard region (not part of the model)."""
    model.resolve("".join(l for l in output.splitlines(True)
                          if not (l.startswith("CACHE AMB ") and
                                  DISCARD_AT <= int(l.split()[2]) < DISCARD_AT + DISCARD_SECTORS)))


def sane(line, flushed):
    """The status counters add up; no error; after a flush, nothing dirty."""
    st = parse_status(line)
    assert st["dirty"] + st["free"] + st["clean"] + st["bad_slots"] == st["blocks"], st
    assert st["wb_errors"] == 0 and st["media_errors"] == 0, st
    assert st["health"] == "ok", st
    if flushed:
        assert st["dirty"] == 0, st
    return st


def wait_for_cut(vm, proc, boot, seconds):
    """Wait for the guest to cut its own power; fail if the script failed
    (a check found lost writes) or the point was never reached."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return proc.returncode
        text = output_so_far(boot)
        if "FAIL:" in text:
            time.sleep(2)       # the rest of the checker's lines
            for tag in ("CACHE", "ORIGIN"):
                if re.search(r"^%s (BAD|CHECK) " % tag, text, re.M):
                    check_results(output_so_far(boot), tag)
            power_cut(vm, proc)
            raise AssertionError("guest script failed:\n" + text[-3000:])
        time.sleep(0.2)
    power_cut(vm, proc)
    raise AssertionError("the point was not reached in %d s:\n%s"
                         % (seconds, output_so_far(boot)[-3000:]))


def assert_cut_at(rc, boot, point, after):
    """The guest ended by isa-debug-exit, with the point's value, and the
    kernel named the point and the hit just before."""
    console = boot.read()[0]
    assert rc == EXIT_CUT, "guest ended with %s, not a cut at %s:\n%s" % (
        rc, point, console[-2000:])
    m = CUT_LINE.findall(console)
    assert m == [str(POINTS.index(point) + 1)], (point, m)
    assert re.search(r"dm-pmemcache: power cut at %s \(hit %d\)" % (point, after), console), \
        "the console does not name the point:\n" + console[-2000:]


def test_power_cuts_in_the_protocol_windows(vm, guest_tools, cut_ko, figures, tmp_path):
    rng = random.Random(int(os.environ.get("PMC_SEED", "1404")))
    order = plan(rng)
    model = Model()
    expect = tmp_path / "expect"
    files = list(guest_tools) + [(cut_ko, GUEST_KO)]
    checked = superseded = 0
    done = []
    prev = None
    for boot, point in enumerate(order, 1):
        lo, hi = CUT_AFTER[point]
        after = rng.randint(lo, hi)
        if FIXED_AFTER:
            after = FIXED_AFTER
        fl = list(files)
        if boot > 1:
            write_expect(model, expect)
            fl.append((expect, "/test/expect"))
        if point in RECOVERY:
            script = recovery_script(point, after)
        else:
            script, writer = writer_script(point, after, boot, rng)
        proc, log = start(vm, script, files=fl, pmem_size=PMEM_MB, timeout=900)
        try:
            if point not in RECOVERY and boot > 1:
                wait_for_check(log)
            rc = wait_for_cut(vm, proc, log, 600)
        finally:
            if proc.poll() is None:
                power_cut(vm, proc)
        out = cut_output(log)       # also checks the console for kernel reports
        # a recover_repair cut fires only if recovery repaired a record:
        # after over_w3/over_w4, the older copy of the block
        assert_cut_at(rc, log, point, after)
        done.append("%s@%d" % (point, after))
        last, prev = prev, point
        if point in RECOVERY:
            continue
        if boot > 1:
            checked += check_results(out, "CACHE")
            check_results(out, "ORIGIN")
            resolve(model, out[:out.index("CHECK_DONE=1")])
            sane(re.search(r"^LOADED=(.*)$", out, re.M).group(1), False)
            sane(re.search(r"^AFTER=(.*)$", out, re.M).group(1), True)
            m = re.search(r"^RECOVERY=(\d+) (\d+)$", out, re.M)
            superseded += int(m.group(1)) if m else 0
            if last in LEAVES_LOSER:
                # the cut left two live copies of a block: recovery must
                # have dropped the older one
                assert m and int(m.group(1)) >= 1, \
                    "no superseded record after a cut at %s:\n%s" % (last, out[-3000:])
        # the line may be lost with the cut (the port's queue): the
        # kernel's line above is what shows the point and the hit
        armed = re.findall(r"^ARMED=(.*)$", out, re.M)
        assert armed in ([], ["%s %d" % (point, after)]), armed
        model.apply(out, boot, writer)

    # the last writer boot's writes, then the whole working set, through
    # the cache and on md after flush
    for everything in (False, True):
        write_expect(model, expect, everything)
        res = run(vm, setup(GUEST_KO) + AFTER, files=files + [(expect, "/test/expect")],
                  pmem_size=PMEM_MB, timeout=900)
        n = check_results(res.output, "CACHE")
        check_results(res.output, "ORIGIN")
        assert res.rc == 0, res.tail()
        sane(res.value("LOADED"), False)
        sane(res.value("AFTER"), True)
        resolve(model, res.output)
        if not everything:
            checked += n
    print("window cuts: %d (%s), acknowledged writes: %d, sectors checked: %d "
          "(+%d at the end), superseded records found by recovery: %d"
          % (len(order), " ".join(done), model.acked, checked, n, superseded))
    figures["cuts in protocol windows (ack. writes)"] = "%d (%d)" % (len(order), model.acked)
    figures["window cuts: acknowledged writes lost"] = 0
