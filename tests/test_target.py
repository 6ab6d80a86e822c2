"""dm-pmemcache in the guest: data, routes, reload, refusal of bad metadata.

Each test boots the guest once (or twice for reloads), builds md RAID on
the virtio disks and puts the cache in front of it.

pmem: with the core patches in the kernel (dax_get_by_bdev_nopage) the
cache runs on the raw, page-less NFIT namespace as designed.  On a kernel
without them the module can only reach struct-page pmem, so the tests turn
the namespace into fsdax first (ndctl create-namespace -m fsdax -M mem)
and expect bounce writeback everywhere.
"""
import os
import re
from pathlib import Path

import pytest

from vm import KBUILD, KCACHE, REPO, build

KSRC = Path(os.environ.get("KSRC", KCACHE / "linux"))
MOD = REPO / "dm-pmemcache"


def _tree_has(symbol, header):
    try:
        return symbol in (KSRC / header).read_text(errors="replace")
    except OSError:
        return False


RAW_PMEM = _tree_has("dax_get_by_bdev_nopage", "include/linux/dax.h")
PFN_IO = _tree_has("bio_add_pfn", "include/linux/bio.h")
# raid4/5/6 copy page-less bios through pfn_kmap (core-patches 0017)
RAID456_PFN = _tree_has("pfn_copies", "drivers/md/md.h")
PFN_LEVELS = ("raid1", "raid10") + (("raid5", "raid6") if RAID456_PFN else ())

# Fields of `dmsetup status` after "<start> <len> pmemcache".
STATUS_FIELDS = [
    "blocks", "dirty", "free", "clean", "read_hits", "read_partial",
    "read_misses", "write_hits", "write_new", "write_around", "discards",
    "flushes", "wb_pfn_blocks", "wb_pfn_bytes", "wb_bounce_blocks",
    "wb_bounce_bytes", "wb_errors", "wb_notsupp", "media_errors",
    "ram_bytes_per_block", "route", "mode", "wb_rate", "wb_target",
    "stripe_blocks", "wb_full_stripes", "wb_flushes", "full_waits",
    "full_around", "full_through", "full_timeouts", "bad_slots", "mirror_reads",
    "resync_left", "crc_errors", "health",
]


def parse_status(line):
    words = line.split()
    assert words[2] == "pmemcache", line
    assert len(words) == 3 + len(STATUS_FIELDS), line
    vals = dict(zip(STATUS_FIELDS, words[3:]))
    for k, v in vals.items():
        if k not in ("route", "mode", "ram_bytes_per_block", "health"):
            vals[k] = int(v)
    vals["ram_bytes_per_block"] = float(vals["ram_bytes_per_block"])
    return vals


def build_module():
    return build(["make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
                  "M=%s" % MOD, "W=1", "modules"])


@pytest.fixture(scope="module", autouse=True)
def pmemcache_module():
    """Build dm-pmemcache.ko against the product kernel (W=1)."""
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)
    proc = build_module()
    assert proc.returncode == 0, proc.stderr
    assert "warning:" not in proc.stderr, proc.stderr
    assert (MOD / "dm-pmemcache.ko").exists()


PRELUDE = r"""
PMC_RAW=%(raw)d
pmc_init() {
	if [ $PMC_RAW = 0 ]; then
		ndctl create-namespace -f -e namespace0.0 -m fsdax -M mem \
			> /dev/null 2>&1 || die "ndctl fsdax"
	fi
	[ -b /dev/pmem0 ] || die "no /dev/pmem0"
	insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
}

# md_make MD LEVEL N FIRST: /dev/MD over N disks starting at vd<FIRST>
md_make() {
	md=$1 level=$2 n=$3 first=$4 devs= i=0 take=0
	for l in a b c d e f; do
		[ $l = $first ] && take=1
		if [ $take = 1 ] && [ $i -lt $n ]; then
			devs="$devs /dev/vd$l"
			i=$((i + 1))
		fi
	done
	chunk=
	[ $level = raid1 ] || chunk=--chunk=64
	# shellcheck disable=SC2086
	mdadm --create /dev/$md --run --quiet --metadata=1.2 --assume-clean \
		--level=$level --raid-devices=$n $chunk $devs 2>&1 ||
		die "mdadm --create $md $level"
	[ -b /dev/$md ] || die "no /dev/$md"
}

pmc_table() {
	echo "0 $(blockdev --getsz /dev/$1) pmemcache /dev/$1 /dev/pmem0 4096 $2"
}

status() { echo "STATUS$1=$(dmsetup status pc)"; }

# fio_job NAME DEV ARGS...: verified write job (same args later verify)
fio_job() {
	name=$1 dev=$2
	shift 2
	[ -b "$dev" ] || die "$dev is not a block device"
	fio --name=$name --filename="$dev" --direct=1 --ioengine=psync \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "$@" \
		--output-format=terse > /tmp/fio.$name 2>&1 ||
		{ cat /tmp/fio.$name; die "fio $name on $dev"; }
	echo "FIO_OK=$name"
}

fio_check() {
	name=$1 dev=$2
	shift 2
	fio --name=$name --filename="$dev" --direct=1 --ioengine=psync \
		--verify=crc32c --verify_fatal=1 --verify_only=1 "$@" \
		--output-format=terse > /tmp/fiov.$name 2>&1 ||
		{ cat /tmp/fiov.$name; die "fio verify-only $name on $dev"; }
	echo "VERIFY_OK=$name"
}
""" % {"raw": 1 if RAW_PMEM else 0}

# Job parameters, reused for the verify-only pass on the bare md device.
JOB_RAND = "--rw=randwrite --bsrange=512-64k --size=40m --offset=0"
JOB_SEQ = "--rw=write --bsrange=512-1m --size=40m --offset=0"
JOB_SMALL = "--rw=randwrite --bs=4k --size=16m --offset=64m"
JOB_RW = "--rw=randrw --bs=512 --size=4m --offset=96m"


def run(vm, body, **kw):
    kw.setdefault("timeout", 900)
    return vm.run(PRELUDE + body, **kw)


@pytest.mark.parametrize("level,disks", [("raid1", 2), ("raid10", 4), ("raid5", 4), ("raid6", 5)])
def test_fio_verify_through_cache_then_on_origin(vm, level, disks):
    res = run(vm, """
pmc_init
md_make md0 %(level)s %(disks)d a
# Low watermarks: writeback runs during the whole test, so writes,
# overwrites and partial blocks race with it.
dm_create pc "$(pmc_table md0 '4 high_watermark 1 low_watermark 0')" || die create
echo "LEVEL=$(cat /sys/block/md0/md/level)"
fio_job rand /dev/mapper/pc %(rand)s
fio_job seq /dev/mapper/pc %(seq)s
fio_job small /dev/mapper/pc %(small)s
fio_job rw /dev/mapper/pc %(rw)s
status 1
dmsetup message pc 0 flush || die "flush message"
status 2
dmsetup remove pc || die remove
fio_check seq /dev/md0 %(seq)s
fio_check small /dev/md0 %(small)s
echo DONE=1
""" % dict(level=level, disks=disks, rand=JOB_RAND, seq=JOB_SEQ,
           small=JOB_SMALL, rw=JOB_RW))
    assert res.value("LEVEL") == level
    assert res.values("VERIFY_OK") == ["seq", "small"]
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    assert s1["write_new"] > 0 and s1["write_hits"] > 0
    assert s1["read_hits"] > 0
    assert s2["dirty"] == 0
    assert s2["wb_errors"] == 0 and s2["media_errors"] == 0
    assert s2["ram_bytes_per_block"] <= 16.0
    if PFN_IO and RAW_PMEM and level in PFN_LEVELS:
        assert s2["route"] == "pfn"
        assert s2["wb_pfn_bytes"] > 0
    else:
        assert s2["route"] == "bounce"
        assert s2["wb_bounce_bytes"] > 0
        assert s2["wb_pfn_bytes"] == 0


# block (of 100..105) -> its sectors written through the cache: runs of
# cached and uncached sectors in every shape pmc_copy_to_bio() meets
PARTIAL_BLOCKS = {100: (1, 2, 5), 101: (0,), 102: (7,), 103: (0, 1, 2, 3),
                  104: (3, 4), 105: (0, 7)}


def test_partial_reads_take_each_sector_from_where_it_is(vm):
    """Blocks 100..105 on md0 hold random data O; some of their sectors
    are then written through the cache with a pattern (fio, O_DIRECT, one
    512 B write each: busybox dd's oflag=direct writes of 512 B reach the
    target as 4 KiB read-modify-writes here). A read of each block must
    return the pattern for the cached sectors and O for the others."""
    writes = " ".join("%d:%d" % (b, sec) for b, secs in sorted(PARTIAL_BLOCKS.items())
                      for sec in secs)
    res = run(vm, r"""
pmc_init
md_make md0 raid1 2 a
dd if=/dev/urandom of=/tmp/o bs=4k count=6 2>/dev/null
dd if=/tmp/o of=/dev/md0 bs=4k seek=100 oflag=direct conv=fsync 2>/dev/null || die origin
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
cp /tmp/o /tmp/e
for w in %(writes)s; do
	b=${w%%:*} s=${w#*:}
	byte=$(printf '%%02x' $((0xa0 + s)))
	fio --name=w --filename=/dev/mapper/pc --direct=1 --ioengine=psync --rw=write \
		--bs=512 --size=512 --offset=$(((b * 8 + s) * 512)) --buffer_pattern=0x$byte \
		> /dev/null 2>&1 || die "fio $w"
	head -c 512 /dev/zero | tr '\0' "\\$(printf '%%03o' $((0xa0 + s)))" |
		dd of=/tmp/e bs=512 seek=$(((b - 100) * 8 + s)) conv=notrunc 2>/dev/null
done
status 1
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/mapper/pc of=/tmp/r bs=4k skip=100 count=6 iflag=direct 2>/dev/null || die read
cmp /tmp/r /tmp/e && echo READ_OK=1
status 2
""" % dict(writes=writes))
    s1, s2 = parse_status(res.value("STATUS1")), parse_status(res.value("STATUS2"))
    assert s1["dirty"] == len(PARTIAL_BLOCKS) and s1["read_misses"] + s1["read_hits"] == 0, s1
    assert res.value("READ_OK") == "1", res.output[-2000:]
    # every block was read partly from the cache, partly from md
    assert s2["read_partial"] == len(PARTIAL_BLOCKS), s2


def test_reload_after_remove_keeps_dirty_blocks(vm):
    body = """
pmc_init
md_make md0 raid5 4 a
# high_watermark 100: nothing is written back on its own.
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
fio_job seq /dev/mapper/pc %(seq)s
status 1
dmsetup remove pc || die remove
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die reload
status 2
fio_check seq /dev/mapper/pc %(seq)s
dmsetup message pc 0 flush || die flush
dmsetup remove pc
fio_check seq /dev/md0 %(seq)s
""" % dict(seq=JOB_SEQ)
    res = run(vm, body)
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    assert s1["dirty"] > 0
    assert s2["dirty"] == s1["dirty"]
    assert res.values("VERIFY_OK") == ["seq", "seq"]
    assert re.search(r"pmemcache: .*loaded \d+ blocks: \d+ cached, %d dirty"
                     % s1["dirty"], res.dmesg)


def test_dirty_blocks_survive_a_reboot(vm):
    """Power off with dirty data (no flush, no remove); boot again."""
    make = """
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
fio_job small /dev/mapper/pc %(small)s
status 1
""" % dict(small=JOB_SMALL)
    res = run(vm, make)
    dirty = parse_status(res.value("STATUS1"))["dirty"]
    assert dirty > 0
    check = """
[ $PMC_RAW = 1 ] || ndctl list -N | grep -q fsdax || die "namespace lost its mode"
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb || die assemble
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die reload
status 2
fio_check small /dev/mapper/pc %(small)s
""" % dict(small=JOB_SMALL)
    res = run(vm, check)
    assert parse_status(res.value("STATUS2"))["dirty"] == dirty
    assert res.values("VERIFY_OK") == ["small"]


def test_corrupted_superblock_is_refused(vm):
    res = run(vm, """
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0)" || die create
fio_job small /dev/mapper/pc %(small)s
dmsetup remove pc
# flip one byte of the superblock body (block_size field at offset 16)
b=$(dd if=/dev/pmem0 bs=1 skip=17 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
printf "\\\\$(printf %%o $((b ^ 0x40)))" | dd of=/dev/pmem0 bs=1 seek=17 count=1 conv=notrunc 2>/dev/null
if dmsetup create --noudevsync pc --table "$(pmc_table md0)" 2>/tmp/err; then
	die "corrupt superblock accepted"
fi
echo REFUSED=1
# the documented way out: the format feature
dm_create pc "$(pmc_table md0 '1 format')" || die "format"
echo "TABLE=$(dmsetup table pc)"
dmsetup remove pc
""" % dict(small=JOB_SMALL))
    assert res.value("REFUSED") == "1"
    assert "superblock checksum mismatch" in res.dmesg
    lines = [l for l in res.dmesg.splitlines() if "checksum mismatch" in l]
    assert len(lines) == 1, lines
    assert "(-EINVAL)" in lines[0]
    # format is one-shot: never written back into the table
    assert "format" not in res.value("TABLE")


def test_table_naming_another_origin_is_refused(vm):
    res = run(vm, """
pmc_init
md_make md0 raid1 2 a
md_make md1 raid1 2 c
dm_create pc "$(pmc_table md0)" || die create
fio_job small /dev/mapper/pc %(small)s
dmsetup remove pc
if dmsetup create --noudevsync pc2 --table "$(pmc_table md1)" 2>/dev/null; then
	die "other origin accepted"
fi
echo REFUSED=1
dm_create pc "$(pmc_table md0)" || die "own origin refused"
fio_check small /dev/mapper/pc %(small)s
""" % dict(small=JOB_SMALL))
    assert res.value("REFUSED") == "1"
    assert "origin UUID differs" in res.dmesg
    assert res.values("VERIFY_OK") == ["small"]


BAD_TABLES = [
    ("pmemcache /dev/md0", "Not enough arguments"),
    ("pmemcache /dev/md0 /dev/pmem0 1000", "Invalid block size"),
    ("pmemcache /dev/md0 /dev/pmem0 8192", "Invalid block size"),
    ("pmemcache /dev/md0 /dev/pmem0 -4096", "Invalid block size"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 1 bogus", "Unrecognised feature"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 2 high_watermark 101", "Invalid high_watermark"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 4 high_watermark 10 low_watermark 20",
     "low_watermark is above"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 2 writeback sideways", "Invalid writeback mode"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 1 max_age", "missing its value"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 2 max_age 99999999999999999999",
     "Invalid max_age"),
    ("pmemcache /dev/md0 /dev/pmem0 4096 99", "Invalid number of feature"),
    ("pmemcache /dev/nonexistent /dev/pmem0 4096", "Origin device lookup failed"),
    ("pmemcache /dev/md0 /dev/vdf 4096", "not a DAX-capable"),
    ("pmemcache /dev/md0 /dev/md0 4096", "Origin and pmem device are the same"),
]


def test_bad_tables_and_messages_are_refused(vm):
    lines = []
    for i, (table, _) in enumerate(BAD_TABLES):
        lines.append('if dmsetup create --noudevsync bad%d --table "0 $sz %s" 2>/dev/null; '
                     'then die "accepted: %s"; fi' % (i, table, table))
    res = run(vm, """
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
%s
echo BAD_TABLES_REFUSED=1
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 5 max_age 5000 writeback bounce cleaner"
echo "TABLE=$(dmsetup table pc)"
if dmsetup create --noudevsync pc2 --table "0 $sz pmemcache /dev/md0 /dev/pmem0 4096" 2>/dev/null; then
	die "a second device on the same pmem was accepted"
fi
dmsetup message pc 0 nonsense && die "bad message accepted"
dmsetup message pc 0 flush now && die "bad message accepted"
dmsetup message pc 0 clear_stats || die clear_stats
dmsetup message pc 0 nocleaner || die nocleaner
dmsetup message pc 0 cleaner || die cleaner
dmsetup message pc 0 flush || die flush
# the table round-trips: reload exactly what dmsetup table printed
dmsetup reload pc --table "$(dmsetup table pc)" || die reload
dmsetup resume pc || die resume
echo "TABLE2=$(dmsetup table pc)"
dmsetup remove pc
""" % "\n".join(lines))
    assert res.value("BAD_TABLES_REFUSED") == "1"
    for _, msg in BAD_TABLES:
        assert msg in res.dmesg, msg
    t = res.value("TABLE").split()
    assert t[2:] == ["pmemcache", t[3], t[4], "4096", "5", "max_age", "5000",
                     "writeback", "bounce", "cleaner"]
    assert res.value("TABLE2") == res.value("TABLE")
    assert "unrecognised message 'nonsense'" in res.dmesg
    assert "pmem device overlaps the cache of another device" in res.dmesg


def test_small_cache_under_pressure(vm):
    """A 64 MiB cache in front of 3x more data: eviction, starved writers,
    writeback racing overwrites, four concurrent writers."""
    job = ("--rw=randwrite --bsrange=512-128k --size=48m --numjobs=4 "
           "--ioengine=libaio --iodepth=8 --offset_increment=48m")
    res = run(vm, """
pmc_init
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '4 high_watermark 20 low_watermark 10')" || die create
fio_job press /dev/mapper/pc %(job)s
status 1
dmsetup message pc 0 flush || die flush
status 2
dmsetup remove pc
fio_check press /dev/md0 %(job)s
""" % dict(job=job), pmem_size=64)
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    assert s1["blocks"] < 16384
    # more blocks were written back than the cache holds: it was recycled
    assert s2["wb_bounce_blocks"] + s2["wb_pfn_blocks"] > s1["blocks"]
    assert s2["dirty"] == 0 and s2["wb_errors"] == 0
    assert res.values("VERIFY_OK") == ["press"]


def test_max_age_and_cleaner_drain_without_flush(vm):
    res = run(vm, """
pmc_init
md_make md0 raid1 2 a
# no watermark writeback: only max_age (1 s) can clean these
dm_create pc "$(pmc_table md0 '6 high_watermark 100 low_watermark 100 max_age 1000')" || die create
fio_job small /dev/mapper/pc %(small)s
status 1
n=0
while [ $n -lt 60 ]; do
	d=$(dmsetup status pc | awk '{print $5}')
	[ "$d" = 0 ] && break
	sleep 1
	n=$((n + 1))
done
status 2
fio_check small /dev/md0 %(small)s
# cleaner: new writes go around the cache (FUA), cached blocks drain
dmsetup message pc 0 cleaner || die cleaner
fio_job around /dev/mapper/pc --rw=write --bs=64k --size=8m --offset=200m
status 3
# and writes to cached blocks go through to the origin: nothing dirty
fio_job again /dev/mapper/pc %(small)s --randseed=4711
status 4
dmsetup remove pc
fio_check around /dev/md0 --rw=write --bs=64k --size=8m --offset=200m
fio_check again /dev/md0 %(small)s --randseed=4711
""" % dict(small=JOB_SMALL))
    s1, s2, s3, s4 = (parse_status(res.value("STATUS%d" % i)) for i in (1, 2, 3, 4))
    # 16 MiB of 4 KiB blocks written; no watermark, no flush: only
    # max_age can have written them back (maybe already during fio).
    assert s1["write_new"] == 4096
    assert s2["dirty"] == 0, "max_age did not write back"
    assert s2["wb_pfn_blocks"] + s2["wb_bounce_blocks"] >= 4096
    assert s3["write_around"] > 0 and s3["mode"] == "cleaner"
    assert s3["write_new"] == s2["write_new"]
    # the 4096 cached (clean) blocks rewritten: each written through, its
    # cached copy dropped; none cached again, none dirty
    assert s4["write_around"] - s3["write_around"] == 4096, s4
    assert s4["write_hits"] == s3["write_hits"] and s4["write_new"] == s3["write_new"], s4
    assert s4["dirty"] == 0 and s4["clean"] == s3["clean"] - 4096, s4
    assert res.values("VERIFY_OK") == ["small", "around", "again"]


def test_origin_errors_keep_blocks_dirty_and_are_retried(vm):
    res = run(vm, """
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create org "0 $sz linear /dev/md0 0" || die org
dm_create pc "0 $sz pmemcache /dev/mapper/org /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
fio_job small /dev/mapper/pc %(small)s
status 1
# the origin fails every I/O for a while
dmsetup reload org --table "0 $sz error" || die "reload error"
dmsetup resume org || die "resume error"
dmsetup message pc 0 flush && die "flush succeeded on a failing origin"
sleep 3
status 2
fio_check small /dev/mapper/pc %(small)s
dmsetup reload org --table "0 $sz linear /dev/md0 0" || die "reload linear"
dmsetup resume org || die "resume linear"
dmsetup message pc 0 flush || die "flush after repair"
status 3
dmsetup remove pc
dmsetup remove org
fio_check small /dev/md0 %(small)s
""" % dict(small=JOB_SMALL))
    s1, s2, s3 = (parse_status(res.value("STATUS%d" % i)) for i in (1, 2, 3))
    assert s2["wb_errors"] > 0
    assert s2["dirty"] == s1["dirty"] > 0
    assert s3["dirty"] == 0
    assert res.values("VERIFY_OK") == ["small", "small"]


@pytest.mark.skipif(not (PFN_IO and RAW_PMEM), reason="needs the pfn I/O core patches")
def test_notsupp_from_origin_falls_back_to_bounce(vm):
    """The origin stops taking page-less bios after the target was resumed
    (its dm table now points at a loop device, which never opted in): the
    pfn writeback completes with BLK_STS_NOTSUPP, the target switches to
    bounce pages, nothing is lost and nothing is counted as an error."""
    res = run(vm, """
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create org "0 $sz linear /dev/md0 0" || die org
dm_create pc "0 $sz pmemcache /dev/mapper/org /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
fio_job small /dev/mapper/pc %(small)s
status 0
truncate -s $((sz * 512)) /tmp/loop.img
losetup /dev/loop0 /tmp/loop.img || die losetup
dmsetup reload org --table "0 $sz linear /dev/loop0 0" || die "reload org"
dmsetup resume org || die "resume org"
dmsetup message pc 0 flush || die flush
status 1
dmsetup remove pc
dmsetup remove org
fio_check small /dev/loop0 %(small)s
""" % dict(small=JOB_SMALL))
    assert parse_status(res.value("STATUS0"))["route"] == "pfn"
    s = parse_status(res.value("STATUS1"))
    assert s["wb_notsupp"] > 0
    assert s["wb_errors"] == 0
    assert s["wb_bounce_bytes"] > 0
    assert s["dirty"] == 0
    assert s["route"] == "bounce"
    assert "switching to bounce pages" in res.dmesg
    assert res.values("VERIFY_OK") == ["small"]


@pytest.mark.skipif(not (PFN_IO and RAW_PMEM), reason="needs the pfn I/O core patches")
@pytest.mark.parametrize("level,disks", [("raid1", 2), ("raid10", 4)])
def test_member_losing_pfn_is_not_a_device_error(vm, level, disks):
    """A member of the array stops taking page-less bios while the cache
    writes back through pfns (its dm table now goes through a loop device
    over the same disk, as a pvmove would put its own target there).  md
    must not take the refusal for a media error (core-patches 0013): no
    Faulty member, no bad blocks, no degraded array; the cache writes the
    blocks again through bounce pages, so every mirror holds them."""
    res = run(vm, """
pmc_init
echo 1000000 > /proc/sys/dev/raid/speed_limit_min
members=
for l in a b c d; do
	[ $l = a ] || [ $l = b ] || [ %(disks)d = 4 ] || continue
	dm_create m$l "0 $(blockdev --getsz /dev/vd$l) linear /dev/vd$l 0" || die m$l
	members="$members /dev/mapper/m$l"
done
chunk=
[ %(level)s = raid1 ] || chunk=--chunk=64
# shellcheck disable=SC2086
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean --size=256M \
	--level=%(level)s --raid-devices=%(disks)d $chunk $members 2>&1 || die mdadm
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
fio_job small /dev/mapper/pc %(small)s
status 0
losetup /dev/loop0 /dev/vdb || die losetup
dmsetup reload mb --table "0 $(blockdev --getsz /dev/vdb) linear /dev/loop0 0" || die "reload mb"
dmsetup resume mb || die "resume mb"
dmsetup message pc 0 flush || die flush
status 1
dmsetup remove pc || die remove
echo DEGRADED=$(cat /sys/block/md0/md/degraded)
for d in /sys/block/md0/md/dev-*; do
	echo "MEMBER=$(cat $d/state) $(wc -l < $d/bad_blocks)"
done
fio_check small /dev/md0 %(small)s
echo check > /sys/block/md0/md/sync_action
n=0
while [ "$(cat /sys/block/md0/md/sync_action)" != idle ]; do
	n=$((n + 1))
	[ $n -lt 600 ] || die "md check did not end"
	sleep 1
done
echo MISMATCH=$(cat /sys/block/md0/md/mismatch_cnt)
""" % dict(level=level, disks=disks, small=JOB_SMALL))
    assert parse_status(res.value("STATUS0"))["route"] == "pfn"
    s = parse_status(res.value("STATUS1"))
    assert s["dirty"] == 0
    assert s["wb_notsupp"] > 0 and s["wb_errors"] == 0
    assert s["route"] == "bounce"
    assert "no more page-less I/O because dm-" in res.dmesg
    assert res.value("DEGRADED") == "0"
    members = res.values("MEMBER")
    assert len(members) == disks
    for m in members:
        state, bad = m.split()
        assert state == "in_sync" and bad == "0", members
    assert res.values("VERIFY_OK") == ["small"]
    assert res.value("MISMATCH") == "0"


MD_PFN_AGAIN = "page-less I/O again: every member takes it"
JOB_AGAIN = JOB_SMALL.replace("--offset=64m", "--offset=128m")


@pytest.mark.skipif(not (PFN_IO and RAW_PMEM and _tree_has("md_recheck_pfn", "drivers/md/md.c")),
                    reason="needs core-patches 0018 (md takes page-less bios again)")
def test_md_takes_pfn_bios_again_once_the_member_does(vm):
    """The member that refused page-less bios is reloaded back to a
    table that passes them: md gives the array QUEUE_FLAG_PFN back
    (core-patches 0018, no sooner than 30 s after the refusal), so a new
    cache over it writes back through pfns again; md stays clean and every
    byte verifies on it."""
    res = run(vm, """
pmc_init
for l in a b; do
	dm_create m$l "0 $(blockdev --getsz /dev/vd$l) linear /dev/vd$l 0" || die m$l
done
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean --size=256M \\
	--level=raid1 --raid-devices=2 /dev/mapper/ma /dev/mapper/mb 2>&1 || die mdadm
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
fio_job small /dev/mapper/pc %(small)s
losetup /dev/loop0 /dev/vdb || die losetup
dmsetup reload mb --table "0 $(blockdev --getsz /dev/vdb) linear /dev/loop0 0" || die "reload mb"
dmsetup resume mb || die "resume mb"
dmsetup message pc 0 flush || die flush
status 0
dmsetup remove pc || die remove
dmsetup reload mb --table "0 $(blockdev --getsz /dev/vdb) linear /dev/vdb 0" || die "reload mb back"
dmsetup resume mb || die "resume mb back"
losetup -d /dev/loop0
# writes wake the md thread (safemode marks the array clean after them)
n=0
until dmesg | grep -q "md0: %(again)s"; do
	n=$((n + 1))
	[ $n -lt 120 ] || break
	dd if=/dev/zero of=/dev/md0 bs=4k count=1 seek=65000 oflag=direct 2>/dev/null
	sleep 1
done
echo AGAIN_AFTER=$n
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die "create again"
fio_job again /dev/mapper/pc %(again_job)s
dmsetup message pc 0 flush || die "flush again"
status 1
dmsetup remove pc || die "remove again"
echo DEGRADED=$(cat /sys/block/md0/md/degraded)
for d in /sys/block/md0/md/dev-*; do
	echo "MEMBER=$(cat $d/state) $(wc -l < $d/bad_blocks)"
done
fio_check small /dev/md0 %(small)s
fio_check again /dev/md0 %(again_job)s
""" % dict(small=JOB_SMALL, again_job=JOB_AGAIN, again=MD_PFN_AGAIN))
    s = parse_status(res.value("STATUS0"))
    assert s["route"] == "bounce" and s["wb_notsupp"] > 0, s
    assert MD_PFN_AGAIN in res.dmesg, "md never took page-less bios again"
    s = parse_status(res.value("STATUS1"))
    assert s["route"] == "pfn", s
    assert s["wb_pfn_blocks"] > 0 and s["wb_bounce_blocks"] == 0 and s["wb_notsupp"] == 0, s
    assert s["dirty"] == 0
    assert res.value("DEGRADED") == "0"
    for m in res.values("MEMBER"):
        assert m.split() == ["in_sync", "0"], m
    assert res.values("VERIFY_OK") == ["small", "again"]
