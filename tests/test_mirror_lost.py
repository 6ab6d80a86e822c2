"""A mirrored cache loses a half while it runs (issue 31, step 4).

The writer of tests/test_target_powercut.py runs on a mirrored cache (two
NVDIMMs, dirty blocks only: no writeback); after LOSE_AT acknowledged
writes one half's namespace is unbound (what a dead NVDIMM or `ndctl
disable-namespace --force` does). The writer must go on without an error
on the survivor: the first section that finds the half gone records M1 on
the survivor (a new generation, partner stale), moves reads and writeback
to it and raises health `mirror_degraded` with a dm event and one dmesg
line. Asserted: the unbind came mid-run, >= AFTER writes were
acknowledged after it, the status, the event and the alert of
`pmemcachectl monitor --oneshot`. Then the power is cut.

- Half A (pmem0, the one reads used) lost: the next boot has both NVDIMMs
  again (A as it was at the unbind). The pair must be copied from B to A,
  and every acknowledged write read back.
- Half B (pmem1) lost: the next boot has only A, and the table says
  `mirror -` without `degraded`: A's info must say it ran alone (else the
  start is refused), and every acknowledged write reads back.

The mutant that skips M1 in pmc_mirror_lose() is caught by the first
case: A and B then look in sync, the start copies the stale A over B and
the writes acknowledged after the loss are lost (the real module is the
control: the same case passes).
"""
import random

from test_mirror import (ALONE, ARGS, LOST, MIRROR_PRELUDE, NBLOCKS, PMEM2_MB, PMEM_MB,
                         build_mutant, expected_sectors_n, use_module)
from test_events import tool  # noqa: F401
from test_target import parse_status, pmemcache_module  # noqa: F401
from test_target_powercut import (READ_BACK, WRITE_LOOP, cut_console, lost_writes, read_back,
                                  wait_for_acks)

LOSE_AT = 30        # acknowledged writes before the unbind
AFTER = 40          # and at least these after it

# The writer, with the unbind after write LOSE_AT and a look at the cache
# after the next one.
LOSE_HOOKS = r"""	echo "ACK $i"
	if [ $i = %(lose_at)d ]; then lose_half; fi
	if [ $i = $((%(lose_at)d + 1)) ]; then after_loss; fi
"""
WRITER = r"""
pmc_init2
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
pmemcachectl monitor pc --oneshot 2>/tmp/one.err &
mp=$!
lose_half() {
	ns=$(basename "$(readlink -f /sys/block/%(lose)s/device)")
	ev0=$(dmsetup info -c --noheadings -o events pc)
	dmesg -c > /dev/null
	echo "$ns" > /sys/bus/nd/drivers/nd_pmem/unbind || die unbind
	[ -b /dev/%(lose)s ] && die "%(lose)s still there"
	echo "LOST_AT=$i"
}
after_loss() {
	status 2
	echo "EVENTS=$ev0 $(dmsetup info -c --noheadings -o events pc)"
	echo "LOSS_LINE=$(dmesg | grep 'mirror: lost the half' | head -1 | sed 's/.*mirror: //')"
	n=0
	while kill -0 $mp 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	if kill -0 $mp 2>/dev/null; then
		kill $mp
		echo "MONITOR=still waiting"
	else
		rc=0
		wait $mp || rc=$?
		echo "MONITOR=$rc $(tail -1 /tmp/one.err)"
	fi
}
""" + WRITE_LOOP.replace('\techo "ACK $i"\n', LOSE_HOOKS)

# The next boot: the table %(table)s over the NVDIMMs this boot has.
NEXT = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
dmesg -c > /dev/null
dm_create pc "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem0 4096 %(table)s" \
	|| { dmesg | tail -3; die "table refused"; }
a=$(cat /sys/block/pmem0/dev)
if [ -b /dev/pmem1 ]; then
	b=$(cat /sys/block/pmem1/dev)
	dmesg | grep -q "mirror: copying the half on $a to $b" && echo COPIED=A_TO_B
	dmesg | grep -q "mirror: copying the half on $b to $a" && echo COPIED=B_TO_A
fi
status 3
""" + READ_BACK + "dmsetup remove pc\n"


def lose_and_cut(vm, lose, seed):
    """The writer on the pair, half @lose unbound mid-run, then cut.
    Returns (the sectors each may hold, acknowledged writes, the writer's
    output)."""
    rng = random.Random(seed)
    proc, log = vm.start(MIRROR_PRELUDE + WRITER % dict(
        args=ARGS, lose=lose, lose_at=LOSE_AT, seed=rng.randrange(1, 30000), nblocks=NBLOCKS),
                         pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=600)
    try:
        wait_for_acks(log, LOSE_AT + AFTER)
    finally:
        vm.power_cut(proc)
    out = cut_console(log)
    allowed, nacked = expected_sectors_n(out)
    return allowed, nacked, out


def value(out, key):
    lines = [ln.split("=", 1)[1] for ln in out.splitlines() if ln.startswith(key + "=")]
    assert len(lines) == 1, (key, lines)
    return lines[0]


def lost_half_run(vm, lose, seed=41):
    """Step 4's scenario for half @lose: {what each step showed}."""
    allowed, nacked, out = lose_and_cut(vm, lose, seed)
    # preconditions: the loss came mid-run, writes were acknowledged on
    # the survivor alone, and the cache saw it
    assert value(out, "LOST_AT") == str(LOSE_AT)
    assert nacked >= LOSE_AT + AFTER, nacked
    s2 = parse_status(value(out, "STATUS2"))
    assert s2["dirty"] > 0 and s2["health"] == "mirror_degraded", s2
    ev0, ev1 = (int(x) for x in value(out, "EVENTS").split())
    assert ev1 > ev0, "no dm event for the lost half"
    mon = value(out, "MONITOR")
    assert mon.startswith("0 ") and mon.endswith(
        "pc: degraded: health mirror_degraded (was ok; began mirror_degraded)"), mon
    line = value(out, "LOSS_LINE")
    assert line.startswith("lost the half on ") and "alone, generation" in line, line
    both = lose == "pmem0"
    nvdimms = dict(pmem_size=PMEM_MB, pmem2_size=PMEM2_MB) if both else dict(pmem_size=PMEM_MB)
    res = vm.run(MIRROR_PRELUDE + NEXT % dict(table=ARGS if both else ALONE, nblocks=NBLOCKS,
                                              nsec=NBLOCKS * 8),
                 timeout=600, check=False, **nvdimms)
    got = read_back(res) if res.rc == 0 else {}
    lost = lost_writes(got, allowed)
    return dict(nacked=nacked, res=res, got=got, lost=lost, line=line)


def all_read_back(r):
    """The next boot started and read back every acknowledged write."""
    res = r["res"]
    assert res.rc == 0, res.tail(20)
    assert len(r["got"]) == NBLOCKS * 8
    assert not r["lost"], "%s: %d: %s" % (LOST, len(r["lost"]), sorted(r["lost"].items())[:5])
    return res


def test_half_a_lost_while_running_then_the_pair_copies_b_to_a(vm, tool):
    r = lost_half_run(vm, "pmem0")
    res = all_read_back(r)
    assert res.values("COPIED") == ["B_TO_A"], res.values("COPIED")
    assert parse_status(res.value("STATUS3"))["health"] == "ok"
    print("half A lost after %d writes: %d acknowledged in all, %s; next boot copied B to A, "
          "lost 0" % (LOSE_AT, r["nacked"], r["line"]))


def test_half_b_lost_while_running_then_a_starts_alone(vm, tool):
    r = lost_half_run(vm, "pmem1")
    # without M1, A cannot tell that it ran alone: refused without degraded
    res = all_read_back(r)
    assert parse_status(res.value("STATUS3"))["health"] == "mirror_degraded"
    print("half B lost after %d writes: %d acknowledged in all, %s; A alone (mirror -) "
          "started, lost 0" % (LOSE_AT, r["nacked"], r["line"]))


def test_half_lost_while_running_without_m1_is_caught(vm, tool, tmp_path):
    """The mutant: pmc_mirror_lose() drops the half without M1."""
    ko = build_mutant(tmp_path, "\t\tpmc_mirror_mark_alone(&mr->h[cur]);",
                      "\t\tif (0)\n\t\t\tpmc_mirror_mark_alone(&mr->h[cur]);", "mirror.c")
    use_module(vm, ko)
    r = lost_half_run(vm, "pmem0")
    assert r["res"].rc == 0, r["res"].tail(20)
    assert r["lost"], "mutant not caught (M1 skipped while running): every write read back"
    print("mutant caught (M1 skipped while running): %d sectors lost, copied %s"
          % (len(r["lost"]), r["res"].values("COPIED")))
