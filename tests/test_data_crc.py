"""data_crc: a copy whose data no longer matches its record's crc is never
read; a mirror heals it from the other half, and `scrub` finds the bad
copies no read met (issue 31, item 3).

64 dirty blocks (writeback held off), each beginning with a tag, are
written through a cache made with `data_crc`; the guest finds each block's
data on /dev/pmem0 (half A) and rewrites one byte of its tag there, behind
the cache's back (what a stray write or silent media corruption does).
Asserted first: 64 tags found and flipped, the table shows data_crc, the
cache dirty.

- Mirrored: every block reads back right; the reads of blocks read from A
  (reads spread over the halves) count crc_errors and are healed; then
  `dmsetup message pc 0 scrub` finds the bad copies no read met (those
  of blocks read from B) and heals them too; every bad copy is retired
  (`bad_slots` 64). Half B unbound: half A alone reads every block right,
  and a flush puts them all on the array.
- One device: the reads fail with -EIO instead of returning the flipped
  bytes, `scrub` reports 64 blocks lost (-EIO), and a flush refuses to
  write the bad data back (-EIO, the blocks stay dirty): the array never
  holds a flipped byte.

Mutant: the crc check gone (pmc_data_ok() true): half A's flipped bytes
are read (and, on one device, written back). Caught; the real module is
the control.
"""
import pytest

from test_mirror import LONG, MIRROR_PRELUDE, PMEM2_MB, PMEM_MB, build_mutant, use_module
from test_target import STATUS_FIELDS, parse_status, pmemcache_module  # noqa: F401

NB = 64
MIRRORED = "7 high_watermark 100 low_watermark 100 mirror /dev/pmem1 data_crc"
SINGLE = "5 high_watermark 100 low_watermark 100 data_crc"
BAD_FIELD = 3 + STATUS_FIELDS.index("bad_slots") + 1

SCRIPT = r"""
pmc_init2
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
echo "TABLE=$(dmsetup table pc)"
tagged_blocks PMCDCRC_ %(nb)d /tmp/a
dd if=/tmp/a of=/dev/mapper/pc bs=4096 oflag=direct conv=fsync 2>/dev/null || die write
status 1
tag_offsets PMCDCRC_ /dev/pmem0 > /tmp/offs
echo "TAGS=$(wc -l < /tmp/offs)"
# flip: the tag's "_" becomes "!" on half A, written past the cache
n=0
while read off; do
	[ $((off %% 4096)) = 0 ] || die "tag at $off"
	dd if=/dev/pmem0 of=/tmp/b bs=4096 skip=$((off / 4096)) count=1 iflag=direct 2>/dev/null
	{ head -c 7 /tmp/b; printf '!'; tail -c +9 /tmp/b; } > /tmp/f
	dd if=/tmp/f of=/dev/pmem0 bs=4096 seek=$((off / 4096)) count=1 oflag=direct \
		conv=notrunc 2>/dev/null || die flip
	n=$((n + 1))
done < /tmp/offs
echo "FLIPPED=$(strings -n 12 /dev/pmem0 | grep -c 'PMCDCRC!')"
readall() {
	read_back "$1" %(nb)d
	grep -c 'PMCDCRC!' /tmp/r | sed "s/^/READ_FLIPPED_$1=/"
}
scrub() {
	rc=0
	out=$(timeout 300 dmsetup message pc 0 scrub) || rc=$?
	echo "SCRUB_RC=$rc"
	echo "SCRUB=$out"
}
%(body)s
status 9
dmsetup remove pc || die remove
dd if=/dev/md0 of=/tmp/m bs=4096 count=%(nb)d iflag=direct 2>/dev/null || die "read md"
cmp -s /tmp/a /tmp/m && echo MD_OK=1
grep -c 'PMCDCRC!' /tmp/m | sed 's/^/MD_FLIPPED=/'
dmesg | grep -c "data does not match its crc" | sed 's/^/CRC_LINES=/'
"""

MIRROR_BODY = r"""
readall first
status 2
scrub
status 3
# the heal work queued by the reads, and scrub's: every bad copy retired
n=0
while [ "$(dmsetup status pc | awk '{ print $%(bad_field)d }')" != %(nb)d ] && [ $n -lt 60 ]; do
	sleep 1
	n=$((n + 1))
done
status 4
unbind_pmem pmem1
readall a_alone
status 5
flush_pc
"""

SINGLE_BODY = r"""
readall first
status 2
scrub
flush_pc
status 3
"""


def run(vm, args, body):
    res = vm.run(MIRROR_PRELUDE + SCRIPT % dict(args=args, nb=NB, body=body % dict(
        nb=NB, bad_field=BAD_FIELD)), pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=900)
    # preconditions: a data_crc cache, every block dirty in it, every
    # block's copy on half A flipped
    assert " data_crc" in res.value("TABLE"), res.value("TABLE")
    s1 = parse_status(res.value("STATUS1"))
    assert s1["dirty"] == NB and s1["crc_errors"] == 0, s1
    assert res.value("TAGS") == str(NB) and res.value("FLIPPED") == str(NB), \
        (res.value("TAGS"), res.value("FLIPPED"))
    return res


def status(res, i):
    return parse_status(res.value("STATUS%d" % i))


def mirror_verdict(res):
    """None if every block read back right, before and after half B went,
    else what failed."""
    for tag in ("first", "a_alone"):
        if res.value("READ_RC_" + tag) != "0" or res.values("READ_OK_" + tag) != ["1"]:
            return "BAD DATA READ (%s): rc %s, %s flipped blocks read" % (
                tag, res.value("READ_RC_" + tag), res.value("READ_FLIPPED_" + tag))
    return None


def test_a_flipped_copy_is_read_from_the_other_half_and_healed_by_reads_and_scrub(vm):
    res = run(vm, MIRRORED, MIRROR_BODY)
    s2, s3, s4, s5 = (status(res, i) for i in (2, 3, 4, 5))
    assert mirror_verdict(res) is None, mirror_verdict(res)
    # reads spread: only the blocks read from A met a bad copy
    assert 0 < s2["crc_errors"] < NB and s2["media_errors"] == 0, s2
    scrub = dict(zip(*[iter(res.value("SCRUB").split())] * 2))
    assert res.value("SCRUB_RC") == "0", res.value("SCRUB_RC")
    # scrub found the rest (a read's heal may still have been queued)
    assert int(scrub["lost"]) == 0 and int(scrub["checked"]) >= NB, scrub
    assert int(scrub["healed"]) >= NB - s2["crc_errors"], scrub
    assert s4["bad_slots"] == NB and s4["dirty"] == NB, s4
    assert s5["health"] == "mirror_degraded", s5
    assert res.value("FLUSH_RC") == "0" and res.values("MD_OK") == ["1"]
    assert res.value("MD_FLIPPED") == "0" and int(res.value("CRC_LINES")) >= 1
    print("data_crc, one byte flipped in each of %d blocks on half A: read back right "
          "(%d met the bad copy and were read from B), scrub: %s; every bad copy "
          "retired (bad_slots %d); half B unbound: half A alone read them all, the array "
          "holds them all" % (NB, s2["crc_errors"], res.value("SCRUB"), s4["bad_slots"]))


def single_verdict(res):
    """None if no flipped byte was read or written back, else what leaked."""
    if res.value("READ_FLIPPED_first") != "0":
        return "FLIPPED DATA READ: %s blocks" % res.value("READ_FLIPPED_first")
    if res.value("MD_FLIPPED") != "0":
        return "FLIPPED DATA WRITTEN BACK: %s blocks" % res.value("MD_FLIPPED")
    return None


def test_one_device_never_reads_or_writes_back_a_flipped_copy(vm):
    res = run(vm, SINGLE, SINGLE_BODY)
    s2, s3 = status(res, 2), status(res, 3)
    assert single_verdict(res) is None, single_verdict(res)
    assert res.value("READ_RC_first") != "0" and s2["crc_errors"] > 0, s2
    # scrub: every dirty block without a good copy, reported
    assert res.value("SCRUB_RC") != "0"
    assert res.value("FLUSH_RC") != "0" and s3["dirty"] == NB, s3
    print("data_crc on one device, %d blocks flipped: reads fail (-EIO, crc_errors %d), "
          "scrub fails, flush fails with every block still dirty, the array holds no "
          "flipped byte" % (NB, s2["crc_errors"]))


NO_CHECK = ("\treturn !pc->meta.data_crc || pmc_data_crc_good(pc, base, slot, count);\n",
            "\treturn true;\n")


def test_no_crc_check_is_caught(vm, tmp_path):
    """The mutant: the crc never checked (as without data_crc)."""
    use_module(vm, build_mutant(tmp_path, *NO_CHECK, "pmemcache.h"))
    res = run(vm, MIRRORED, MIRROR_BODY)
    verdict = mirror_verdict(res)
    assert verdict, "mutant not caught (no crc check): every block read back right"
    print("mutant caught (no crc check): " + verdict)


# With PMC_LONG=1: (what, the edit, its file, table, body, verdict).
LONG_MUTANTS = [
    ("no crc check, one device", NO_CHECK, "pmemcache.h", SINGLE, SINGLE_BODY,
     single_verdict),
    # the blocks read from B keep their bad copy on A, which alone fails them
    ("scrub heals nothing", ("\t\t\tr = pmc_mirror_heal(pc, slot, v, buf);\n", "\t\t\tr = 0;\n"),
     "scrub.c", MIRRORED, MIRROR_BODY, mirror_verdict),
]


@pytest.mark.skipif(not LONG, reason="mutation testing: set PMC_LONG=1")
@pytest.mark.parametrize("what,edit,name,args,body,verdict", LONG_MUTANTS,
                         ids=[m[0].replace(" ", "-") for m in LONG_MUTANTS])
def test_long_mutant_is_caught(vm, tmp_path, what, edit, name, args, body, verdict):
    use_module(vm, build_mutant(tmp_path, *edit, name))
    found = verdict(run(vm, args, body))
    assert found, "mutant not caught (%s)" % what
    print("mutant caught (%s): %s" % (what, found))
