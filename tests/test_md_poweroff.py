"""`poweroff -f` while md raid5/raid6 resyncs or recovers (issue 29).

The guest builds md0 over the virtio disks in one of two states:
"resync" (created without --assume-clean, raid5 with --force: a parity
resync, as after a power cut), or "recover" (created clean, then one
member failed, removed, wiped and added back: a recovery onto it).  fio
writes at random to md0, or through dm-pmemcache over md0 with writeback
running all the time; the md sync thread is kept busy (speed_limit_min
raised).  Then `poweroff -f`: processes keep running, and the kernel's
reboot notifiers stop md's writes (md_notify_reboot) while fio and the
sync thread are still at it.

Checked: QEMU is gone within DOWN_S seconds of the call, the console has
no kernel report (a hung-task report and md's md_write_inc() warning
included), and md stopped the array's writes rather than giving up on it
after its 10 s bound (core-patches 0020's warning).  A guest still up
after HANG_DIAG_S seconds prints the state of md0 and the stacks of its
threads and of `poweroff` on the script's output, for the failure
message.

`make test` runs four cases that cover each level, state and writer
twice over; PMC_LONG=1 runs all eight, PMC_MD_POWEROFF_ROUNDS times each
(default 3).  Then an array that cannot stop, with and without the cache
(below): md must give up on it after its bound.
"""
import os

import pytest

from test_target import PRELUDE, build_module, parse_status, MOD
from vm import GuestRun, check_reports, wait_down

LONG = os.environ.get("PMC_LONG", "0") not in ("", "0")
ROUNDS = int(os.environ.get("PMC_MD_POWEROFF_ROUNDS", "3" if LONG else "1"))
# Seconds from the guest's GOING_DOWN=1 until QEMU must be gone.  A hung
# task is reported after 20 to 40 s (CONFIG_DEFAULT_HUNG_TASK_TIMEOUT=20);
# wait long enough for the report to be on the console.
DOWN_S = 60
HANG_DIAG_S = 45
LEVELS = {"raid5": 4, "raid6": 5}

CASES = [("raid5", "resync", "fio"), ("raid6", "recover", "fio"),
         ("raid5", "recover", "cache"), ("raid6", "resync", "cache")]
if LONG:
    CASES = [(lv, st, w) for lv in LEVELS for st in ("resync", "recover")
             for w in ("fio", "cache")]

SCRIPT = r"""
level=%(level)s n=%(n)d state=%(state)s writer=%(writer)s
[ $writer = cache ] && pmc_init
devs=
for l in a b c d e f; do
	[ $(echo $devs | wc -w) -lt $n ] && devs="$devs /dev/vd$l"
done
last=${devs##* }
# keep the sync thread busy while fio writes (md lowers it to the minimum
# speed when the members see other I/O)
echo 20000 > /proc/sys/dev/raid/speed_limit_min
echo 200000 > /proc/sys/dev/raid/speed_limit_max
if [ $state = resync ]; then
	# raid5 without --force would build the last member as a spare
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --quiet --metadata=1.2 --force \
		--level=$level --raid-devices=$n --chunk=64 $devs 2>&1 || die create
else
	# shellcheck disable=SC2086
	mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean \
		--level=$level --raid-devices=$n --chunk=64 $devs 2>&1 || die create
	mdadm /dev/md0 --fail $last 2>&1 || die fail
	i=0
	until mdadm /dev/md0 --remove $last > /dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 20 ] || die remove
		sleep 0.5
	done
	mdadm --zero-superblock $last 2>&1 || die zero
	mdadm /dev/md0 --add $last 2>&1 || die add
fi
dev=/dev/md0
if [ $writer = cache ]; then
	dm_create pc "$(pmc_table md0 '4 high_watermark 1 low_watermark 0')" || die create
	dev=/dev/mapper/pc
fi
fio --name=rand --filename=$dev --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randwrite --bsrange=4k-64k --size=160m --time_based --runtime=900 \
	> /dev/null 2>&1 &
fio --name=seq --filename=$dev --direct=1 --ioengine=libaio --iodepth=4 \
	--rw=write --bs=128k --offset=160m --size=32m --time_based --runtime=900 \
	> /dev/null 2>&1 &
sleep %(busy)d
md=/sys/block/md0/md
echo "SYNC_ACTION=$(cat $md/sync_action)"
echo "SYNC_COMPLETED=$(cat $md/sync_completed)"
echo "STRIPES=$(cat $md/stripe_cache_active)"
[ $writer = cache ] && echo "STATUS=$(dmsetup status pc)"
pidof fio > /dev/null && echo FIO_RUNNING=1
# If the guest is still up long after poweroff -f, say where it hangs.
hung_dump() {
	echo "HUNG: $1: array_state $(cat $md/array_state) sync_action $(cat $md/sync_action)" \
		"stripe_cache_active $(cat $md/stripe_cache_active)"
	for p in /proc/[0-9]*; do
		c=$(cat $p/comm 2>/dev/null) || continue
		case "$c" in
		md0_*|poweroff|kworker*|fio|dmsetup)
			s=$(cut -d' ' -f3 $p/stat 2>/dev/null) || continue
			[ "$s" = D ] || [ "${c#md0_}" != "$c" ] || [ $c = poweroff ] || continue
			echo "HUNG: task $c (${p#/proc/}) state $s"
			sed 's/^/HUNG:   /' $p/stack 2>/dev/null || true ;;
		esac
	done
}
(
	sleep %(diag)d
	hung_dump "after %(diag)d s"
	# Wake md0's thread (raid5d) once, from the safemode timer: a
	# shorter safe_mode_delay re-arms it, without md's reconfig_mutex.
	echo 0.001 > $md/safe_mode_delay
	sleep 3
	hung_dump "3 s after waking md0_raid*"
) &
echo GOING_DOWN=1
poweroff -f
"""


@pytest.fixture(scope="module")
def module_built():
    """dm-pmemcache.ko for the cases with the cache, built on first use
    (the cases without it also run on a kernel without the core patches)."""
    state = {}

    def get():
        if "ok" not in state:
            proc = build_module()
            state["ok"] = proc.returncode == 0 and (MOD / "dm-pmemcache.ko").exists()
            state["err"] = proc.stderr
        assert state["ok"], state["err"]
    return get


def hang_report(console, output):
    """The hung-task reports on the console and what the guest printed
    about md0 and its threads while it hung."""
    lines = console.splitlines()
    first = next((i for i, l in enumerate(lines) if "blocked for more than" in l),
                 max(0, len(lines) - 40))
    return "--- console (hung-task reports) ---\n%s\n--- guest diagnostics ---\n%s" % (
        "\n".join(lines[first:first + 80]),
        "\n".join(l for l in output.splitlines() if l.startswith(("HUNG:", "SYNC_", "STRIPES"))))


@pytest.mark.parametrize("rnd", range(ROUNDS))
@pytest.mark.parametrize("level,state,writer", CASES)
def test_poweroff_while_md_syncs(vm, module_built, level, state, writer, rnd):
    if writer == "cache":
        module_built()
    for f in vm.state.glob("*.img"):
        f.unlink()
    script = PRELUDE + SCRIPT % dict(level=level, n=LEVELS[level], state=state,
                                     writer=writer, busy=6, diag=HANG_DIAG_S)
    proc, boot = vm.start(script, timeout=600, disk_size=256, pmem_size=64)
    took = wait_down(proc, boot, DOWN_S, hang_report)
    run = GuestRun.load(None, boot)
    try:
        check_reports(run)       # hung-task reports included
    except AssertionError as e:
        raise AssertionError("%s\n--- guest diagnostics ---\n%s" % (e, "\n".join(
            l for l in run.output.splitlines() if l.startswith("HUNG:")))) from None
    assert "FAIL:" not in run.output, run.tail()
    # the case is what it claims: md was syncing and fio writing
    assert run.value("SYNC_ACTION") == ("resync" if state == "resync" else "recover"), run.tail()
    assert run.value("FIO_RUNNING") == "1", run.tail()
    # md stopped the array's writes, it did not give up on it after
    # MD_REBOOT_TIMEOUT (core-patches 0020)
    assert "writes not stopped within" not in run.console, run.tail()
    print("%s %s %s: down %.1f s after poweroff -f (sync %s, %s active stripes)"
          % (level, state, writer, took, run.value("SYNC_COMPLETED"), run.value("STRIPES")))


# An array that cannot stop its writes: one member never completes a
# request (a dm-linear member suspended with md's writes queued on it).
# md's reboot notifier must give up on it after MD_REBOOT_TIMEOUT and the
# machine go down (core-patches 0020); without that patch it stays up in
# D state for ever (the kernel of the series up to 0019, which
# `FROM=19 make check-series` leaves in $KCACHE/build-check: run this test
# with KBUILD set to it, and the guest does not end within DOWN_S).  With the cache, its own notifier's bounded wait for
# writeback (PMC_SHUTDOWN_WAIT) comes first; the cache is large enough
# never to fill, so the writes stuck on the member are writeback's own
# (a full cache writes through in a work item that would wait for the
# member, in D state, and be reported as a hung task).
STUCK = r"""
writer=%(writer)s
[ $writer = cache ] && pmc_init
devs=
for l in a b c d; do
	echo "0 $(blockdev --getsz /dev/vd$l) linear /dev/vd$l 0" |
		dmsetup create --noudevsync m$l || die "dm-linear m$l"
	devs="$devs /dev/mapper/m$l"
done
# shellcheck disable=SC2086
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean \
	--level=raid5 --raid-devices=4 --chunk=64 $devs 2>&1 || die create
dev=/dev/md0
if [ $writer = cache ]; then
	dm_create pc "$(pmc_table md0 '4 high_watermark 1 low_watermark 0')" || die create
	dev=/dev/mapper/pc
fi
fio --name=rand --filename=$dev --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=randwrite --bs=4k --size=64m --time_based --runtime=900 \
	> /dev/null 2>&1 &
# until writes reach md (fio, or the cache's writeback, starts slowly on
# a debug kernel), at most 60 s
sleep 3
n=0
while [ "$(cat /sys/block/md0/md/stripe_cache_active)" = 0 ] && [ $n -lt 120 ]; do
	sleep 0.5
	n=$((n + 1))
done
# writeback at full speed (a flush that never ends: it waits for the member)
[ $writer = cache ] && { dmsetup message pc 0 flush > /dev/null 2>&1 & sleep 1; }
# From here every request to md's last member waits in dm until a resume
# that never comes.
dmsetup suspend --noflush --nolockfs md 2>&1 || die "suspend md"
sleep 3
md=/sys/block/md0/md
echo "STRIPES=$(cat $md/stripe_cache_active)"
echo "MEMBER=$(dmsetup info md | sed -n 's/^State: *//p')"
[ $writer = cache ] && echo "STATUS=$(dmsetup status pc)"
# where the writers wait (tasks in D state)
for p in /proc/[0-9]*; do
	[ "$(cut -d' ' -f3 $p/stat 2>/dev/null)" = D ] || continue
	echo "DTASK: $(cat $p/comm) ${p#/proc/}"
	sed 's/^/DTASK:   /' $p/stack 2>/dev/null || true
done
echo GOING_DOWN=1
poweroff -f
"""
GIVE_UP = "md: md0: writes not stopped within 10 s at reboot"


@pytest.mark.parametrize("writer", ["fio", "cache"])
def test_poweroff_gives_up_on_an_array_that_cannot_stop(vm, module_built, writer):
    if writer == "cache":
        module_built()
    for f in vm.state.glob("*.img"):
        f.unlink()
    proc, boot = vm.start(PRELUDE + STUCK % dict(writer=writer), timeout=600,
                          disk_size=256, pmem_size=192)
    took = wait_down(proc, boot, DOWN_S)
    run = GuestRun.load(None, boot)
    # With the cache, writeback's work waits for the dead member, in md's
    # stripe cache (raid5_get_active_stripe, as any writer of the array)
    # or in its origin flush, and is reported as a hung task before the
    # machine is down; the script prints where (DTASK lines).
    check_reports(run, allow=r"INFO: task kworker/\S+ blocked for more than"
                  if writer == "cache" else None)
    assert "FAIL:" not in run.output, run.tail()
    # the array could not stop: writes were stuck on the suspended member
    assert int(run.value("STRIPES")) > 0, run.tail()
    assert run.value("MEMBER") == "SUSPENDED", run.tail()
    if writer == "cache":
        assert parse_status(run.value("STATUS"))["dirty"] > 0, run.tail()
        # writeback had writes stuck on the member: the cache's notifier
        # gave up waiting for them first
        assert "shutdown: origin writes still in flight after 10 s" in run.console, \
            run.console[-3000:]
    # md gave up on it after its bound, and the machine went down
    assert GIVE_UP in run.console, run.console[-3000:]
    print("%s: down %.1f s after poweroff -f, md gave up on md0" % (writer, took))
