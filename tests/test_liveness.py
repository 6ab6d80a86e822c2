"""Waits that end (issue 29): each test is a recipe that hung, or looped
without end, before its fix.

The origin is a dm-linear "orig" over md0, so that a test can hold the
origin's I/O (dmsetup suspend) at the moment it needs.

- a partial read held at the origin while 300 writes go through the
  cache to cached blocks of its stripe (cleaner mode): before, each write was
  a work item that slept until the read's overlay, a work item of the
  same queue, had run: past max_active the overlay never ran (and the
  through work held the stripe lock across its origin write);
- a discard of many blocks held at the origin: writeback was kept off the
  stripe of its first block only (a later write in the range, written
  back before the discard landed, would be undone under a CLEAN copy);
- a flush whose last dirty block is discarded while writeback is kept
  off its stripe: the discard lowered the dirty count without waking
  the flush, which then slept for ever with status saying dirty 0;
- a record made unreadable under the live table: marking it CLEAN
  failed after every writeback, and writeback took it again at once,
  for ever, uncounted;
- cleaner mode with one block rewritten without pause over an origin
  whose writes take 500 ms: a rewrite while the block was in writeback
  was cached dirty again, so a flush never ended;
- a burst past high_watermark while writeback paces itself after a
  pass that overdrew a whole stripe: the burst waited out the pause
  (up to ~48 s);
- clear_stats during a flush: the flush took the zeroed error count for
  a new error and returned -EIO.
"""
import os
import re
import subprocess

import pytest

from test_durability import HOST, guest_tools  # noqa: F401
from test_target import parse_status, pmemcache_module  # noqa: F401
from test_target import run as run_target
from vm import build, check_reports
import vm_mutants

LONG = os.environ.get("PMC_LONG", "0") not in ("", "0")

GOLDEN = 0x61c8864680b583eb
PMEM_BYTES = 1 << 30        # run-vm.sh's default NVDIMM
P1_BYTES = 64 << 20         # the 64 MiB partition of some tests


def n_blocks(pmem_bytes, bs=4096):
    """pmc_meta_geometry(): blocks of a cache on @pmem_bytes."""
    n = (pmem_bytes - 4096) // (bs + 32)
    while True:
        off = (4096 + n * 32 + 4095) // 4096 * 4096
        if off + n * bs <= pmem_bytes:
            return n
        n -= 1


def stripe_of(oblock, n):
    """pmc_stripe_of(): the index stripe of @oblock in a cache of @n blocks."""
    bits = 0
    while bits < 31 and (2 << bits) <= n:
        bits += 1
    return (((oblock * GOLDEN) & (2**64 - 1)) >> (64 - bits)) & 255


def same_stripe(oblock, n, start):
    """The first block from @start on that shares @oblock's stripe."""
    b = start
    while stripe_of(b, n) != stripe_of(oblock, n):
        b += 1
    return b


ORIGIN = r"""
pmc_init
md_make md0 raid1 2 a
s0=$(blockdev --getsz /dev/md0)
dmsetup create --noudevsync orig --table "0 $s0 linear /dev/md0 0" || die orig
dmsetup mknodes orig

# running PATTERN: how many processes run a command line starting so
# (busybox ps: PID USER COMMAND, no pgrep; a busybox applet started in
# the background shows as "{dd} sh /test/script.sh")
running() {
	ps | awk 'NR > 1 { $1 = $2 = ""; sub(/^ +/, ""); print }' | grep -c -E "^($1)"
}

# until_done SECONDS PATTERN: wait until no such process is left
until_done() {
	t=0
	while [ "$(running "$2")" != 0 ]; do
		[ $t -lt $(($1 * 10)) ] || { echo "STUCK=$(running "$2")"; return 1; }
		sleep 0.1
		t=$((t + 1))
	done
	echo "DONE_AFTER_DS=$t"
}

# dirty_blocks: the dirty field of pc's status
dirty_blocks() { dmsetup status pc | awk '{print $5}'; }

# until_status COLUMN TEST VALUE SECONDS WHY: until column COLUMN of pc's
# status passes [ $column TEST VALUE ], polled 10 times a second
until_status() {
	t=0
	until [ "$(dmsetup status pc | awk "{print \$$1}")" $2 $3 ]; do
		[ $t -lt $(($4 * 10)) ] || die "$5"
		sleep 0.1
		t=$((t + 1))
	done
}
"""


def run(vm, body, **kw):
    kw.setdefault("timeout", 600)
    return run_target(vm, ORIGIN + body, **kw)


def same_stripe_blocks(oblock, n, count, start):
    """@count blocks from @start on in @oblock's stripe (not @oblock)."""
    out, b = [], start
    while len(out) < count:
        b = same_stripe(oblock, n, b)
        out.append(b)
        b += 1
    return out


def test_partial_read_held_while_300_writes_go_through_its_stripe(vm, tmp_path, guest_tools):
    """Block 10 partly cached, 300 other cached blocks of its index stripe.
    A read of block 10 (a cached and an uncached sector) is held at the
    origin; then, in cleaner mode, 300 writes to the 300 blocks go through
    the cache, held at the origin too; then the origin runs."""
    n = n_blocks(PMEM_BYTES)
    blocks = same_stripe_blocks(10, n, 300, 1000)
    (tmp_path / "blocks").write_text("".join("%d\n" % b for b in blocks))
    res = run(vm, r"""
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
echo "BLOCKS=$(dmsetup status pc | awk '{print $4}')"
durable_io pwrite /dev/mapper/pc 40960 512 7 || die write
while read -r b; do
	dd if=/dev/urandom of=/dev/mapper/pc bs=4096 seek=$b count=1 oflag=direct 2>/dev/null || die "write $b"
done < /test/blocks
dmsetup message pc 0 cleaner
until_status 5 = 0 60 "cleaner mode never wrote back"
echo "STATUS1=$(dmsetup status pc)"
dmsetup suspend --noflush orig || die suspend
# sectors 80-81: one cached, one not: a partial read, held at the origin
fio --name=partial --filename=/dev/mapper/pc --direct=1 --ioengine=psync --rw=read \
	--bs=1k --size=1k --offset=40960 > /dev/null 2>&1 &
sleep 1
while read -r b; do
	durable_io pwrite /dev/mapper/pc $((b * 4096)) 512 0 &
done < /test/blocks
sleep 3
echo "WRITERS_HELD=$(running 'durable_io pwrite')"
echo "READ_HELD=$(running 'fio --name=partial')"
dmsetup resume orig || die resume
until_done 60 'durable_io pwrite|fio --name=partial' || die "reads or writes never ended"
echo "STATUS2=$(dmsetup status pc)"
head -c 512 /dev/zero > /tmp/z
b=$(tail -n 1 /test/blocks)
dd if=/dev/mapper/pc bs=512 skip=$((b * 8)) count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/z && echo LAST_ZERO=1
dmsetup remove pc
""", files=[(tmp_path / "blocks", "/test/blocks")] + guest_tools, timeout=600)
    assert int(res.value("BLOCKS")) == n     # same_stripe_blocks() computed for this n
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    assert s1["dirty"] + s1["clean"] == 301, s1
    # precondition: the writes were in flight while the origin was held
    assert int(res.value("WRITERS_HELD")) == 300
    assert int(res.value("READ_HELD")) >= 1
    assert s2["read_partial"] == 1, s2
    # every write went through the cache to the origin
    assert s2["write_around"] - s1["write_around"] == 300, (s1, s2)
    assert res.value("LAST_ZERO") == "1"


def test_flush_wakes_when_its_last_dirty_block_is_discarded(vm):
    """Block d is cached dirty.  A discard of block e, not cached and in
    the same index stripe, is passed to the origin and held there, so
    writeback may not take d (st->around).  A flush begins; d is
    discarded; then the origin runs."""
    n = n_blocks(PMEM_BYTES)
    d = 100
    e = same_stripe(d, n, 5000)
    res = run(vm, r"""
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
echo "BLOCKS=$(dmsetup status pc | awk '{print $4}')"
echo "ORIGIN_DISCARD=$(cat /sys/block/$(dmsetup info -c --noheadings -o blkdevname orig)/queue/discard_max_bytes)"
# blkdiscard opens its device exclusively and holds its invalidate lock
# while the discard is in flight: each discard through a device of its own
for a in alias1 alias2; do
	dmsetup create --noudevsync $a --table "0 $s0 linear /dev/mapper/pc 0" || die $a
	dmsetup mknodes $a
done
dd if=/dev/urandom of=/dev/mapper/pc bs=4096 seek=%(d)d count=1 oflag=direct 2>/dev/null || die write
dmsetup suspend --noflush orig || die suspend
blkdiscard -o $((%(e)d * 4096)) -l 4096 /dev/mapper/alias1 2>/dev/null &
sleep 1
[ "$(running '\{blkdiscard\}')" = 1 ] && echo HELD=1
echo "STATUS1=$(dmsetup status pc)"
timeout 30 dmsetup message pc 0 flush 2>/dev/null &
fpid=$!
sleep 1
blkdiscard -o $((%(d)d * 4096)) -l 4096 /dev/mapper/alias2 2>/dev/null &
sleep 2
echo "STATUS2=$(dmsetup status pc)"
dmsetup resume orig || die resume
wait $fpid
echo "FLUSH_RC=$?"
until_done 30 '\{blkdiscard\}' || die "a discard never ended"
dmsetup remove alias1 alias2
dmsetup remove pc
""" % dict(d=d, e=e), timeout=300)
    assert int(res.value("BLOCKS")) == n     # stripe_of() computed for this n
    # preconditions: the origin takes discards, and e's was held there
    assert int(res.value("ORIGIN_DISCARD")) > 0
    assert res.value("HELD") == "1"
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    assert s1["dirty"] == 1 and s1["discards"] == 1, s1
    assert s2["dirty"] == 0 and s2["clean"] == 0 and s2["discards"] == 2, s2
    assert res.value("FLUSH_RC") == "0"


def test_a_discard_keeps_writeback_off_every_stripe_it_covers(vm):
    """A discard of 16 blocks (several index stripes) is passed to the
    origin and held there.  Block x, inside the range but not in the
    stripe of its first block, is written meanwhile and a flush begins:
    writeback must not send x to the origin before the discard has
    completed, or the discard, landing later, would undo the write under
    a CLEAN copy.  The origin's block trace (a marker written just before
    the origin runs) shows when x's writeback reached it.  Before the fix
    only the first block's stripe was held."""
    n = n_blocks(PMEM_BYTES)
    first, count = 2000, 16
    x = next(b for b in range(first + 1, first + count)
             if stripe_of(b, n) != stripe_of(first, n))
    res = run(vm, r"""
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
echo "BLOCKS=$(dmsetup status pc | awk '{print $4}')"
dmsetup create --noudevsync alias1 --table "0 $s0 linear /dev/mapper/pc 0" || die alias1
dmsetup mknodes alias1
echo "ORIG_DEV=$(dmsetup info -c --noheadings -o major,minor orig | tr ':' ',')"
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T || die tracefs
echo 65536 > $T/buffer_size_kb
echo 1 > $T/events/block/block_bio_queue/enable || die "trace event"
echo > $T/trace
dmsetup suspend --noflush orig || die suspend
blkdiscard -o $((%(first)d * 4096)) -l $((%(count)d * 4096)) /dev/mapper/alias1 2>/dev/null &
sleep 1
[ "$(running '\{blkdiscard\}')" = 1 ] && echo HELD=1
dd if=/dev/urandom of=/tmp/x bs=4096 count=1 2>/dev/null
dd if=/tmp/x of=/dev/mapper/pc bs=4096 seek=%(x)d count=1 oflag=direct 2>/dev/null || die write
timeout 60 dmsetup message pc 0 flush 2>/dev/null &
fpid=$!
sleep 3
echo "STATUS1=$(dmsetup status pc)"
echo ORIGIN_RUNS > $T/trace_marker
dmsetup resume orig || die resume
wait $fpid
echo "FLUSH_RC=$?"
until_done 30 '\{blkdiscard\}' || die "the discard never ended"
echo 0 > $T/events/block/block_bio_queue/enable
sed -n 's/.*block_bio_queue: \([0-9]*,[0-9]*\) \([A-Z]*\) \([0-9]*\) + \([0-9]*\).*/Q \1 \2 \3 \4/p; s/.*tracing_mark_write: ORIGIN_RUNS.*/MARK/p' $T/trace
dmsetup remove alias1
dmsetup remove pc
dd if=/dev/mapper/orig of=/tmp/o bs=4096 skip=%(x)d count=1 iflag=direct 2>/dev/null || die read
cmp -s /tmp/x /tmp/o && echo ORIGIN_HOLDS_X=1
""" % dict(first=first, count=count, x=x), timeout=300)
    assert int(res.value("BLOCKS")) == n     # stripe_of() computed for this n
    assert res.value("HELD") == "1"          # the discard was in flight
    s1 = parse_status(res.value("STATUS1"))
    assert s1["dirty"] == 1 and s1["discards"] == 1, s1
    dev = res.value("ORIG_DEV")
    events = []
    for line in res.output.splitlines():
        if line == "MARK":
            events.append(("MARK",))
        elif line.startswith("Q %s " % dev):
            _, _, rwbs, sector, length = line.split()
            events.append((rwbs, int(sector), int(length)))
    assert ("MARK",) in events, res.output[-3000:]
    mark = events.index(("MARK",))
    x_writes = [i for i, e in enumerate(events)
                if len(e) == 3 and "W" in e[0] and e[1] <= x * 8 < e[1] + e[2]]
    # writeback wrote x to the origin, and only once the origin ran
    assert x_writes, events
    assert min(x_writes) > mark, \
        "x's writeback reached the held origin before its discard ended: %s" % events
    assert res.value("FLUSH_RC") == "0"
    assert res.value("ORIGIN_HOLDS_X") == "1"


def test_a_record_changed_under_the_live_table_is_taken_out_of_use(vm):
    res = run(vm, r"""
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
fio_job one /dev/mapper/pc --rw=write --bs=4k --size=4k --offset=1m
blocks=$(dmsetup status pc | awk '{print $4}')
# every record of the cache (32 bytes each, from byte 4096) overwritten
head -c $((blocks * 32)) /dev/zero | tr '\0' '\132' |
	dd of=/dev/pmem0 bs=4096 seek=1 conv=notrunc,fsync 2>/dev/null || die "records"
echo "STATUS1=$(dmsetup status pc)"
timeout 30 dmsetup message pc 0 flush
echo "FLUSH_RC=$?"
echo "STATUS2=$(dmsetup status pc)"
dmsetup remove pc
dmsetup remove orig
fio_check one /dev/md0 --rw=write --bs=4k --size=4k --offset=1m
""", timeout=300)
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    assert s1["dirty"] == 1
    assert res.value("FLUSH_RC") == "0"
    assert s2["dirty"] == 0 and s2["bad_slots"] == 1 and s2["media_errors"] == 1, s2
    assert res.values("VERIFY_OK") == ["one"]
    assert res.dmesg.count("record unreadable or changed after writeback") == 1


def test_flush_in_cleaner_mode_ends_while_one_block_is_rewritten(vm):
    res = run(vm, r"""
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
fio_job fill /dev/mapper/pc --rw=write --bs=4k --size=8m --offset=0
# block 0 rewritten without pause: cached dirty again and again
fio --name=hot --filename=/dev/mapper/pc --direct=1 --ioengine=psync --rw=write \
	--bs=4k --size=4k --offset=0 --time_based --runtime=300 > /dev/null 2>&1 &
hot=$!
until_status 11 -ge 100 60 "the hot writer never wrote"
echo "STATUS0=$(dmsetup status pc)"
# origin writes take 500 ms: the hot block is rewritten many times while
# its copy is being written back
dmsetup suspend orig && dmsetup reload orig --table "0 $s0 delay /dev/md0 0 0 /dev/md0 0 500" &&
	dmsetup resume orig || die "delay table"
dmsetup message pc 0 cleaner
echo "STATUS1=$(dmsetup status pc)"
timeout 60 dmsetup message pc 0 flush
echo "FLUSH_RC=$?"
echo "STATUS2=$(dmsetup status pc)"
kill $hot
wait $hot || true
dmsetup remove pc
""", timeout=400)
    s0 = parse_status(res.value("STATUS0"))
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    # precondition: dirty blocks and the hot block being rewritten
    assert s0["dirty"] > 1000 and s0["write_hits"] >= 100, s0
    assert res.value("FLUSH_RC") == "0"
    # the hot block kept being written during the flush (through the
    # cache, then around it: 500 ms each)
    assert s2["write_around"] >= s1["write_around"] + 2, (s1, s2)


def test_a_burst_past_high_watermark_ends_a_rate_pause(vm, tmp_path):
    """On a 64 MiB partition (~16,000 blocks): low_watermark 1 (~160
    blocks), high_watermark 10 (~1,600), writeback in whole stripes of
    384 blocks.  Two whole stripes and 300 blocks more put writeback in
    rate mode at about 8 blocks/s: the first stripe goes with the tokens
    of a fresh start, the second with one token, overdrawing ~383 blocks:
    a pause of ~48 s.  Then a burst takes the cache past high_watermark,
    where writeback must run at full speed."""
    from test_bad_input import mbr
    n = n_blocks(P1_BYTES)
    high = n * 10 // 100
    burst = 1792                                # 112 writes of 64 KiB
    (tmp_path / "mbr").write_bytes(mbr([(2048, P1_BYTES // 512)]))
    res = run(vm, r"""
dd if=/test/mbr of=/dev/pmem0 bs=512 count=1 conv=notrunc 2>/dev/null
blockdev --rereadpt /dev/pmem0 || die rereadpt
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0p1 4096 6 low_watermark 1 high_watermark 10 stripe_blocks 384" || die create
echo "BLOCKS=$(dmsetup status pc | awk '{print $4}')"
# foreground I/O all along: an idle cache would write back at full speed
( while :; do dd if=/dev/mapper/pc of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; sleep 0.2; done ) &
reader=$!
dd if=/dev/urandom of=/dev/mapper/pc bs=4096 count=1068 oflag=direct 2>/dev/null || die fill
until_status 29 -ge 2 30 "two stripes were never written back"
sleep 1
echo "STATUS1=$(dmsetup status pc)"
dd if=/dev/urandom of=/dev/mapper/pc bs=65536 seek=256 count=112 oflag=direct 2>/dev/null || die burst
t=0
while [ "$(dirty_blocks)" -ge %(high)d ]; do
	[ $t -lt 150 ] || break
	sleep 0.1
	t=$((t + 1))
done
echo "BELOW_HIGH_AFTER_DS=$t"
echo "STATUS2=$(dmsetup status pc)"
kill $reader
dmsetup remove pc
""" % dict(high=high), files=[(tmp_path / "mbr", "/test/mbr")], timeout=400)
    assert int(res.value("BLOCKS")) == n
    s1 = parse_status(res.value("STATUS1"))
    s2 = parse_status(res.value("STATUS2"))
    # preconditions: two whole stripes went, writeback paces itself, and
    # the burst takes the dirty count past high_watermark
    assert s1["wb_full_stripes"] == 2 and s1["wb_rate"] > 0, s1
    assert s1["dirty"] + burst >= high, (s1, high)
    assert s2["write_new"] - s1["write_new"] == burst, s2
    # the pause it overdrew is ~40 s; full speed drains below high at once
    assert int(res.value("BELOW_HIGH_AFTER_DS")) < 150, s2


def test_clear_stats_during_a_flush_is_not_an_error(vm):
    res = run(vm, r"""
dm_create pc "0 $s0 pmemcache /dev/mapper/orig /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
fio_job fill /dev/mapper/pc --rw=write --bs=4k --size=16m --offset=0
# a failing origin first, so that the error count is not 0
dmsetup suspend orig && dmsetup reload orig --table "0 $s0 error" && dmsetup resume orig || die "error table"
timeout 30 dmsetup message pc 0 flush 2> /dev/null && die "flush over a failing origin succeeded"
echo "STATUS1=$(dmsetup status pc)"
dmsetup suspend orig && dmsetup reload orig --table "0 $s0 linear /dev/md0 0" || die "linear table"
timeout 60 dmsetup message pc 0 flush &
fpid=$!
sleep 2
dmsetup message pc 0 clear_stats || die clear_stats
dmsetup resume orig || die resume
wait $fpid
echo "FLUSH_RC=$?"
echo "STATUS2=$(dmsetup status pc)"
dmsetup remove pc
dmsetup remove orig
fio_check fill /dev/md0 --rw=write --bs=4k --size=16m --offset=0
""", timeout=300)
    assert parse_status(res.value("STATUS1"))["wb_errors"] > 0
    assert res.value("FLUSH_RC") == "0"
    assert parse_status(res.value("STATUS2"))["dirty"] == 0
    assert res.values("VERIFY_OK") == ["fill"]


LOAD_FULL = r"""
[ -b /dev/pmem0 ] || die "no /dev/pmem0"
insmod %(ko)s || die insmod
sectors=%(sectors)d
dm_create z "0 $sectors zero" || die zero
t0=$(date +%%s)
dm_create pc "0 $sectors pmemcache /dev/mapper/z /dev/pmem0 4096 4 high_watermark 100 low_watermark 100" || die create
echo "LOAD_S=$(( $(date +%%s) - t0 ))"
echo "STATUS=$(dmsetup status pc)"
dmsetup remove pc
"""
LOCKUPS = ("BUG: soft lockup", "detected stalls", "self-detected stall")
NO_RESCHED = ("#define pmc_cond_resched()\t\tcond_resched()",
              "#define pmc_cond_resched()\t\tdo { } while (0)")


@pytest.mark.skipif(not LONG, reason="long form: PMC_LONG=1 (make test-long)")
@pytest.mark.parametrize("module", ["mutant", "product"])
def test_a_256_gib_namespace_full_of_records_loads_without_a_lockup_report(
        vm, tmp_path, figures, module):
    """Recovery loops over every record, and the load's other passes over
    every slot: 66 million live records on a 256 GiB NVDIMM (a sparse
    file, formatted and filled on the host by tests/host/forge_full with
    the module's own code).  The soft-lockup detector (20 s) and the RCU
    stall detector (21 s) are on: a loop without cond_resched() that runs
    longer is reported, and any report fails the test.  The mutant (the
    module with pmc_cond_resched() a no-op) must be reported, or the test
    would prove nothing."""
    p = build(["make", "-s", "-C", str(HOST), "forge_full"])
    assert p.returncode == 0, p.stdout + p.stderr
    files, ko = vm_mutants.guest_module(
        tmp_path, *(("pmc_shim.h", [NO_RESCHED]) if module == "mutant" else ()))
    sectors = 1 << 31                                   # a 1 TiB dm-zero origin
    img = vm.state / "pmem.img"
    img.unlink(missing_ok=True)
    subprocess.run(["truncate", "-s", "256G", str(img)], check=True)
    p = subprocess.run([str(HOST / "forge_full"), str(img), str(sectors)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    forged = int(re.search(r"records=(\d+)", p.stdout).group(1))
    assert forged == n_blocks(256 << 30)
    try:
        res = run_target(vm, LOAD_FULL % dict(ko=ko, sectors=sectors), files=files,
                         pmem_size=256 << 10, memory=3072, timeout=3600,
                         allow_reports=True)
    finally:
        img.unlink()
    st = parse_status(res.value("STATUS"))
    # every forged record was recovered (writeback may have cleaned some:
    # a cache 100 %% dirty is above high_watermark)
    assert st["blocks"] == forged and st["free"] == 0, res.value("STATUS")
    assert st["dirty"] + st["clean"] == forged, res.value("STATUS")
    found = [r for r in LOCKUPS if r in res.console + res.dmesg]
    print("%s: %d records recovered in a load of %s s; lockup reports: %s"
          % (module, forged, res.value("LOAD_S"), found or "none"))
    if module == "mutant":
        assert found, "the mutant without cond_resched() was not reported:\n" + res.tail()
        return
    check_reports(res)
    figures["256 GiB load: records recovered, seconds"] = "%d, %s" % (
        forged, res.value("LOAD_S"))
