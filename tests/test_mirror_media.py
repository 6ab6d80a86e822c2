"""A mirrored cache reads a block that met a media error on one half from
the other (issue 31, step 5, first part).

64 dirty blocks (writeback held off) are written through a mirrored
cache; each begins with a tag, so the guest finds where each block's data
lies on half A (grep over /dev/pmem0) and puts those 8 sectors on pmem0's
badblocks list (what the platform does for poison). Asserted first: 64
tags found, 512 sectors listed, the cache dirty. Then:

- every block reads back right through the cache (from half B), and
  `mirror_reads` counts them, `media_errors` stays 0;
- `flush` writes them back by bounce copies from half B (a page-less bio
  would point at the poisoned half: wb_pfn_blocks stays 0) and the array
  holds every block.

The mutant whose pmc_mirror_other_copy() never offers the other half (the
single-device behaviour) fails the reads with -EIO and is caught; the
real module is the control.
"""
from test_mirror import ARGS, MIRROR_PRELUDE, PMEM2_MB, PMEM_MB, build_mutant, use_module
from test_target import parse_status, pmemcache_module  # noqa: F401

NB = 64

SCRIPT = r"""
pmc_init2
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
i=0
: > /tmp/a
while [ $i -lt %(nb)d ]; do
	printf "PMCMEDIA%%04d" $i > /tmp/blk
	head -c 4083 /dev/urandom >> /tmp/blk
	printf '\000' >> /tmp/blk
	cat /tmp/blk >> /tmp/a
	i=$((i + 1))
done
dd if=/tmp/a of=/dev/mapper/pc bs=4096 oflag=direct conv=fsync 2>/dev/null || die write
status 1
# busybox grep has no -b: the tag's offset is that of its printable run
strings -t d -n 12 /dev/pmem0 | awk '{ s = $0; sub(/^ *[0-9]+ /, "", s);
	i = index(s, "PMCMEDIA"); if (i) print $1 + i - 1 }' > /tmp/offs
echo "TAGS=$(wc -l < /tmp/offs)"
while read off; do
	[ $((off %% 4096)) = 0 ] || die "tag at $off"
	echo "$((off / 512)) 8" > /sys/block/pmem0/badblocks || die badblocks
done < /tmp/offs
# adjacent ranges merge: count the sectors listed
echo "LISTED=$(awk '{ n += $2 } END { print n }' /sys/block/pmem0/badblocks)"
rc=0
dd if=/dev/mapper/pc of=/tmp/r bs=4096 count=%(nb)d iflag=direct 2>/dev/null || rc=$?
echo "READ_RC=$rc"
cmp -s /tmp/a /tmp/r && echo READ_OK=1
status 2
rc=0
timeout 120 dmsetup message pc 0 flush || rc=$?
echo "FLUSH_RC=$rc"
status 3
dmsetup remove pc || die remove
dd if=/dev/md0 of=/tmp/m bs=4096 count=%(nb)d iflag=direct 2>/dev/null || die "read md"
cmp -s /tmp/a /tmp/m && echo MD_OK=1
dmesg | grep -c "read from the mirror's other half" | sed 's/^/LINES=/'
"""


def run(vm):
    res = vm.run(MIRROR_PRELUDE + SCRIPT % dict(args=ARGS, nb=NB), pmem_size=PMEM_MB,
                 pmem2_size=PMEM2_MB, timeout=900)
    # preconditions: every block dirty in the cache, and poisoned on half A
    s1 = parse_status(res.value("STATUS1"))
    assert s1["dirty"] == NB, s1
    assert res.value("TAGS") == str(NB), res.value("TAGS")
    assert res.value("LISTED") == str(NB * 8), res.value("LISTED")
    return res


def test_a_media_error_on_one_half_is_read_from_the_other(vm):
    res = run(vm)
    assert res.value("READ_RC") == "0" and res.value("READ_OK") == "1"
    s2, s3 = (parse_status(res.value("STATUS%d" % i)) for i in (2, 3))
    assert s2["mirror_reads"] >= NB and s2["media_errors"] == 0, s2
    assert res.value("FLUSH_RC") == "0"
    assert s3["dirty"] == 0 and s3["media_errors"] == 0, s3
    assert s3["wb_bounce_blocks"] == NB and s3["wb_pfn_blocks"] == 0, s3
    assert s3["mirror_reads"] >= 2 * NB, s3
    assert res.value("MD_OK") == "1"
    assert int(res.value("LINES")) >= 1
    print("media errors on half A: %d blocks read from half B (mirror_reads %d), written "
          "back by bounce from B, the array holds them all" % (NB, s3["mirror_reads"]))


def test_reading_the_poisoned_half_alone_is_caught(vm, tmp_path):
    """The mutant: no second copy offered (as with one device)."""
    ko = build_mutant(tmp_path, "\tif (READ_ONCE(pc->meta.live) != 3 ||\n",
                      "\tif (1 || READ_ONCE(pc->meta.live) != 3 ||\n", "pmem.c")
    use_module(vm, ko)
    res = run(vm)
    s2 = parse_status(res.value("STATUS2"))
    assert res.value("READ_RC") != "0" and s2["media_errors"] > 0, \
        "mutant not caught (no read from the other half): the reads succeeded"
    print("mutant caught (no other half): read rc %s, media_errors %d"
          % (res.value("READ_RC"), s2["media_errors"]))
