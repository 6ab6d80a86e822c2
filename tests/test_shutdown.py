"""Reboot and power-off with an active cache (issue 18).

The guest fills a 64 MiB cache over md with random writes until it is full
of dirty blocks and writeback runs, while a writer stamps 64 blocks with
numbered synchronous writes and logs each acknowledgement; then it calls
`reboot -f` or `poweroff -f` in the middle of all that. The target's
reboot notifier runs before md's: writeback and write-around stop, what
is in flight completes, and nothing of ours reaches md after md stopped
its writes. Checked: no kernel report on the console (md's md_write_inc
warning included), QEMU gone within 30 s of the call; the next boot finds
the array clean or resyncs it without a mismatch, reads back every
acknowledged write through the cache and again on md after a flush.
"""
import os
import re

import pytest

from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
import test_target_powercut as tp
from vm import REPO, GuestRun, check_reports, wait_down
import vm_mutants

LONG = os.environ.get("PMC_LONG", "0") not in ("", "0")
NBLOCKS = 64
HDD = "150:150M"
TABLE_ARGS = "4 high_watermark 90 low_watermark 80"
LAYOUT = {"raid5": ("raid5", 4), "raid1": ("raid1", 2)}

WRITER = r"""
pmc_init
md_make md0 %(level)s %(n)d a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
# the cache full of dirty blocks: random writes over 3x its size
fio --name=fill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
	--iodepth=8 --rw=randwrite --bs=4k --offset=1m --size=192m \
	--time_based --runtime=900 > /dev/null 2>&1 &
fio_pid=$!
(
""" + tp.WRITE_LOOP + r"""
) &
loop_pid=$!
i=0
while [ $i -lt 120 ]; do
	set -- $(dmsetup status pc)
	# blocks free wb_pfn_blocks wb_bounce_blocks: fields 4 6 16 18
	[ $((${6} * 20)) -lt ${4} ] && [ $((${16} + ${18})) -gt 0 ] && break
	sleep 1
	i=$((i + 1))
done
sleep 2
echo "STATUS1=$(dmsetup status pc)"
echo GOING_DOWN=1
%(down)s
"""

# How the guest goes down.  "detach" is what a shutdown sequence does
# (systemd-shutdown: kill every process, then remove dm devices, then
# reboot): the suspend and remove must end in bounded time on a full
# cache over slow members.
DOWN = {
    "reboot": "reboot -f",
    "poweroff": "poweroff -f",
    "detach": r"""kill -9 $loop_pid $fio_pid; killall -9 dd fio 2>/dev/null || true; wait
t0=$(date +%s)
# Like systemd-shutdown, wait (bounded) until the killed writers are gone:
# a dd inside a write keeps the device open until that write ends, and a
# write that reaches the device after the suspend would wait for a resume.
n=0
while pidof dd fio > /dev/null && [ $n -lt 20 ]; do
	sleep 1
	n=$((n + 1))
done
pidof dd fio > /dev/null && echo WRITERS_LEFT=1
echo "WRITERS_S=$(($(date +%s) - t0))"
# --retry: the last close may still be running (as systemd does)
dmsetup suspend pc && dmsetup remove --retry pc || echo DETACH_FAILED=1
echo "DETACH_S=$(($(date +%s) - t0))"
reboot -f""",
}


CHECK = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mdadm --assemble --run /dev/md0 %(devs)s 2>&1 || die assemble
echo "MD_STATE=$(mdadm --detail /dev/md0 | sed -n 's/^ *State : //p' | tr -d ' ')"
dm_create pc "$(pmc_table md0 '%(args)s')" || die reload
status 2
""" + tp.READ_BACK + r"""dmsetup message pc 0 flush || die flush
status 3
dmsetup remove pc
dd if=/dev/md0 of=/tmp/o bs=4096 count=%(nblocks)d iflag=direct 2>/dev/null || die "read md0"
cmp /tmp/r /tmp/o && echo ORIGIN_SAME=1
cmp /tmp/r /tmp/o > /dev/null || cmp /tmp/r /tmp/o | head -3
md=/sys/block/md0/md
while [ "$(cat $md/sync_action)" != idle ]; do sleep 1; done
echo check > $md/sync_action
sleep 1
while [ "$(cat $md/sync_action)" != idle ]; do sleep 1; done
echo "MISMATCH=$(cat $md/mismatch_cnt)"
echo DONE=1
"""

CASES = [("raid5", "hdd", "poweroff"), ("raid1", "fast", "reboot"), ("raid5", "hdd", "detach")]
if LONG:
    CASES = [(l, m, d) for l in LAYOUT for m in ("hdd", "fast") for d in DOWN]


@pytest.mark.parametrize("layout,members,down", CASES)
def test_going_down_with_writeback_running(vm, layout, members, down):
    level, n = LAYOUT[layout]
    throttle = HDD if members == "hdd" else None
    proc, boot = vm.start(PRELUDE + WRITER % dict(level=level, n=n, args=TABLE_ARGS, seed=4711,
                                                  nblocks=NBLOCKS, down=DOWN[down]),
                          timeout=900, disk_size=256, pmem_size=64, throttle=throttle)
    took = wait_down(proc, boot, 30)
    output = tp.cut_console(boot)        # fails on any kernel report, md's included
    run1 = GuestRun(None, "", output, None)
    st = parse_status(run1.value("STATUS1"))
    if down == "detach":
        assert not run1.values("WRITERS_LEFT"), run1.tail()
        assert not run1.values("DETACH_FAILED"), run1.tail()
        took = "%.1f s (writers gone after %s s, then suspend + remove: %s s in all)" % (
            took, run1.value("WRITERS_S"), run1.value("DETACH_S"))
    else:
        took = "%.1f s" % took
    assert st["wb_pfn_blocks"] + st["wb_bounce_blocks"] > 0, st
    assert st["free"] * 20 < st["blocks"], st
    allowed, nacked = tp.expected_sectors(output)
    assert nacked > 0

    devs = " ".join("/dev/vd%s" % l for l in "abcd"[:n])
    res = vm.run(PRELUDE + CHECK % dict(devs=devs, args=TABLE_ARGS, nblocks=NBLOCKS,
                                        nsec=NBLOCKS * 8),
                 timeout=900, disk_size=256, pmem_size=64)
    got = tp.read_back(res)
    assert len(got) == NBLOCKS * 8
    lost = tp.lost_writes(got, allowed)
    assert not lost, lost
    assert res.value("ORIGIN_SAME") == "1"
    assert parse_status(res.value("STATUS3"))["dirty"] == 0
    assert res.value("MISMATCH") == "0"
    print("%s %s %s: down in %s, %d acknowledged writes, md state at assembly %s, "
          "dirty at the next boot %d"
          % (layout, members, down, took, nacked, res.value("MD_STATE"),
             parse_status(res.value("STATUS2"))["dirty"]))


# Write-arounds in flight at the call: seq_bypass sends a sequential run
# around the cache to an origin that takes 3 s per request (dm-delay).
# The notifier must wait for them, woken when the last one completes
# (pmc_around_put()), and not sleep out its bound (PMC_SHUTDOWN_WAIT,
# 10 s): the guest is down in less than that.  Without the wake-up the
# wait ends only at the bound (the count is 0 by then: no warning).
SHUTDOWN_WAIT_S = int(re.search(r"#define PMC_SHUTDOWN_WAIT\s+\((\d+) \* HZ\)",
                                (REPO / "dm-pmemcache/pmemcache.h").read_text()).group(1))
AROUND = PRELUDE + r"""
insmod %(ko)s || die insmod
md_make md0 raid1 2 a
s0=$(blockdev --getsz /dev/md0)
dm_create slow "0 $s0 delay /dev/md0 0 3000" || die delay
dm_create pc "0 $s0 pmemcache /dev/mapper/slow /dev/pmem0 4096 6 seq_bypass 64 high_watermark 100 low_watermark 100" ||
	die create
dd if=/dev/zero of=/dev/mapper/pc bs=256k count=8 oflag=direct 2> /dev/null &
sleep 1
echo "STATUS=$(dmsetup status pc)"
pidof dd > /dev/null && echo DD_RUNNING=1
echo GOING_DOWN=1
poweroff -f
"""
NO_WAKE = ("\tif (unlikely(READ_ONCE(pc->shutting_down)))\n\t\twake_up_all(&pc->wb_wait);\n", "")


@pytest.mark.parametrize("module", ["product"] + (["mutant"] if LONG else []))
def test_going_down_waits_for_write_arounds_and_no_longer(vm, tmp_path, module):
    # the mutant: pmc_around_put() without its wake-up
    files, ko = vm_mutants.guest_module(
        tmp_path, *(("pmemcache.h", [NO_WAKE]) if module == "mutant" else ()))
    proc, boot = vm.start(AROUND % dict(ko=ko), files=files, timeout=300, disk_size=256,
                          pmem_size=64)
    took = wait_down(proc, boot, 30)
    run = GuestRun.load(None, boot)
    check_reports(run)
    # write-arounds were in flight at the call
    st = parse_status(run.value("STATUS"))
    assert st["write_around"] > 0 and run.value("DD_RUNNING") == "1", run.tail()
    assert "origin writes still in flight" not in run.console, run.console[-3000:]
    print("%s: down %.1f s after poweroff -f" % (module, took))
    if module == "mutant":
        assert took >= SHUTDOWN_WAIT_S, "the notifier without its wake-up was not seen"
    else:
        assert took < SHUTDOWN_WAIT_S, "the notifier slept out its bound"
