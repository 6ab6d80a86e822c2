"""Odd tables, a full cache and a failing origin (issue 15, and two
defects of issue 14 in the same paths).

- tables shorter than one block, not a multiple of a block, or shorter
  than an earlier table of the same cache are served: every writeback
  trigger (flush, cleaner, high_watermark 0, max_age) cleans them, and
  dirty blocks beyond the end of a shorter table are written back;
- a full cache of dirty blocks over an origin that fails every write:
  writes to a cached and to an uncached block fail with EIO within the
  documented bound (full_wait plus one origin write), suspend --noflush,
  reload, resume and remove finish, no task hangs, failed writeback is retried a
  second later (not at once, again and again); a write to a cached block is
  written through to the origin, merged with the sectors only the cache
  held; with the origin back, flush drains everything and every byte is
  right;
- a writer that waits for a free block in a full cache is woken when
  writeback completes (blocks turned clean can be evicted), not after
  all of full_wait;
- a slot whose data or record is on the pmem disk's badblocks list is
  never handed out (issue 14): writes land beside it, read back, and are
  written back;
"""
from test_target import parse_status, pmemcache_module, run  # noqa: F401

WAIT_CLEAN = r"""
# wait_clean WHAT: until no block is dirty (at most 60 s)
wait_clean() {
	n=0
	while [ "$(dmsetup status pc | awk '{print $5}')" != 0 ]; do
		[ $n -lt 120 ] || die "$1: blocks stay dirty"
		sleep 0.5
		n=$((n + 1))
	done
}
"""

# 512 B writes at sectors 0, 3, 6 and 1 of a 7-sector target
SEC = "--rw=write --bs=512 --size=512 --offset=%d"
# the last, partial block of an 803-sector target, and the 100 before it
TAIL = "--rw=write --bs=512 --size=1536 --offset=409600"
HEAD = "--rw=write --bs=4k --size=400k --offset=0"


def test_short_tables_are_served(vm):
    res = run(vm, WAIT_CLEAN + r"""
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
far=$(( (sz / 8 - 1024) * 4096 ))
echo "FAR=$far"

# shorter than one block: every writeback trigger
dm_create pc "0 7 pmemcache /dev/md0 /dev/pmem0 4096 0" || die "create 7"
fio_job s0 /dev/mapper/pc %(s0)s
timeout 60 dmsetup message pc 0 flush || die "flush, 7 sectors"
status 1
fio_job s3 /dev/mapper/pc %(s3)s
dmsetup message pc 0 cleaner || die cleaner
wait_clean cleaner
dmsetup message pc 0 nocleaner || die nocleaner
fio_job s6 /dev/mapper/pc %(s6)s
dmsetup message pc 0 low_watermark 0 || die "low_watermark 0"
dmsetup message pc 0 high_watermark 0 || die "high_watermark 0"
wait_clean "high_watermark 0"
# max_age by message, on a table that had none: only it cleans s1
dmsetup message pc 0 high_watermark 100 || die "high_watermark 100"
dmsetup message pc 0 low_watermark 100 || die "low_watermark 100"
dmsetup message pc 0 max_age 500 || die "message max_age"
dmsetup message pc 0 clear_stats
fio_job s1 /dev/mapper/pc %(s1)s
wait_clean max_age
status 2
dmsetup remove pc
fio_check s0 /dev/md0 %(s0)s
fio_check s3 /dev/md0 %(s3)s
fio_check s6 /dev/md0 %(s6)s
fio_check s1 /dev/md0 %(s1)s

# not a multiple of a block: the last block is partly addressable
dm_create pc "0 803 pmemcache /dev/md0 /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die "create 803"
fio_job tail /dev/mapper/pc %(tail)s
fio_job head /dev/mapper/pc %(head)s
timeout 60 dmsetup message pc 0 flush || die "flush, 803 sectors"
status 3
dmsetup remove pc
fio_check tail /dev/md0 %(tail)s
fio_check head /dev/md0 %(head)s

# shorter than the table before it: its dirty blocks beyond the new end
# are kept and written back
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die "create full"
fio_job far /dev/mapper/pc --rw=randwrite --bs=4k --size=4m --offset=$far
status 4
dmsetup reload pc --table "0 8 pmemcache /dev/md0 /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die "reload 8"
dmsetup resume pc || die "resume 8"
status 5
timeout 120 dmsetup message pc 0 flush || die "flush, 8 sectors"
status 6
dmsetup remove pc
fio_check far /dev/md0 --rw=randwrite --bs=4k --size=4m --offset=$far
""" % dict(
        s0=SEC % 0, s3=SEC % 1536, s6=SEC % 3072, s1=SEC % 512,
        tail=TAIL, head=HEAD),
        timeout=600)
    s = {i: parse_status(res.value("STATUS%d" % i)) for i in range(1, 7)}
    assert s[1]["dirty"] == 0 and s[1]["wb_errors"] == 0, s[1]
    assert s[2]["dirty"] == 0 and s[2]["write_hits"] == 1, s[2]
    assert s[3]["dirty"] == 0 and s[3]["write_new"] + s[3]["write_hits"] == 103, s[3]
    assert s[4]["dirty"] == 1024, s[4]
    assert s[5]["dirty"] == 1024, s[5]
    assert s[6]["dirty"] == 0 and s[6]["wb_errors"] == 0, s[6]
    assert res.values("VERIFY_OK") == ["s0", "s3", "s6", "s1", "tail", "head", "far"]


NEW = "--rw=randwrite --bs=4k --size=64k --offset=1m"


def test_no_slot_on_pmem_badblocks(vm):
    """A fresh cache hands out slots 0, 1, ...: the data of slots 0-63
    and the records of slots 64-79 are put on the badblocks list, then 16
    blocks are written."""
    res = run(vm, r"""
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
doff=$(dd if=/dev/pmem0 bs=4096 count=1 iflag=direct 2>/dev/null | od -An -tu8 -j104 -N8 | tr -d ' ')
# ascending, in pieces of at most 512 sectors (see test_faults.py)
echo "$(( (4096 + 32 * 64) / 512 )) 1" > /sys/block/pmem0/badblocks || die "records"
echo "$((doff / 512)) 512" > /sys/block/pmem0/badblocks || die "data"
cat /sys/block/pmem0/badblocks
fio_job new /dev/mapper/pc %(new)s
status 1
timeout 120 dmsetup message pc 0 flush || die flush
status 2
dmsetup remove pc
fio_check new /dev/md0 %(new)s
""" % dict(new=NEW))
    s1, s2 = parse_status(res.value("STATUS1")), parse_status(res.value("STATUS2"))
    assert s1["write_new"] == 16 and s1["dirty"] == 16, s1
    assert s1["media_errors"] == 0 and s1["bad_slots"] == 80, s1
    assert s2["dirty"] == 0 and s2["media_errors"] == 0, s2
    assert s2["free"] == s2["blocks"] - 80 - 16, s2
    assert res.values("VERIFY_OK") == ["new"]


def test_starved_writer_wakes_when_writeback_completes(vm):
    """A full cache of dirty blocks and no writeback before a writer
    starves (both watermarks 100).  The writer that finds no free block
    kicks writeback; the first completion turns blocks clean, and the
    writer must evict one then, not sleep its whole full_wait (15 s)."""
    res = run(vm, r"""
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '6 high_watermark 100 low_watermark 100 full_wait 15000')" || die create
n=$(dmsetup status pc | awk '{print $4}')
fill="--rw=write --bs=4k --size=$((n * 4))k --offset=0 --ioengine=libaio --iodepth=16"
more="--rw=write --bs=4k --size=64k --offset=$((n * 4))k"
fio_job fill /dev/mapper/pc $fill
status 1
fio_job more /dev/mapper/pc $more
status 2
timeout 120 dmsetup message pc 0 flush || die flush
dmsetup remove pc
fio_check fill /dev/md0 $fill
fio_check more /dev/md0 $more
""", pmem_size=16)
    s1, s2 = parse_status(res.value("STATUS1")), parse_status(res.value("STATUS2"))
    assert s1["dirty"] == s1["blocks"] and s1["free"] == 0, s1
    assert s1["full_waits"] == 0 and s1["wb_pfn_blocks"] + s1["wb_bounce_blocks"] == 0, s1
    assert s2["full_waits"] >= 1 and s2["full_timeouts"] == 0, s2
    assert s2["full_around"] == 0 and s2["full_through"] == 0, s2
    assert s2["write_new"] == s1["blocks"] + 16 and s2["wb_errors"] == 0, s2
    assert res.values("VERIFY_OK") == ["fill", "more"]


def test_full_cache_over_failing_origin_never_hangs(vm):
    """16 MiB of pmem over a dm origin that is switched to `error`; the
    cache is filled with dirty blocks (no writeback before that: both
    watermarks 100), full_wait 1 s, one writeback job."""
    res = run(vm, r"""
field() { dmsetup status pc | awk -v k=$1 '{print $(3 + k)}'; }
uptime_cs() { awk '{printf "%d\n", $1 * 100}' /proc/uptime; }
# one O_DIRECT write of 8 repeated bytes: sh /tmp/fio_at OFFSET SIZE
echo "fio --name=w --filename=/dev/mapper/pc --direct=1 --ioengine=psync \
	--rw=write --bs=\$2 --size=\$2 --offset=\$1 \
	--buffer_pattern='\"pmc-thru\"' --scramble_buffers=0" > /tmp/fio_at
# timed NAME CMD...: run CMD, print "NAME=<rc> <centiseconds>"
timed() {
	name=$1
	shift
	t0=$(uptime_cs)
	rc=0
	"$@" > /tmp/$name.out 2>&1 || rc=$?
	echo "$name=$rc $(( $(uptime_cs) - t0 ))"
}
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create org "0 $sz linear /dev/md0 0" || die org
table="0 $sz pmemcache /dev/mapper/org /dev/pmem0 4096 8 high_watermark 100 low_watermark 100 full_wait 1000 writeback_jobs 1"
dm_create pc "$table" || die create
n=$(field 1)
dmsetup reload org --table "0 $sz error" || die "reload error"
dmsetup resume org || die "resume error"
t_err=$(uptime_cs)

# every block of the cache dirty: blocks 0-6 and 8..n-1 by fio, 7 by dd
f1="--rw=write --bs=4k --size=28k --offset=0"
f2="--rw=write --bs=4k --size=$(( (n - 8) * 4 ))k --offset=32k --ioengine=libaio --iodepth=16"
fio_job f1 /dev/mapper/pc $f1
dd if=/dev/urandom of=/tmp/b7 bs=4096 count=1 2>/dev/null
dd if=/tmp/b7 of=/dev/mapper/pc bs=4096 seek=7 count=1 conv=fsync 2>/dev/null || die "block 7"
fio_job f2 /dev/mapper/pc $f2
status 1

# a cached block and one that is not: both fail, neither hangs
timed CACHED timeout 30 sh /tmp/fio_at 20480 4k
echo "CACHED_ERR=$(grep -o 'error=Input/output error' /tmp/CACHED.out | head -1)"
timed UNCACHED timeout 30 sh /tmp/fio_at $(( (n + 100) * 4096 )) 4k
echo "UNCACHED_ERR=$(grep -o 'error=Input/output error' /tmp/UNCACHED.out | head -1)"
echo "ERR_CS=$(( $(uptime_cs) - t_err ))"
status 2
timed SUSPEND timeout 10 dmsetup suspend --noflush pc
timed RELOAD timeout 10 dmsetup reload pc --table "$table"
timed RESUME timeout 10 dmsetup resume pc
timed REMOVE timeout 10 dmsetup remove pc
dm_create pc "$table" || die "create again"
status 3

# the origin back, but suspended: nothing the cache sends it completes
# yet, so no block can turn clean.  Writeback (one job) restarts at block
# 0, which then waits in the origin.  One sector of cached block 7 goes
# through to the origin, merged with the seven only pmem holds.
dmsetup suspend pc || die "suspend pc"
dmsetup suspend org || die "suspend org"
dmsetup reload org --table "0 $sz linear /dev/md0 0" || die "reload linear"
dmsetup resume pc || die "resume pc"
i=0
while [ $i -lt 64 ]; do
	printf pmc-thru
	i=$((i + 1))
done > /tmp/sec
sh /tmp/fio_at $((59 * 512)) 512 > /tmp/sec.out 2>&1 &
wp=$!
i=0
while [ "$(field 30)" = 0 ] && [ $i -lt 150 ]; do
	sleep 0.1
	i=$((i + 1))
done
status 4
dmsetup resume org || die "resume org"
wait $wp || { cat /tmp/sec.out; die "write through to block 7"; }
timeout 120 dmsetup message pc 0 flush || die flush
status 5
cp /tmp/b7 /tmp/b7x
dd if=/tmp/sec of=/tmp/b7x bs=512 seek=3 count=1 conv=notrunc 2>/dev/null
dd if=/dev/mapper/pc of=/tmp/r7 bs=4096 skip=7 count=1 iflag=direct 2>/dev/null || die "read 7"
cmp /tmp/r7 /tmp/b7x || die "block 7 through the cache"
timed REMOVE2 timeout 10 dmsetup remove pc
dmsetup remove org
dd if=/dev/md0 of=/tmp/o7 bs=4096 skip=7 count=1 iflag=direct 2>/dev/null || die "read md0"
cmp /tmp/o7 /tmp/b7x || die "block 7 on the origin"
echo BLOCK7_OK=1
fio_check f1 /dev/md0 $f1
fio_check f2 /dev/md0 $f2
""", pmem_size=16, timeout=300)
    s = {i: parse_status(res.value("STATUS%d" % i)) for i in range(1, 6)}
    n = s[1]["blocks"]
    assert s[1]["dirty"] == n and s[1]["free"] == 0, s[1]
    # both writes failed with EIO (fio exits 1: not killed by timeout,
    # not stuck in D state) within the bound: each waited once, all of
    # full_wait (1 s), then went to the origin once, around or through.
    # Their time, fio's start included, is only checked against 20 s (the
    # hung-task timeout): the guest is slow and shares the host.
    for name in ("CACHED", "UNCACHED"):
        rc, cs = map(int, res.value(name).split())
        assert rc == 1 and cs < 2000, (name, rc, cs)
        assert res.value(name + "_ERR") == "error=Input/output error", res.value(name + "_ERR")
    assert s[2]["full_waits"] == 2 and s[2]["full_timeouts"] == 2, s[2]
    assert s[2]["full_through"] == 1 and s[2]["full_around"] == 1, s[2]
    assert s[2]["dirty"] == n, s[2]
    # failed writeback is retried a second later, not at once: one pass
    # of one block (writeback_jobs 1) per second at most
    secs = int(res.value("ERR_CS")) // 100
    assert 0 < s[2]["wb_errors"] <= 2 * (secs + 2), (secs, s[2])
    for name in ("SUSPEND", "RELOAD", "RESUME", "REMOVE", "REMOVE2"):
        rc, cs = map(int, res.value(name).split())
        assert rc == 0 and cs < 1000, (name, rc, cs)
    assert s[3]["dirty"] == n, s[3]
    # the write to block 7 took the write-through path while the origin
    # was held, and read nothing (a 512 B write, not a read-modify-write)
    assert s[4]["full_through"] == 1 and s[4]["read_hits"] == s[3]["read_hits"], s[4]
    assert s[4]["read_misses"] == s[3]["read_misses"], s[4]
    assert s[5]["dirty"] == 0, s[5]
    assert res.value("BLOCK7_OK") == "1"
    assert res.values("VERIFY_OK") == ["f1", "f2"]
