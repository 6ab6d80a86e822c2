"""A mirrored cache: the table feature `mirror <pmem_dev2>` (issue 31, step 2).

The guest has two NVDIMMs, each its own NFIT region: /dev/pmem0 (256 MiB)
and /dev/pmem1 (320 MiB; the cache uses the smaller).

- The table is refused, with its one dmesg line, for the same device
  twice, for two partitions of one NVDIMM (one region: no redundancy),
  for "-" beside a device without mirror info (even with `degraded`), for
  `degraded` without `mirror`, for `format` with a half "-", for two
  single-device caches, and
  for a blank first half beside a larger device's cache (neither is
  overwritten; the mutant that takes a cache it cannot open for a blank
  device accepts the two caches and is caught); two blank halves on two
  regions make a new pair, and fio --verify writes through the mirrored
  cache.
- A power cut with dirty blocks (asserted: the recovery of each half
  counts them), then each half alone is a complete crash image: half B
  (pmem1) alone, then half A alone (`mirror - degraded`, each on the
  image of the cut, kept on the host), reads back every acknowledged
  write (the writer of tests/test_target_powercut.py); then the mirrored
  table on the pair reads them back too.
- A table without `mirror` on a half is refused with its line: alone, a
  half may be the stale one. The mutant without that refusal starts the
  old half B as a single-device cache after A ran alone, and B serves
  data that A's acknowledged writes replaced: caught.
- Two mutants of the store helper, pmc_meta_store(): every store skips
  the second half (half B is then refused: no superblock), and only the
  stores of writes do (half B is a cache without records: acknowledged
  writes read back wrong). Each is caught by the check of half B; the
  real module, the control, passes the same check.
- Step 3, a half lost: a power cut with dirty blocks, then half B's
  NVDIMM is gone (the guest boots without it) and the table says
  `mirror -`: refused with its line (the survivor cannot tell whether B
  ran alone since); with `degraded` it starts (M1), health
  `mirror_degraded`, every acknowledged write reads back, and new writes
  are acknowledged on A alone; a table without `degraded` then starts too
  (A's info says it ran alone). B back: B alone (`mirror -`) is refused;
  B beside A, B first in the table, is resynced from A; the pair, then B
  alone and A alone (`mirror - degraded`) read back every acknowledged
  write, those of the degraded run too; B alone without `mirror` is
  refused too. The mutant that skips M1 is
  caught: the pair starts as "in sync" and copies the stale B over A.
"""
import contextlib
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from test_bad_input import mbr
from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
from test_target_powercut import (READ_BACK, WRITE_LOOP, cut_console, expected_sectors,
                                  lost_writes, read_back, wait_for_acks)
from vm import KBUILD, KSRC, REPO, build

PMEM_MB, PMEM2_MB = 256, 320
NBLOCKS = 64
# No writeback while the writer runs: the blocks stay dirty in the cache.
ARGS = "6 high_watermark 100 low_watermark 100 mirror /dev/pmem1"
SINGLE = "4 high_watermark 100 low_watermark 100"
# One half alone, knowingly (a table without `mirror` is refused on a half).
ALONE = "6 high_watermark 100 low_watermark 100 mirror -"
DEGRADED = "7 high_watermark 100 low_watermark 100 mirror - degraded"
HALF_LINE = "mirror: a half of a mirrored cache: give its other half or mirror -"
# Partitions of pmem0 for the same-region case: 64 MiB each.
P1, P2, PART_SECTORS = 2048, 133120, 131072

MIRROR_PRELUDE = PRELUDE + r"""
pmc_init2() {
	pmc_init
	if [ $PMC_RAW = 0 ]; then
		ndctl create-namespace -f -e namespace1.0 -m fsdax -M mem \
			> /dev/null 2>&1 || die "ndctl fsdax pmem1"
	fi
	[ -b /dev/pmem1 ] || die "no /dev/pmem1"
}

# refused NAME TABLE LINE: the table must fail and dmesg say LINE
refused() {
	dmesg -c > /dev/null
	if dmsetup create --noudevsync "$1" --table "$2" 2>/dev/null; then
		die "table $1 accepted"
	fi
	dmesg | grep -q "$3" || { dmesg | tail -5; die "no line '$3' for $1"; }
	echo "REFUSED=$1"
}
"""


def boot(vm, body, **kw):
    kw.setdefault("timeout", 900)
    return vm.run(MIRROR_PRELUDE + body, pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, **kw)


def test_mirror_table_refusals_and_fio_verify(vm, tmp_path):
    (tmp_path / "mbr").write_bytes(mbr([(P1, PART_SECTORS), (P2, PART_SECTORS)]))
    script = r"""
pmc_init2
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
refused same "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 2 mirror /dev/pmem0" \
	"mirror: both halves are the same pmem device"
dd if=/test/mbr of=/dev/pmem0 bs=512 count=1 conv=notrunc 2>/dev/null
blockdev --rereadpt /dev/pmem0 || die rereadpt
[ -b /dev/pmem0p2 ] || die "no /dev/pmem0p2"
refused region "0 $sz pmemcache /dev/md0 /dev/pmem0p1 4096 2 mirror /dev/pmem0p2" \
	"mirror: both pmem devices are on the same NVDIMM region (no redundancy)"
dd if=/dev/zero of=/dev/pmem0 bs=4096 count=1 conv=notrunc 2>/dev/null
blockdev --rereadpt /dev/pmem0 || die rereadpt
[ -b /dev/pmem0p1 ] && die "pmem0p1 still there"
refused dash "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 3 mirror - degraded" \
	"one half is missing and the other holds no mirror info"
refused nomirror "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 1 degraded" \
	"degraded is only for a mirror"
refused fmtdash "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 4 mirror - format degraded" \
	"mirror: format needs both halves"
# a single-device cache on each: neither is overwritten by the other
dm_create one "0 $sz pmemcache /dev/md0 /dev/pmem0 4096" || die "one on pmem0"
dmsetup remove one
dm_create one "0 $sz pmemcache /dev/md0 /dev/pmem1 4096" || die "one on pmem1"
dmsetup remove one
refused two "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 2 mirror /dev/pmem1" \
	"both pmem devices hold a cache and neither is a mirror half"
dd if=/dev/zero of=/dev/pmem0 bs=4096 count=1 conv=notrunc 2>/dev/null
refused bigger "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 2 mirror /dev/pmem1" \
	"pmem device is smaller than the cache formatted on it"
dd if=/dev/zero of=/dev/pmem1 bs=4096 count=1 conv=notrunc 2>/dev/null
dmesg -c > /dev/null
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
dmesg | grep -q "formatted a new mirrored pair" || die "no pair formatted"
echo "TABLE=$(dmsetup table pc)"
echo "PMEM1=$(cat /sys/block/pmem1/dev)"
fio_job rand /dev/mapper/pc --rw=randwrite --bsrange=512-64k --size=32m --offset=0
status 1
dmsetup remove pc
dm_create pc "$(pmc_table md0 '%(args)s')" || die "create again"
fio_check rand /dev/mapper/pc --rw=randwrite --bsrange=512-64k --size=32m --offset=0
status 2
dmsetup remove pc
""" % dict(args=ARGS)
    res = boot(vm, script, files=[(tmp_path / "mbr", "/test/mbr")])
    assert res.values("REFUSED") == ["same", "region", "dash", "nomirror", "fmtdash", "two",
                                     "bigger"]
    assert res.value("TABLE").endswith("mirror " + res.value("PMEM1")), res.value("TABLE")
    s1, s2 = parse_status(res.value("STATUS1")), parse_status(res.value("STATUS2"))
    # the smaller half (pmem0) sets the size
    assert 0 < s1["blocks"] * 4096 < PMEM_MB << 20
    assert s1["dirty"] > 0 and s2["dirty"] == s1["dirty"]
    assert res.values("VERIFY_OK") == ["rand"]


def test_single_device_cache_given_a_mirror_is_copied_to_it(vm):
    """A cache with dirty blocks on pmem0 alone, then the same cache with
    `mirror /dev/pmem1` (blank): the first resume copies it (R1..R5); then
    pmem1 alone (`mirror - degraded`: a single-device table is refused on
    a half) holds every dirty block."""
    script = r"""
pmc_init2
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '%(single)s')" || die create
fio_job small /dev/mapper/pc %(job)s
status 1
dmsetup remove pc
dmesg -c > /dev/null
dm_create pc "$(pmc_table md0 '%(args)s')" || die "create mirrored"
a=$(cat /sys/block/pmem0/dev) b=$(cat /sys/block/pmem1/dev)
dmesg | grep -q "mirror: copying the half on $a to $b" && echo COPIED=1
status 2
fio_check small /dev/mapper/pc %(job)s
dmsetup remove pc
sz=$(blockdev --getsz /dev/md0)
refused half "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 %(single)s" "%(line)s"
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 %(degraded)s" || die "pmem1 alone"
status 3
fio_check small /dev/mapper/pc %(job)s
dmsetup remove pc
""" % dict(single=SINGLE, args=ARGS, degraded=DEGRADED, line=HALF_LINE, job="--rw=randwrite --bs=4k --size=8m --offset=0")
    res = boot(vm, script)
    s1, s2, s3 = (parse_status(res.value("STATUS%d" % i)) for i in (1, 2, 3))
    assert s1["dirty"] > 0
    assert s2["dirty"] == s1["dirty"] and s3["dirty"] == s1["dirty"]
    assert res.value("COPIED") == "1"
    assert res.values("REFUSED") == ["half"]
    assert res.values("VERIFY_OK") == ["small", "small"]


WRITER = r"""
pmc_init2
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
""" + WRITE_LOOP

# A table on one half alone (%(half)s, `mirror - degraded`) or on the
# pair again (%(half)s = pmem0, mirrored features), after the cut: read
# every sector.
CHECK_HALF = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
[ -b /dev/%(half)s ] || die "no /dev/%(half)s"
[ -b /dev/pmem1 ] || die "no /dev/pmem1"
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
echo "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/%(half)s 4096 %(args)s" > /tmp/t
dm_create pc "$(cat /tmp/t)" || die "table on %(half)s"
status 2
""" + READ_BACK + r"""dmsetup remove pc
"""

# What only a failing check prints (the mutant's verdict keys on it).
LOST = "MIRROR HALF LOST WRITES"


HALF_IMAGE = {"pmem0": "pmem.img", "pmem1": "pmem2.img"}


@contextlib.contextmanager
def image_kept(vm, half):
    """The NVDIMM image of @half as it is now, put back afterwards: a half
    started alone stores that it ran alone (M1), and the next check must
    see the image of the cut.  Only that half is written meanwhile: no
    writeback (high_watermark 100), and the table names no other half."""
    img = vm.state / HALF_IMAGE[half]
    kept = img.with_suffix(".kept")
    subprocess.run(["cp", "--sparse=always", str(img), str(kept)], check=True)
    try:
        yield
    finally:
        os.replace(kept, img)


def check_half(vm, half, allowed, pair=False):
    """Half @half alone, on the image it has now (kept), or the pair:
    (dirty blocks it recovered, {sector: (got, allowed)} lost). A table
    it refuses counts as every write lost."""
    if pair:
        return read_through(vm, half, allowed, ARGS)
    with image_kept(vm, half):
        return read_through(vm, half, allowed, DEGRADED)


def read_through(vm, half, allowed, args):
    res = vm.run(MIRROR_PRELUDE + CHECK_HALF % dict(
        half=half, args=args, nblocks=NBLOCKS, nsec=NBLOCKS * 8),
        pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=600, check=False)
    if res.rc != 0:
        return 0, {"table": ("refused or failed", res.tail(20))}
    got = read_back(res)
    assert len(got) == NBLOCKS * 8
    lost = lost_writes(got, allowed)
    return parse_status(res.value("STATUS2"))["dirty"], lost


def write_on_the_pair_and_cut(vm, seed):
    """The writer boot on the mirrored table, cut after some of its writes
    were acknowledged: (the sectors each may hold, acknowledged writes)."""
    rng = random.Random(seed)
    proc, log = vm.start(MIRROR_PRELUDE + WRITER % dict(
        args=ARGS, seed=rng.randrange(1, 30000), nblocks=NBLOCKS),
        pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=600)
    try:
        wait_for_acks(log, rng.randrange(40, 100))
    finally:
        vm.power_cut(proc)
    allowed, nacked = expected_sectors_n(cut_console(log))
    assert nacked > 0
    return allowed, nacked


def cut_and_check_halves(vm, seed):
    """One writer boot on the mirrored table, cut; then each half alone.
    Returns (acknowledged writes, {half: (dirty, lost)})."""
    allowed, nacked = write_on_the_pair_and_cut(vm, seed)
    # each half alone on the image of the cut, then the pair on it
    halves = {h: check_half(vm, h, allowed) for h in ("pmem1", "pmem0")}
    halves["pair"] = check_half(vm, "pmem0", allowed, pair=True)
    return nacked, halves


def expected_sectors_n(output):
    """expected_sectors() of test_target_powercut, over our NBLOCKS."""
    import test_target_powercut as tp
    saved, tp.NBLOCKS = tp.NBLOCKS, NBLOCKS
    try:
        return expected_sectors(output)
    finally:
        tp.NBLOCKS = saved


def test_power_cut_leaves_each_half_a_complete_crash_image(vm):
    nacked, halves = cut_and_check_halves(vm, 31)
    for half, (dirty, lost) in halves.items():
        # precondition: the cache held dirty blocks at the cut
        assert dirty > 0, (half, halves)
        assert not lost, "%s: %s on %s: %s" % (LOST, len(lost), half, sorted(lost.items())[:5])
    print("mirror power cut: %d acknowledged writes, dirty blocks recovered %s, lost 0"
          % (nacked, {h: d for h, (d, _) in halves.items()}))


# The pair writes OLD to block 0, half A alone (`mirror - degraded`) then
# writes NEW there; then half B, the stale one, under a table without
# `mirror`: refused, or (the mutant) started, and what it reads.
STALE_HALF = r"""
pmc_init2
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
fill() { dd if=/dev/zero bs=4096 count=1 2>/dev/null | tr '\000' "$1" | \
	dd of=/dev/mapper/pc bs=4096 count=1 oflag=direct conv=fsync,notrunc 2>/dev/null || die "write $1"; }
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 %(args)s" || die pair
fill O
dmsetup remove pc
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 %(degraded)s" || die "A alone"
fill N
status 1
dmsetup remove pc
dmesg -c > /dev/null
if dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 %(single)s" 2>/dev/null; then
	echo "B_READS=$(dd if=/dev/mapper/pc bs=4096 count=1 iflag=direct 2>/dev/null | head -c 4)"
	dmsetup remove pc
else
	dmesg | grep -qF "%(line)s" && echo REFUSED_LINE=1
fi
""" % dict(args=ARGS, degraded=DEGRADED, single=SINGLE, line=HALF_LINE)


def stale_half_alone(vm):
    """STALE_HALF's verdict: a failure token, or None."""
    res = boot(vm, STALE_HALF)
    assert parse_status(res.value("STATUS1"))["dirty"] > 0      # NEW is in A, dirty
    got = res.values("B_READS")
    if not got:
        assert res.value("REFUSED_LINE") == "1", res.tail(10)
        return None
    return "%s: B alone without mirror started and read %r where A acknowledged NNNN" % (
        LOST, got[0])


def test_a_half_without_mirror_is_refused(vm):
    assert stale_half_alone(vm) is None
    print("the stale half B under a table without mirror: refused (%s)" % HALF_LINE)


def test_a_half_without_mirror_mutant_is_caught(vm, tmp_path):
    """The mutant: the refusal removed (as before this check existed)."""
    ko = build_mutant(tmp_path, "\t} else if (!pc->format) {\n",
                      "\t} else if (0 && !pc->format) {\n", "recovery.c")
    use_module(vm, ko)
    verdict = stale_half_alone(vm)
    assert verdict, "mutant not caught (no refusal of a half alone)"
    print("mutant caught: " + verdict)


def build_mutant(tmp, old, new, name="pmc_meta.h"):
    """dm-pmemcache.ko with @old replaced by @new (exactly once) in @name,
    built in a copy of dm-pmemcache/."""
    src = Path(tmp) / "dm-pmemcache"
    shutil.copytree(REPO / "dm-pmemcache", src,
                    ignore=shutil.ignore_patterns("*.o", "*.ko", ".*.cmd", "*.mod*",
                                                  "modules.order", "Module.symvers"))
    text = (src / name).read_text()
    assert text.count(old) == 1, old
    (src / name).write_text(text.replace(old, new))
    # as test_target's build_module(): the M= build touches only its folder
    p = build(["make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
               "M=%s" % src, "modules"])
    assert p.returncode == 0, p.stderr
    return src / "dm-pmemcache.ko"


def use_module(vm, ko):
    """Every later boot of @vm loads @ko in place of this tree's module."""
    orig = vm.command

    def command(script, **opts):
        opts["files"] = list(opts.get("files", ())) + [(ko, "/lib/modules/extra/dm-pmemcache.ko")]
        return orig(script, **opts)

    vm.command = command


def test_mirror_over_another_cache_is_refused_and_its_mutant_caught(vm, tmp_path):
    """The mutant that takes a cache it cannot open (here: formatted on
    the larger pmem1) for a blank device, as mirror.c did before, copies
    over it: the table that the real module refuses (the control is the
    "two" case of the refusal test) is accepted."""
    ko = build_mutant(tmp_path, "oid, &why) != -ENODATA;", "oid, &why) == 0;", "mirror.c")
    use_module(vm, ko)
    res = boot(vm, r"""
pmc_init2
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create one "0 $sz pmemcache /dev/md0 /dev/pmem0 4096" || die "one on pmem0"
dmsetup remove one
dm_create one "0 $sz pmemcache /dev/md0 /dev/pmem1 4096" || die "one on pmem1"
dmsetup remove one
if dmsetup create --noudevsync pc --table \
	"0 $sz pmemcache /dev/md0 /dev/pmem0 4096 2 mirror /dev/pmem1" 2>/dev/null; then
	echo ACCEPTED=1
	dmsetup remove pc
fi
""")
    assert res.value("ACCEPTED") == "1", "mutant not caught: the table was refused"
    print("mutant caught (a cache it cannot open taken for blank): the table over two caches was accepted")


# (name, text of pmc_meta.h, mutant text, may half B be refused instead).
# make test runs the second (caught by lost data, not by a refusal); the
# first only with PMC_LONG=1, for time.
LONG = os.environ.get("PMC_LONG", "0") not in ("", "0")
STORE_MUTANTS = [
    pytest.param("every store skips the second half",
                 "\tif (live & 2)\n\t\tpmc_pmem_write(m->half[1]",
                 "\tif (0 && (live & 2))\n\t\tpmc_pmem_write(m->half[1]", True,
                 marks=pytest.mark.skipif(not LONG, reason="mutation testing: set PMC_LONG=1")),
    # half B is then a formatted cache without a record: a table loads it
    ("the stores of writes skip the second half (format's do not)",
     "\tif (live & 2)\n\t\tpmc_pmem_write(m->half[1]",
     "\tif ((live & 2) && tag == PMC_P_FORMAT)\n\t\tpmc_pmem_write(m->half[1]", False),
]


@pytest.mark.parametrize("what,old,new,refusal_ok", STORE_MUTANTS,
                         ids=["all-stores", "write-stores"])
def test_store_helper_skipping_the_second_half_is_caught(vm, tmp_path, what, old, new,
                                                         refusal_ok):
    """The mutant: pmc_meta_store() leaves the second half out. Half B
    alone must then miss acknowledged writes (or, with no superblock
    either, be refused)."""
    ko = build_mutant(tmp_path, old, new)
    use_module(vm, ko)
    allowed, _ = write_on_the_pair_and_cut(vm, 32)
    _, lost = check_half(vm, "pmem1", allowed)
    assert lost, "mutant not caught (%s): half B alone holds every acknowledged write" % what
    refused = "table" in lost
    assert refusal_ok or not refused, lost
    print("mutant caught (%s): %s" % (what, "half B refused" if refused else
                                      "%d of %d sectors wrong on half B" % (len(lost), NBLOCKS * 8)))


# Step 3: a half lost.  Half B (pmem1) is the one that goes.
B_FIRST = "6 high_watermark 100 low_watermark 100 mirror /dev/pmem0"
NEW_BLOCKS = 16     # written while degraded, after the writer's blocks
WHY_MISSING = "the other half is missing and may have run alone since (degraded overrides)"

DEGRADED_PRELUDE = MIRROR_PRELUDE + r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
[ -b /dev/pmem0 ] || die "no /dev/pmem0"
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
sz=$(blockdev --getsz /dev/md0)
# readback TAG: every sector of the writer's blocks, and the md5 of the
# blocks written while degraded
readback() {
	dd if=/dev/mapper/pc of=/tmp/r bs=4096 count=%(nblocks)d iflag=direct 2>/dev/null || die read
	echo "BEGIN $1"
	s=0
	while [ $s -lt %(nsec)d ]; do
		echo "S $s $(dd if=/tmp/r bs=16 skip=$((s * 32)) count=1 2>/dev/null | tr -d '\000\n')"
		s=$((s + 1))
	done
	echo "END $1"
	echo "NEW_$1=$(dd if=/dev/mapper/pc bs=4096 skip=%(nblocks)d count=%(new)d iflag=direct 2>/dev/null | md5sum | cut -d' ' -f1)"
}
"""

# Boot 2: no pmem1 at all.
DEGRADED_BOOT = r"""
[ -b /dev/pmem1 ] && die "pmem1 is there"
refused alone "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 %(alone)s" "%(why)s"
dmesg -c > /dev/null
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 %(degraded)s" || die "degraded refused"
dmesg | grep -q "mirror: running on this half alone" && echo ALONE_LINE=1
echo "TABLE=$(dmsetup table pc)"
status 2
readback deg
dd if=/dev/urandom of=/tmp/new bs=4096 count=%(new)d 2>/dev/null
dd if=/tmp/new of=/dev/mapper/pc bs=4096 seek=%(nblocks)d oflag=direct conv=fsync,notrunc \
	2>/dev/null || die "new writes"
echo "NEW=$(md5sum < /tmp/new | cut -d' ' -f1)"
status 3
dmsetup remove pc
# A's info now says it ran alone: no override needed
if dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 %(alone)s"; then
	echo KNOWN=1
	status 4
	dmsetup remove pc
else
	echo KNOWN=0
	dmesg | tail -3
fi
"""

# Boot 3: pmem1 (the old half B) back.
BACK_BOOT = r"""
[ -b /dev/pmem1 ] || die "no /dev/pmem1"
refused stale "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 %(alone)s" "%(why)s"
refused stale_single "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 %(single)s" "%(half_line)s"
dmesg -c > /dev/null
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 %(b_first)s" || die "pair refused"
a=$(cat /sys/block/pmem0/dev) b=$(cat /sys/block/pmem1/dev)
dmesg | grep -q "mirror: copying the half on $a to $b" && echo COPIED=A_TO_B
dmesg | grep -q "mirror: copying the half on $b to $a" && echo COPIED=B_TO_A
status 5
readback pair
dmsetup remove pc
for h in pmem1 pmem0; do
	dm_create pc "0 $sz pmemcache /dev/md0 /dev/$h 4096 %(degraded)s" || die "$h alone"
	readback $h
	dmsetup remove pc
done
"""


def section(res, tag, allowed):
    """Sectors of readback @tag that miss an acknowledged write."""
    out = res.output.split("BEGIN %s\n" % tag, 1)[1].split("END %s\n" % tag, 1)[0]
    got = read_back(type("R", (), {"output": out}))
    assert len(got) == NBLOCKS * 8, (tag, len(got))
    return lost_writes(got, allowed)


def degraded_scenario(vm, seed):
    """The writer on the pair, cut; A alone (`mirror -`, then with
    `degraded`, then without); B back. Returns what each step showed."""
    allowed, nacked = write_on_the_pair_and_cut(vm, seed)
    sub = dict(alone=ALONE, degraded=DEGRADED, b_first=B_FIRST, single=SINGLE,
               half_line=HALF_LINE, why=WHY_MISSING, nblocks=NBLOCKS, nsec=NBLOCKS * 8, new=NEW_BLOCKS)
    prelude = DEGRADED_PRELUDE % sub
    # half B's NVDIMM is not in this guest (its image stays on the host)
    deg = vm.run(prelude + DEGRADED_BOOT % sub, pmem_size=PMEM_MB, timeout=600)
    back = vm.run(prelude + BACK_BOOT % sub, pmem_size=PMEM_MB, pmem2_size=PMEM2_MB,
                  timeout=600)
    new = deg.value("NEW")
    out = dict(nacked=nacked, deg=deg, back=back,
               lost={t: section(r, t, allowed) for r, t in
                     ((deg, "deg"), (back, "pair"), (back, "pmem1"), (back, "pmem0"))},
               new_lost=[t for t in ("pair", "pmem1", "pmem0")
                         if back.value("NEW_" + t) != new])
    return out


def test_degraded_start_then_the_lost_half_back(vm):
    r = degraded_scenario(vm, 33)
    deg, back = r["deg"], r["back"]
    # refused without the override, started with it
    assert deg.values("REFUSED") == ["alone"]
    assert deg.value("ALONE_LINE") == "1"
    assert deg.value("TABLE").endswith("mirror -"), deg.value("TABLE")   # degraded: one-shot
    s2 = parse_status(deg.value("STATUS2"))
    assert s2["dirty"] > 0, s2      # precondition: dirty blocks at the cut
    for k in ("STATUS2", "STATUS3", "STATUS4"):
        assert deg.value(k).endswith(" mirror_degraded"), (k, deg.value(k))
    assert deg.value("KNOWN") == "1", "the survivor did not know it ran alone (M1)"
    # B alone refused; the pair copies A to B; health back to ok
    assert back.values("REFUSED") == ["stale", "stale_single"]
    assert back.values("COPIED") == ["A_TO_B"]
    assert back.value("STATUS5").endswith(" ok"), back.value("STATUS5")
    for tag, lost in r["lost"].items():
        assert not lost, "%s: %d on %s: %s" % (LOST, len(lost), tag, sorted(lost.items())[:5])
    assert not r["new_lost"], "%s: the degraded run's writes on %s" % (LOST, r["new_lost"])
    print("degraded start: %d acknowledged writes before the cut, %d blocks while degraded; "
          "refused alone, started with degraded, then without; B alone refused, resynced "
          "from A, lost 0 (pair, B, A)" % (r["nacked"], NEW_BLOCKS))


def test_degraded_start_without_m1_is_caught(vm, tmp_path):
    """The mutant: a degraded start that skips M1 (no mark_alone store).
    Nothing then tells the old half B from a partner in sync: the pair
    starts "both", the compare copies B (first in the table) over A and
    the writes of the degraded run are lost (or A, not marked, is refused
    without `degraded`)."""
    ko = build_mutant(tmp_path, "\t\tif (pc->mirror.plan.mark_alone)\n",
                      "\t\tif (0 && pc->mirror.plan.mark_alone)\n", "mirror.c")
    use_module(vm, ko)
    r = degraded_scenario(vm, 33)
    assert r["deg"].values("REFUSED") == ["alone"]      # as the real module
    caught = []
    if r["deg"].value("KNOWN") == "0":
        caught.append("A refused without degraded after running alone")
    if r["new_lost"]:
        caught.append("the degraded run's writes lost on %s" % r["new_lost"])
    if r["back"].values("COPIED") != ["A_TO_B"]:
        caught.append("copied %s" % r["back"].values("COPIED"))
    assert r["new_lost"], "mutant not caught (M1 skipped): every write read back"
    print("mutant caught (M1 skipped): %s" % "; ".join(caught))
