"""A mirrored cache copies a half online (issue 31, step 6): I/O goes on
during the copy, a power cut in the middle resumes it from its last R3
mark, and the copy then holds every block on its own.

Boot 1 (both NVDIMMs): a new pair; fio writes 128 MiB (half the cache's
blocks, every one dirty: no writeback) with crc32c verify headers.

The host zeroes half B's image: a blank replacement.

Boot 2: the pair with `degraded` (A cannot know B is new) and
`resync_rate 4`: the table starts at once, health `mirror_resync`; fio
writes 4 MiB more while the copy runs (asserted: the copy still ran when
fio ended); once the copy passed 3,000 blocks (two R3 marks) the host
cuts the power (asserted from the status before the cut: the copy ran,
past a mark, not done).

Boot 3: the pair again: the copy resumes from the mark (its kernel line,
asserted above 0), ends ("copy done", health `ok`), fio verifies both
jobs through the pair.

The host zeroes half A's image: the old half lost.

Boot 4: half B alone (`mirror - degraded`) verifies both jobs.

The mutant whose R3 marks count slots not yet copied (the mark says
the whole cache) resumes past blocks B never got: boot 4 reads them
wrong (fio's verify fails): caught. The real module, the control, is
the test above.
"""
import os
import re

import pytest

from test_mirror import LONG, MIRROR_PRELUDE, PMEM2_MB, PMEM_MB, build_mutant, use_module
from test_fs_powercut import wait_for
from test_target import STATUS_FIELDS, parse_status, pmemcache_module  # noqa: F401
from test_target_powercut import cut_console

BIG = "--rw=write --bs=64k --size=128m --offset=0"
MID = "--rw=randwrite --bs=4k --size=4m --offset=160m"
WM = "high_watermark 100 low_watermark 100"
# Copied blocks before the cut: past two R3 marks (every 1,024 blocks).
CUT_AFTER = 3000

# resync_left in `dmsetup status` (awk's field: start, length, "pmemcache" first)
LEFT_FIELD = 3 + STATUS_FIELDS.index("resync_left") + 1

BOOT1 = MIRROR_PRELUDE + r"""
pmc_init2
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '6 %(wm)s mirror /dev/pmem1')" || die create
fio_job big /dev/mapper/pc %(big)s
status 1
dmsetup remove pc
"""

# dmsetup create, not dm_create: that one waits for the copy
BOOT2 = MIRROR_PRELUDE + r"""
pmc_init2
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
sz=$(blockdev --getsz /dev/md0)
dmsetup create --noudevsync pc --table \
	"0 $sz pmemcache /dev/md0 /dev/pmem0 4096 9 %(wm)s resync_rate 4 mirror /dev/pmem1 degraded" \
	|| die "pair with a blank B"
dmsetup mknodes pc
status 0
fio_job mid /dev/mapper/pc %(mid)s
status 1
n=$(dmsetup status pc | awk '{print $4}')
while :; do
	left=$(dmsetup status pc | awk '{print $%(left)d}')
	[ "$left" -gt 0 ] || die "the copy ended before the cut"
	[ $((n - left)) -lt %(cut_after)d ] || break
	sleep 1
done
status 2
echo CUT_READY=1
sleep 1000
"""

BOOT3 = MIRROR_PRELUDE + r"""
pmc_init2
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
dmesg -c > /dev/null
dm_create pc "$(pmc_table md0 '6 %(wm)s mirror /dev/pmem1')" || die "the pair after the cut"
echo "RESUMED_AT=$(dmesg | sed -n 's/.*online from block \([0-9]*\) of.*/\1/p')"
echo "DONE=$(dmesg | grep -c 'mirror: copy done')"
status 3
fio_check big /dev/mapper/pc %(big)s
fio_check mid /dev/mapper/pc %(mid)s
dmsetup remove pc
"""

BOOT4 = MIRROR_PRELUDE + r"""
pmc_init2
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
dm_create pc "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem1 4096 7 %(wm)s mirror - degraded" \
	|| die "B alone"
status 4
rc=0
for job in big mid; do
	[ $job = big ] && args="%(big)s" || args="%(mid)s"
	# shellcheck disable=SC2086
	fio --name=$job --filename=/dev/mapper/pc --direct=1 --ioengine=psync \
		--verify=crc32c --verify_fatal=1 --verify_only=1 $args \
		--output-format=terse > /tmp/fiov.$job 2>&1 && echo "B_ALONE_OK=$job" || rc=1
done
echo "B_ALONE_RC=$rc"
dmsetup remove pc
"""


def zero(img):
    size = img.stat().st_size
    os.truncate(img, 0)
    os.truncate(img, size)


def resync_run(vm):
    """The four boots; returns their results (boot 4's is not checked)."""
    sub = dict(wm=WM, big=BIG, mid=MID, cut_after=CUT_AFTER, left=LEFT_FIELD)
    opts = dict(pmem_size=PMEM_MB, pmem2_size=PMEM2_MB)
    one = vm.run(BOOT1 % sub, timeout=900, **opts)
    assert parse_status(one.value("STATUS1"))["dirty"] >= 32768    # 128 MiB, all dirty
    zero(vm.state / "pmem2.img")

    proc, log = vm.start(BOOT2 % sub, timeout=900, **opts)
    try:
        wait_for(log, lambda out: re.search(r"^CUT_READY=1$", out, re.M), 600)
    finally:
        vm.power_cut(proc)
    two = cut_console(log)
    st = {k: parse_status(re.search(r"^STATUS%d=(.*)$" % k, two, re.M).group(1))
          for k in (0, 1, 2)}
    # preconditions: the copy ran online under fio, and was cut past a mark
    assert "mirror_resync" in st[0]["health"] and st[0]["resync_left"] > 0, st[0]
    assert "mirror_resync" in st[1]["health"] and st[1]["resync_left"] > 0, st[1]
    assert "mirror_resync" in st[2]["health"], st[2]
    copied = st[2]["blocks"] - st[2]["resync_left"]
    assert CUT_AFTER <= copied < st[2]["blocks"], st[2]
    assert re.search(r"^FIO_OK=mid$", two, re.M), "fio during the copy"

    three = vm.run(BOOT3 % sub, timeout=900, check=False, **opts)
    zero(vm.state / "pmem.img")
    four = vm.run(BOOT4 % sub, timeout=900, check=False, **opts)
    return dict(one=one, st=st, copied=copied, three=three, four=four)


def verify_failed(r):
    """Did a verify of the pair (boot 3) or of B alone (boot 4) fail?"""
    three, four = r["three"], r["four"]
    assert four.rc == 0, four.tail(20)
    return (three.rc != 0 and "FAIL: fio verify-only" in three.output) or \
        four.value("B_ALONE_RC") == "1"


def test_online_copy_cut_resumed_then_the_old_half_lost(vm):
    r = resync_run(vm)
    three, four = r["three"], r["four"]
    assert three.rc == 0, three.tail(20)
    resumed = int(three.value("RESUMED_AT"))
    assert 1024 <= resumed < r["st"][2]["blocks"], (resumed, r["copied"])
    assert not verify_failed(r)
    assert three.value("DONE") == "1"
    s3 = parse_status(three.value("STATUS3"))
    assert s3["health"] == "ok" and s3["resync_left"] == 0, s3
    assert three.values("VERIFY_OK") == ["big", "mid"]
    assert four.rc == 0 and four.value("B_ALONE_RC") == "0", four.tail(20)
    assert four.values("B_ALONE_OK") == ["big", "mid"]
    print("online copy: fio wrote 4 MiB during it; cut after %d of %d blocks; the next start "
          "resumed at block %d (its last R3 mark) and ended, health ok; both fio jobs verified "
          "on the pair, then on half B alone with A lost"
          % (r["copied"], r["st"][2]["blocks"], resumed))


@pytest.mark.skipif(not LONG, reason="mutation testing: set PMC_LONG=1")
def test_online_copy_with_marks_ahead_of_it_is_caught(vm, tmp_path):
    """The mutant: R3 stores the whole cache as copied."""
    ko = build_mutant(tmp_path, "\t\t\tpmc_mirror_resync_progress(&mr->h[mr->holder ^ 1],\n"
                      "\t\t\t\t\t\t   slot);",
                      "\t\t\tpmc_mirror_resync_progress(&mr->h[mr->holder ^ 1],\n"
                      "\t\t\t\t\t\t   pc->meta.n_blocks);", "mirror.c")
    use_module(vm, ko)
    r = resync_run(vm)
    assert verify_failed(r), "mutant not caught: the pair and B alone verified both jobs"
    print("mutant caught (R3 marks ahead of the copy): pair verify rc %d, B alone verified %s"
          % (r["three"].rc, r["four"].values("B_ALONE_OK")))


# A pair that fio job %(job)s filled, half B then blanked and the pair
# loaded with `degraded` and `resync_rate %(rate)d`: the copy runs (the
# script goes on without waiting for it, as dm_create would).
START_COPY = MIRROR_PRELUDE + r"""
pmc_init2
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 6 %(wm)s mirror /dev/pmem1" || die pair
fio_job %(job)s /dev/mapper/pc %(args)s
dmsetup remove pc
dd if=/dev/zero of=/dev/pmem1 bs=1M count=4 oflag=direct 2>/dev/null || die "blank B"
dmesg -c > /dev/null
dmsetup create --noudevsync pc --table \
	"0 $sz pmemcache /dev/md0 /dev/pmem0 4096 9 %(wm)s resync_rate %(rate)d mirror /dev/pmem1 degraded" \
	|| die "pair with a blank B"
dmsetup mknodes pc
"""


# A half lost during the copy: the namespace unbound under the table while
# the copy runs (resync_rate 1: it takes minutes).
LOSE_DURING = START_COPY + r"""
status 0
unbind_pmem %(lose)s
sleep 2
dd if=/dev/mapper/pc of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null && echo READ_RC=0 || echo READ_RC=1
sleep 1
status 1
if [ %(lose)s = pmem1 ]; then
	fio_check %(job)s /dev/mapper/pc %(args)s
fi
dmsetup remove pc || die remove
"""


@pytest.mark.parametrize("lose", ["target", "holder"])
def test_a_half_lost_during_the_copy(vm, lose):
    """The target (B) lost: the copy stops, the cache runs on A
    (`mirror_degraded`), every block reads back. The holder (A) lost: B
    holds no whole cache, so the cache is `pmem_gone` (I/O fails); the
    copy has ended either way (no `mirror_resync`, `resync_left` 0), so
    that nothing waits for it (pmemcachectl replace)."""
    dev = "pmem1" if lose == "target" else "pmem0"
    res = vm.run(LOSE_DURING % dict(wm=WM, job="small", rate=1, lose=dev,
                                    args="--rw=randwrite --bs=4k --size=16m --offset=0"),
                 pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=900)
    s0, s1 = (parse_status(res.value("STATUS%d" % i)) for i in (0, 1))
    assert "mirror_resync" in s0["health"] and s0["resync_left"] > 0, s0   # precondition
    assert "mirror_resync" not in s1["health"] and s1["resync_left"] == 0, s1
    if lose == "target":
        assert s1["health"] == "mirror_degraded", s1
        assert res.value("READ_RC") == "0" and res.values("VERIFY_OK") == ["small"]
    else:
        assert "pmem_gone" in s1["health"] and res.value("READ_RC") == "1", s1
    print("%s lost during the copy: health %s, resync_left %d" % (lose, s1["health"],
                                                                 s1["resync_left"]))


# A new table while the copy runs (what `pmemcachectl set` of a table-only
# setting, or `replace` again, does): the new table's start resumes the
# copy at the last R3 mark the old one stored.
RELOAD_DURING = START_COPY + r"""
n=$(dmsetup status pc | awk '{print $4}')
while [ $((n - $(dmsetup status pc | awk '{print $%(left)d}'))) -lt 2500 ]; do sleep 1; done
status 1
dmsetup reload pc --table "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 6 %(wm)s mirror /dev/pmem1" \
	|| die reload
dmsetup suspend pc && dmsetup resume pc || die "swap the tables"
echo "STARTS=$(dmesg | grep -c 'online from block')"
echo "RESUMED_AT=$(dmesg | sed -n 's/.*online from block \([0-9]*\) of.*/\1/p' | tail -1)"
wait_resync pc
status 2
dmsetup remove pc
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem1 4096 7 %(wm)s mirror - degraded" || die "B alone"
fio_check %(job)s /dev/mapper/pc %(args)s
dmsetup remove pc
"""


def test_a_new_table_during_the_copy_resumes_it(vm):
    res = vm.run(RELOAD_DURING % dict(wm=WM, job="big", args=BIG, rate=4, left=LEFT_FIELD),
                 pmem_size=PMEM_MB,
                 pmem2_size=PMEM2_MB, timeout=900)
    s1, s2 = (parse_status(res.value("STATUS%d" % i)) for i in (1, 2))
    assert "mirror_resync" in s1["health"] and s1["resync_left"] > 0, s1    # precondition
    assert res.value("STARTS") == "2"
    resumed = int(res.value("RESUMED_AT"))
    assert 2048 <= resumed < s1["blocks"], resumed
    assert s2["health"] == "ok" and s2["resync_left"] == 0, s2
    assert res.values("VERIFY_OK") == ["big"]
    print("a new table during the copy: the old one had copied %d of %d blocks, the new one "
          "resumed at block %d and ended; B alone verified the 128 MiB"
          % (s1["blocks"] - s1["resync_left"], s1["blocks"], resumed))
