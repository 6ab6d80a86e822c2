"""A mirrored cache reads a block that met a media error on one half from
the other, and heals it (issue 31, step 5).

64 dirty blocks (writeback held off) are written through a mirrored
cache; each begins with a tag, so the guest finds where each block's data
lies on half A (grep over /dev/pmem0) and puts those 8 sectors on pmem0's
badblocks list (what the platform does for poison). Asserted first: 64
tags found, 512 sectors listed, the cache dirty. Then:

- flush first: writeback copies every block by bounce (a page-less bio
  would point at the poisoned half: wb_pfn_blocks stays 0), from half B
  (`mirror_reads` counts those that half A would have served),
  `media_errors` stays 0, the array holds every block;
- read first: every block reads back right. Reads are spread over the
  halves (odd slots from B), so only part of them meet the poison on A
  and are counted (0 < `mirror_reads` < 64: all 64 with reads from A
  alone); every block is healed, those read well from B too (their copy
  on A is on the badblocks list): committed anew into fresh slots on
  both halves, the bad slots retired (`bad_slots` reaches 64, the
  kernel line "healed"); a second read takes no block from B's spare
  copy; then half B's namespace is unbound and half A alone reads every
  block right, and a flush puts them all on the array.

Mutants: pmc_mirror_other_copy() never offering the other half (the
single-device behaviour) fails the reads with -EIO; without the heal
(nothing queued), half A alone fails the reads once B is gone. Each is
caught; the real module is the control.
"""
import pytest

from test_mirror import (ARGS, LONG, MIRROR_PRELUDE, PMEM2_MB, PMEM_MB, build_mutant,
                         use_module)
from test_target import STATUS_FIELDS, parse_status, pmemcache_module  # noqa: F401

NB = 64
# bad_slots in `dmsetup status` (awk's field: start, length, "pmemcache" first)
BAD_FIELD = 3 + STATUS_FIELDS.index("bad_slots") + 1

SCRIPT = r"""
pmc_init2
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
tagged_blocks PMCMEDIA %(nb)d /tmp/a
dd if=/tmp/a of=/dev/mapper/pc bs=4096 oflag=direct conv=fsync 2>/dev/null || die write
status 1
tag_offsets PMCMEDIA /dev/pmem0 > /tmp/offs
echo "TAGS=$(wc -l < /tmp/offs)"
while read off; do
	[ $((off %% 4096)) = 0 ] || die "tag at $off"
	echo "$((off / 512)) 8" > /sys/block/pmem0/badblocks || die badblocks
done < /tmp/offs
# adjacent ranges merge: count the sectors listed
echo "LISTED=$(awk '{ n += $2 } END { print n }' /sys/block/pmem0/badblocks)"
# readall TAG: every block through the cache, compared
readall() { read_back "$1" %(nb)d; }
%(body)s
status 9
dmsetup remove pc || die remove
dd if=/dev/md0 of=/tmp/m bs=4096 count=%(nb)d iflag=direct 2>/dev/null || die "read md"
cmp -s /tmp/a /tmp/m && echo MD_OK=1
dmesg | grep -c "read from the mirror's other half" | sed 's/^/LINES=/'
"""

FLUSH_FIRST = r"""
flush_pc
status 2
readall after_flush
"""

READ_FIRST = r"""
readall first
status 2
# the heal work: every bad slot retired (at most 60 s, if the reads went)
n=0
[ $rc = 0 ] || n=60
while [ "$(dmsetup status pc | awk '{ print $%(bad_field)d }')" != %(nb)d ] && [ $n -lt 60 ]; do
	sleep 1
	n=$((n + 1))
done
dmesg | grep -q "mirror: healed" && echo HEALED_LINE=1
status 3
readall again
status 4
unbind_pmem pmem1
readall a_alone
status 5
flush_pc
"""


def run(vm, body):
    res = vm.run(MIRROR_PRELUDE + SCRIPT % dict(args=ARGS, nb=NB, body=body % dict(
        nb=NB, bad_field=BAD_FIELD)), pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=900)
    # preconditions: every block dirty in the cache, and poisoned on half A
    s1 = parse_status(res.value("STATUS1"))
    assert s1["dirty"] == NB, s1
    assert res.value("TAGS") == str(NB), res.value("TAGS")
    assert res.value("LISTED") == str(NB * 8), res.value("LISTED")
    return res


def status(res, i):
    return parse_status(res.value("STATUS%d" % i))


def test_a_media_error_on_one_half_is_written_back_from_the_other(vm):
    res = run(vm, FLUSH_FIRST)
    s2 = status(res, 2)
    assert res.value("FLUSH_RC") == "0"
    assert s2["dirty"] == 0 and s2["media_errors"] == 0, s2
    assert s2["wb_bounce_blocks"] == NB and s2["wb_pfn_blocks"] == 0, s2
    assert 0 < s2["mirror_reads"] <= NB, s2
    assert res.value("READ_OK_after_flush") == "1"
    assert res.value("MD_OK") == "1"
    assert int(res.value("LINES")) >= 1
    print("media errors on half A: %d blocks written back by bounce from half B "
          "(mirror_reads %d), the array holds them all" % (NB, s2["mirror_reads"]))


def heal_verdict(res):
    """None if half A alone read every block after the heal, else what failed."""
    if res.value("READ_RC_a_alone") == "0" and res.value("READ_OK_a_alone") == "1":
        return None
    return "HALF A ALONE LOST BLOCKS: read rc %s after half B went" % res.value("READ_RC_a_alone")


def test_a_media_error_on_one_half_is_read_from_the_other_and_healed(vm):
    res = run(vm, READ_FIRST)
    s2, s3, s4, s5 = (status(res, i) for i in (2, 3, 4, 5))
    assert res.value("READ_RC_first") == "0" and res.value("READ_OK_first") == "1"
    # spread: the odd slots are read from B, never meeting the poison on A
    assert 0 < s2["mirror_reads"] < NB and s2["media_errors"] == 0, s2
    # healed: every bad slot retired, the blocks still dirty, on both halves
    assert s3["bad_slots"] == NB and s3["dirty"] == NB, s3
    assert res.value("HEALED_LINE") == "1"
    assert res.value("READ_OK_again") == "1" and s4["mirror_reads"] == s3["mirror_reads"], s4
    assert heal_verdict(res) is None, heal_verdict(res)
    assert s5["health"] == "mirror_degraded", s5
    assert res.value("FLUSH_RC") == "0" and res.value("MD_OK") == "1"
    print("media errors on half A: %d blocks read back, %d of them met the poison on A "
          "(the others were read from B: reads spread), all healed into fresh slots "
          "(bad_slots %d); read again with no media error; half B unbound: half A alone "
          "read them all, the array holds them all" % (NB, s2["mirror_reads"], s3["bad_slots"]))


def test_reading_the_poisoned_half_alone_is_caught(vm, tmp_path):
    """The mutant: no second copy offered (as with one device)."""
    ko = build_mutant(tmp_path, "\tif (READ_ONCE(pc->mirror.reads) != 3 ||\n",
                      "\tif (1 || READ_ONCE(pc->mirror.reads) != 3 ||\n", "pmem.c")
    use_module(vm, ko)
    res = run(vm, READ_FIRST)
    s2 = status(res, 2)
    assert res.value("READ_RC_first") != "0" and s2["media_errors"] > 0, \
        "mutant not caught (no read from the other half): the reads succeeded"
    print("mutant caught (no other half): read rc %s, media_errors %d"
          % (res.value("READ_RC_first"), s2["media_errors"]))


@pytest.mark.skipif(not LONG, reason="mutation testing: set PMC_LONG=1")
def test_no_heal_is_caught(vm, tmp_path):
    """The mutant: nothing queued to heal (reads from half B go on)."""
    ko = build_mutant(tmp_path, "\tpmc_mirror_heal_later(pc, slot);\n", "", "pmem.c")
    use_module(vm, ko)
    res = run(vm, READ_FIRST)
    assert res.value("READ_OK_first") == "1"        # as the real module
    verdict = heal_verdict(res)
    assert verdict, "mutant not caught (no heal): half A alone read every block"
    print("mutant caught (no heal): " + verdict)
