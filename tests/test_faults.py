"""Fault injection in the guest (issue 7, part 3).

- an md member fails while the cache writes back (raid5 and raid1, one
  boot): mdadm --fail during `dmsetup message pc 0 flush`, then --remove,
  --re-add and the resync; every byte is verified on the origin, and again
  with another member failed, so that the re-added one is read too;
- suspend, resume and a table reload under fio verify I/O, then module
  unload refused while a table uses the target and allowed after it is
  removed, then media errors on pmem: ranges written to
  /sys/block/pmem0/badblocks make reads of cached blocks fail with -EIO and
  count in media_errors (one boot); a poisoned dirty block in pfn
  writeback to raid5 is a media error of the cache, never sent, not an
  origin failure;
- the pmem namespace unbound under a live cache (what `ndctl
  disable-namespace` refuses to do, a sysfs unbind does): I/O fails with
  -EIO, flush and remove end, health says pmem_gone, no kernel report;
  bound again, the cache loads every acknowledged write (one boot).

The origin returning errors for a while is test_target.py's
test_origin_errors_keep_blocks_dirty_and_are_retried.
"""
from test_target import parse_status, pmemcache_module  # noqa: F401
from test_target import run as run_target

# 96 MiB of verified writes that stay dirty (high_watermark 100)
FILL = "--rw=randwrite --bs=4k --size=96m --offset=0 --ioengine=libaio --iodepth=16"

MD_FAIL = r"""
pmc_init
md_bitmap() {
	mdadm --create /dev/$1 --run --quiet --metadata=1.2 --assume-clean \
		--bitmap=internal --level=$2 --raid-devices=$3 $4 2>&1 || die "mdadm $1"
}
md_bitmap md0 raid5 4 "--chunk=64 /dev/vda /dev/vdb /dev/vdc /dev/vdd"
md_bitmap md1 raid1 2 "/dev/vde /dev/vdf"

# fail_during_flush MD MEMBER OTHER
fail_during_flush() {
	md=$1 m=$2 other=$3
	dm_create pc "$(pmc_table $md '5 high_watermark 100 low_watermark 100 format')" || die create
	fio_job $md /dev/mapper/pc %(fill)s
	status ${md}a
	d0=$(dmsetup status pc | awk '{print $5}')
	dmsetup message pc 0 flush &
	fp=$!
	# fail the member as soon as writeback has cleaned a first block
	while kill -0 $fp 2>/dev/null &&
		[ "$(dmsetup status pc | awk '{print $5}')" = "$d0" ]; do :; done
	kill -0 $fp 2>/dev/null && echo "FAILED_DURING_FLUSH=$md"
	mdadm /dev/$md --fail /dev/$m 2>&1 || die "fail $m"
	wait $fp || die "flush with $m failed"
	status ${md}b
	mdadm /dev/$md --remove /dev/$m 2>&1 || die "remove $m"
	mdadm /dev/$md --re-add /dev/$m 2>&1 || die "re-add $m"
	n=0
	while [ "$(cat /sys/block/$md/md/degraded)" != 0 ] && [ $n -lt 600 ]; do
		mdadm --wait /dev/$md > /dev/null 2>&1 || sleep 1
		n=$((n + 1))
	done
	grep -A2 "^$md" /proc/mdstat
	echo "DEGRADED_$md=$(cat /sys/block/$md/md/degraded)"
	dmsetup remove pc
	fio_check $md /dev/$md %(fill)s
	# the re-added member now carries data that the next read needs
	mdadm /dev/$md --fail /dev/$other 2>&1 || die "fail $other"
	fio_check $md /dev/$md %(fill)s
}
fail_during_flush md0 vdb vdc
fail_during_flush md1 vde vdf
"""


def test_md_member_fails_during_writeback(vm):
    res = run_target(vm, MD_FAIL % dict(fill=FILL), timeout=1500)
    assert res.values("FAILED_DURING_FLUSH") == ["md0", "md1"]
    for md in ("md0", "md1"):
        a = parse_status(res.value("STATUS%sa" % md))
        b = parse_status(res.value("STATUS%sb" % md))
        assert a["dirty"] > 16000, a
        assert b["dirty"] == 0 and b["wb_errors"] == 0, b
        assert res.value("DEGRADED_" + md) == "0"
    assert res.values("VERIFY_OK") == ["md0", "md0", "md1", "md1"]


BUSY = "--rw=randwrite --bsrange=512-64k --size=64m --offset=0 --ioengine=libaio --iodepth=8"

LIFECYCLE = r"""
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '4 high_watermark 5 low_watermark 1')" || die create
# suspend, resume and reload (other watermarks) while fio writes and verifies
fio_job busy /dev/mapper/pc %(busy)s &
fp=$!
n=0
while kill -0 $fp 2>/dev/null; do
	sleep 1
	dmsetup suspend pc || die suspend
	dmsetup resume pc || die resume
	dmsetup reload pc --table "$(pmc_table md0 "4 high_watermark $((5 + n %% 2)) low_watermark 1")" || die reload
	dmsetup suspend pc && dmsetup resume pc || die "swap table"
	n=$((n + 1))
done
wait $fp || die "fio under suspend/reload"
echo "CYCLES=$n"
echo "TABLE=$(dmsetup table pc)"
# module unload: refused while a table uses the target
rmmod dm_pmemcache 2>/dev/null && die "rmmod with a live table"
dmsetup message pc 0 flush || die flush
dmsetup remove pc
fio_check busy /dev/md0 %(busy)s
rmmod dm_pmemcache || die "rmmod after remove"
lsmod | grep -q dm_pmemcache && die "still loaded"
echo RMMOD_OK=1
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod

# media errors: badblocks on the pmem behind cached blocks
dm_create pc "$(pmc_table md0 '5 high_watermark 100 low_watermark 100 format')" || die create
dd if=/dev/urandom of=/tmp/b bs=4k count=64 2>/dev/null
dd if=/tmp/b of=/dev/mapper/pc bs=4k oflag=direct 2>/dev/null || die "write blocks"
# one sector of block 100, with fio: busybox dd's single-sector write
# reached the target as a whole 4 KiB block (read-modify-write)
fio --name=sector --filename=/dev/mapper/pc --rw=write --bs=512 --size=512 \
	--offset=409600 --direct=1 --ioengine=psync > /dev/null || die "write sector"
dd if=/dev/mapper/pc of=/tmp/r bs=4k count=64 iflag=direct 2>/dev/null || die "read before"
cmp /tmp/b /tmp/r || die "read back before"
status 1
# a fresh cache hands out slots 0, 1, ...: 65 blocks from data_offset on
doff=$(dd if=/dev/pmem0 bs=4096 count=1 iflag=direct 2>/dev/null | od -An -tu8 -j104 -N8 | tr -d ' ')
# in pieces of at most 512 sectors, in ascending order: 6.1's
# badblocks_set() inserts the pieces of a longer range in reverse order,
# and badblocks_check() then misses all but the last
echo "$((doff / 512)) 512" > /sys/block/pmem0/badblocks || die "set badblocks"
echo "$((doff / 512 + 512)) 8" > /sys/block/pmem0/badblocks || die "set badblocks"
cat /sys/block/pmem0/badblocks
dd if=/dev/mapper/pc of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null && die "read hit on bad pmem"
dd if=/dev/mapper/pc of=/dev/null bs=4k count=1 skip=100 iflag=direct 2>/dev/null && die "partial read on bad pmem"
dd if=/dev/mapper/pc of=/dev/null bs=4k count=1 skip=200 iflag=direct 2>/dev/null || die "read miss failed"
echo EIO_OK=1
status 2
# writeback never sends known poison: the bad blocks stay dirty, blocks
# beside them are written back
dd if=/tmp/b of=/dev/mapper/pc bs=4k count=8 seek=300 oflag=direct 2>/dev/null || die "write good blocks"
dmsetup message pc 0 flush && die "flush of poisoned blocks succeeded"
n=0
while [ "$(dmsetup status pc | awk '{print $5}')" -gt 65 ] && [ $n -lt 40 ]; do
	sleep 0.5
	n=$((n + 1))
done
status 3
dmsetup remove pc
"""


def test_suspend_reload_under_io_rmmod_and_pmem_badblocks(vm):
    res = run_target(vm, LIFECYCLE % dict(busy=BUSY), timeout=1500)
    assert int(res.value("CYCLES")) >= 3
    assert "high_watermark" in res.value("TABLE")
    assert res.values("VERIFY_OK") == ["busy"]
    assert res.value("RMMOD_OK") == "1"
    assert res.value("EIO_OK") == "1"
    s1, s2 = parse_status(res.value("STATUS1")), parse_status(res.value("STATUS2"))
    assert s1["media_errors"] == 0 and s1["dirty"] == 65
    assert s2["media_errors"] == 2, s2
    assert s2["read_partial"] == s1["read_partial"] + 1  # cached sectors + origin
    assert s2["read_misses"] > s1["read_misses"]
    s3 = parse_status(res.value("STATUS3"))
    assert s3["dirty"] == 65 and s3["media_errors"] > s2["media_errors"], s3
    assert s3["wb_pfn_blocks"] + s3["wb_bounce_blocks"] == 8, s3


POISON_RAID5 = r"""
pmc_init
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
dd if=/dev/urandom of=/tmp/b bs=4k count=8 2>/dev/null
# a fresh cache hands out slots 0, 1, ...: block 0 is in slot 0
dd if=/tmp/b of=/dev/mapper/pc bs=4k count=8 oflag=direct 2>/dev/null || die write
doff=$(dd if=/dev/pmem0 bs=4096 count=1 iflag=direct 2>/dev/null | od -An -tu8 -j104 -N8 | tr -d ' ')
echo "$((doff / 512)) 8" > /sys/block/pmem0/badblocks || die "set badblocks"
status 1
rc=0
timeout 60 dmsetup message pc 0 flush > /dev/null 2>&1 || rc=$?
echo "FLUSH_RC=$rc"
# the flush ends at the first failure (the poisoned block's), maybe before
# the run of the 7 others is back from md: wait for it (at most 30 s)
n=0
while [ "$(dmsetup status pc | awk '{ print $5 }')" != 1 ] && [ $n -lt 30 ]; do
	sleep 1
	n=$((n + 1))
done
status 2
dmsetup remove pc
dd if=/dev/md0 of=/tmp/o bs=4k count=8 iflag=direct 2>/dev/null || die "read md0"
cmp -s -n $((7 * 4096)) /tmp/b /tmp/o 4096 4096 && echo GOOD_BLOCKS_ON_MD=1
"""


def test_poisoned_pmem_in_pfn_writeback_to_raid5_is_a_media_error(vm):
    """Issue 29 item 9: a dirty block on pmem in the badblocks list, pfn
    writeback to md raid5.  The block is never sent (md would read the
    poison itself): the flush fails, the block stays dirty, the error is
    counted as the cache's (media_errors), not the origin's (wb_errors 0,
    health not origin_failing); the 7 blocks beside it reach md by pfn."""
    res = run_target(vm, POISON_RAID5, timeout=600)
    s1, s2 = parse_status(res.value("STATUS1")), parse_status(res.value("STATUS2"))
    assert s1["route"] == "pfn" and s1["dirty"] == 8, s1
    assert res.value("FLUSH_RC") != "0"
    assert s2["dirty"] == 1 and s2["media_errors"] >= 1, s2
    assert s2["wb_errors"] == 0 and "origin_failing" not in s2["health"], s2
    assert s2["wb_pfn_blocks"] == 7 and s2["wb_bounce_blocks"] == 0, s2
    assert res.value("GOOD_BLOCKS_ON_MD") == "1"


# The namespace goes while a writer runs: dirty blocks of before and
# every write acknowledged until then must be found again.
PMEM_GONE = r"""
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
dd if=/dev/urandom of=/tmp/a bs=1M count=16 2>/dev/null
dd if=/tmp/a of=/dev/mapper/pc bs=1M oflag=direct 2>/dev/null || die "write a"
status 1
ndctl disable-namespace namespace0.0 > /dev/null 2>&1 && die "ndctl disabled a namespace in use"
echo NDCTL_REFUSED=1
ns=$(basename "$(readlink -f /sys/block/pmem0/device)")
echo "NS=$ns"
dd if=/dev/urandom of=/tmp/b bs=1M count=128 2>/dev/null
dd if=/tmp/b of=/dev/mapper/pc bs=4k seek=4096 oflag=direct 2>/tmp/dd.err &
wp=$!
# unbind once the writer is under way: 512 of its 32768 writes taken (a
# fixed 2 s was once long enough for all of them)
n=0
while [ "$(dmsetup status pc | awk '{print $5}')" -lt 4608 ]; do
	n=$((n + 1))
	[ $n -lt 6000 ] || die "the writer does not start"
	kill -0 $wp 2>/dev/null || die "the writer ended before the unbind"
	sleep 0.01
done
echo "$ns" > /sys/bus/nd/drivers/nd_pmem/unbind || die unbind
[ -b /dev/pmem0 ] && die "pmem0 still there"
wait $wp && die "the writer never failed"
acked=$(sed -n 's/^\([0-9]*\)+[0-9]* records out/\1/p' /tmp/dd.err)
echo "ACKED=$acked"
dd if=/dev/mapper/pc of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null && die "read after unbind"
echo READ_FAILED=1
rc=0
timeout 30 dmsetup message pc 0 flush 2>/dev/null || rc=$?
echo "FLUSH_RC=$rc"
status 2
timeout 30 dmsetup remove pc || die "remove after unbind"
echo "$ns" > /sys/bus/nd/drivers/nd_pmem/bind || die bind
n=0
while [ ! -b /dev/pmem0 ] && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die "create again"
status 3
dd if=/dev/mapper/pc of=/tmp/r bs=1M count=16 iflag=direct 2>/dev/null || die "read a"
cmp /tmp/a /tmp/r || die "dirty blocks of before lost"
dd if=/dev/mapper/pc of=/tmp/r bs=4k skip=4096 count=$acked iflag=direct 2>/dev/null || die "read b"
cmp -n $((acked * 4096)) /tmp/b /tmp/r || die "acknowledged writes lost"
dmsetup message pc 0 flush || die flush
dmsetup remove pc || die remove
dd if=/dev/md0 of=/tmp/r bs=4k count=$((4096 + acked)) iflag=direct 2>/dev/null || die "read md"
cmp -n 16777216 /tmp/a /tmp/r || die "a not on md"
dd if=/tmp/r of=/tmp/rb bs=4k skip=4096 2>/dev/null
cmp -n $((acked * 4096)) /tmp/b /tmp/rb || die "b not on md"
echo DATA_OK=1
"""


def test_pmem_namespace_unbound_under_a_live_cache(vm):
    res = run_target(vm, PMEM_GONE, timeout=900)
    assert res.value("NDCTL_REFUSED") == "1"
    assert res.value("READ_FAILED") == "1"
    assert res.value("FLUSH_RC") not in ("0", "124"), res.value("FLUSH_RC")  # failed, not hung
    acked = int(res.value("ACKED"))
    # the unbind came mid-write; without pmc_pmem_enter() all 32768 writes
    # are acknowledged into a mapping the namespace no longer has
    assert 0 < acked < 32768, acked
    s1, s2, s3 = (parse_status(res.value("STATUS%d" % i)) for i in (1, 2, 3))
    assert s1["dirty"] == 4096 and s1["health"] == "ok", s1
    assert "pmem_gone" in s2["health"].split(","), s2
    assert s3["dirty"] >= 4096 + acked and s3["health"] == "ok", s3
    assert res.value("DATA_OK") == "1"
    assert "pmem namespace gone: I/O fails with -EIO" in res.console
