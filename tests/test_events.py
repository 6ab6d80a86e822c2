"""Events and health (issue 17): what an administrator hears about.

A cache over a dm origin that is switched to `error` and back:
- the first failed writeback logs one kernel line, raises a dm event
  (a `dmsetup wait` started before it returns) and status says
  `origin_failing`;
- writes that then fill the cache wait all of full_wait: `full` joins it;
- with the origin back, writeback succeeds and blocks are freed: both
  conditions end (each with an info line and an event), health is `ok`
  again, and the data written while the origin failed reads back from it.

`pmemcachectl monitor` over the same sequence: each change of the health
is one line (syslog, stderr with -f) and one run of --program, --oneshot
returns at the first one, SIGTERM stops a monitor, the removal of the
last named device ends one, and the monitor of every device watches one
created after it started.
"""
import re

import pytest

from test_target import parse_status, pmemcache_module, run  # noqa: F401
from vm import REPO, build


# shell helpers of the guest scripts below
HELPERS = r"""
health() { dmsetup status pc | awk '{print $NF}'; }
# woken PID NAME: print NAME=<exit status> of the dmsetup wait PID, or
# NAME=timeout if no event woke it within 60 s
woken() {
	n=0
	while kill -0 $1 2>/dev/null; do
		[ $n -lt 120 ] || { kill $1; echo "$2=timeout"; return 0; }
		sleep 0.5
		n=$((n + 1))
	done
	wait $1 && echo "$2=0" || echo "$2=$?"
}
# wait_health WORD: until status's health is WORD (at most 60 s)
wait_health() {
	n=0
	while [ "$(health)" != "$1" ]; do
		[ $n -lt 120 ] || die "health stays $(health), not $1"
		sleep 0.5
		n=$((n + 1))
	done
}
"""


def test_failing_origin_raises_events_and_health(vm):
    res = run(vm, HELPERS + r"""
events() { dmsetup info -c --noheadings -o events pc; }
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create org "0 $sz linear /dev/md0 0" || die org
dm_create pc "0 $sz pmemcache /dev/mapper/org /dev/pmem0 4096 6 high_watermark 0 low_watermark 0 full_wait 300" || die create
status 1
ev=$(events)
dmsetup wait pc $ev &
w1=$!
dmsetup suspend org && dmsetup reload org --table "0 $sz error" && dmsetup resume org || die "org error"

# one acknowledged block: its writeback fails
dd if=/dev/urandom of=/tmp/b bs=4096 count=1 2>/dev/null
dd if=/tmp/b of=/dev/mapper/pc bs=4096 seek=5 count=1 oflag=direct 2>/dev/null || die "write to pmem"
woken $w1 WAIT1
wait_health origin_failing
status 2
ev=$(events)

# the cache full of dirty blocks: later writes wait full_wait, then fail
n=$(dmsetup status pc | awk '{print $4}')
fio --name=fill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
	--iodepth=8 --rw=write --bs=4k --offset=1m --size=$(( (n + 64) * 4 ))k \
	--continue_on_error=all > /dev/null 2>&1 || true
wait_health origin_failing,full
status 3
[ "$(events)" -gt "$ev" ] && echo EVENT_FULL=1
ev=$(events)

# the origin back: writeback drains, blocks are freed, both conditions end
dmsetup wait pc $ev &
w2=$!
dmsetup suspend org && dmsetup reload org --table "0 $sz linear /dev/md0 0" && dmsetup resume org || die "org back"
timeout 120 dmsetup message pc 0 flush || die flush
woken $w2 WAIT2
dd if=/dev/zero of=/dev/mapper/pc bs=4096 seek=6 count=1 oflag=direct 2>/dev/null || die "write after"
wait_health ok
status 4
dmsetup remove pc
dmsetup remove org
dd if=/dev/md0 of=/tmp/o bs=4096 skip=5 count=1 iflag=direct 2>/dev/null
cmp /tmp/o /tmp/b && echo BLOCK_ON_ORIGIN=1
""", pmem_size=16, timeout=600)
    s = {i: parse_status(res.value("STATUS%d" % i)) for i in range(1, 5)}
    assert s[1]["health"] == "ok", s[1]
    assert res.value("WAIT1") == "0"          # the event woke the waiter
    assert s[2]["health"] == "origin_failing" and s[2]["wb_errors"] > 0, s[2]
    assert s[3]["health"] == "origin_failing,full" and s[3]["full_timeouts"] > 0, s[3]
    assert res.value("EVENT_FULL") == "1"
    assert res.value("WAIT2") == "0"
    assert s[4]["health"] == "ok" and s[4]["dirty"] == 0, s[4]
    assert res.value("BLOCK_ON_ORIGIN") == "1"
    log = res.dmesg
    assert "pc: origin write failed (-5): dirty blocks kept" in log, log[-3000:]
    assert "pc: cache full: writes wait full_wait" in log, log[-3000:]
    assert "pc: origin_failing ended" in log and "pc: full ended" in log, log[-3000:]


@pytest.fixture(scope="module")
def tool():
    """userspace/pmemcachectl, which vm.guest_files() puts in the guest."""
    p = build(["make", "-C", str(REPO / "userspace"), "pmemcachectl"])
    assert p.returncode == 0, p.stdout + p.stderr


MONITOR = HELPERS + r"""
# told WORDS [FILE]: until the monitor of all devices (or the one writing
# FILE) has told WORDS (at most 60 s), so that it sees each state before
# the next one comes
told() {
	n=0
	while ! grep -q "$1" ${2:-/tmp/mon.err} 2>/dev/null; do
		[ $n -lt 120 ] || die "the monitor did not tell '$1' (${2:-/tmp/mon.err})"
		sleep 0.5
		n=$((n + 1))
	done
}
syslogd -O /tmp/messages && sleep 0.5 && [ -S /dev/log ] && echo SYSLOGD=1
printf '#!/bin/sh\necho "$*" >> /tmp/prog.log\n' > /tmp/prog
chmod +x /tmp/prog
pmc_init
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
dm_create org "0 $sz linear /dev/md0 0" || die org
dm_create pc "0 $sz pmemcache /dev/mapper/org /dev/pmem0 4096 6 high_watermark 0 low_watermark 0 full_wait 300" || die create

set +e
pmemcachectl monitor nosuch --oneshot 2>/tmp/e; echo "NOSUCH_RC=$?"
echo "NOSUCH_ERR=$(cat /tmp/e)"
pmemcachectl monitor org --oneshot 2>/tmp/e; echo "NOTOURS_RC=$?"
echo "NOTOURS_ERR=$(cat /tmp/e)"
set -e
# every pmemcache device (org is linear: not watched), in the foreground
pmemcachectl monitor -f --program /tmp/prog 2>/tmp/mon.err &
mon=$!
pmemcachectl monitor pc --oneshot 2>/tmp/one.err &
one=$!
pmemcachectl monitor pc -f 2>/tmp/term.err &
term=$!
# each has started its watcher (which then looks at once)
for f in /tmp/mon.err /tmp/one.err /tmp/term.err; do
	told "monitoring 1 pmemcache device" $f
done
sleep 1
kill -0 $one 2>/dev/null && echo ONESHOT_WAITS=1

dmsetup suspend org && dmsetup reload org --table "0 $sz error" && dmsetup resume org || die "org error"
dd if=/dev/urandom of=/dev/mapper/pc bs=4096 seek=5 count=1 oflag=direct 2>/dev/null || die "write to pmem"
woken $one ONESHOT
wait_health origin_failing
told "degraded: health origin_failing "
n=$(dmsetup status pc | awk '{print $4}')
fio --name=fill --filename=/dev/mapper/pc --direct=1 --ioengine=libaio \
	--iodepth=8 --rw=write --bs=4k --offset=1m --size=$(( (n + 64) * 4 ))k \
	--continue_on_error=all > /dev/null 2>&1 || true
wait_health origin_failing,full
told "health origin_failing,full "
dmsetup suspend org && dmsetup reload org --table "0 $sz linear /dev/md0 0" && dmsetup resume org || die "org back"
timeout 120 dmsetup message pc 0 flush || die flush
dd if=/dev/zero of=/dev/mapper/pc bs=4096 seek=6 count=1 oflag=direct 2>/dev/null || die "write after"
wait_health ok
told "recovered: health ok "
kill -TERM $term
woken $term TERM
dmsetup remove pc
told "pc: gone: "
# the monitor of every device watches one created after it started
dm_create pc2 "0 $sz pmemcache /dev/mapper/org /dev/pmem0 4096 6 high_watermark 0 low_watermark 0 full_wait 300" || die "create pc2"
told "pc2: new pmemcache device, watched"
pmemcachectl monitor pc2 -f 2>/tmp/named.err &
named=$!
dmsetup suspend org && dmsetup reload org --table "0 $sz error" && dmsetup resume org || die "org error 2"
dd if=/dev/urandom of=/dev/mapper/pc2 bs=4096 seek=7 count=1 oflag=direct 2>/dev/null || die "write to pc2"
told "pc2: degraded: health origin_failing "
dmsetup suspend org && dmsetup reload org --table "0 $sz linear /dev/md0 0" && dmsetup resume org || die "org back 2"
timeout 120 dmsetup message pc2 0 flush || die "flush pc2"
dd if=/dev/zero of=/dev/mapper/pc2 bs=4096 seek=8 count=1 oflag=direct 2>/dev/null || die "write after 2"
told "pc2: recovered: health ok "
kill -TERM $mon
woken $mon MONITOR
dmsetup remove pc2
woken $named NAMED
dmsetup remove org
sed 's/^/MON=/' /tmp/mon.err
sed 's/^/ONE=/' /tmp/one.err
sed 's/^/TERMERR=/' /tmp/term.err
sed 's/^/NAMEDERR=/' /tmp/named.err
sed 's/^/PROG=/' /tmp/prog.log
grep pmemcachectl /tmp/messages | sed 's/^/SYSLOG=/' || true
echo DONE=1
"""

CHANGE = re.compile(r"^pmemcachectl\[\d+\]: pc2?: (degraded|changed|recovered): health (\S+) "
                    r"\((?:was (\S+)|at start)(?:; began (\S+))?(?:; ended (\S+))?\)$")


def test_monitor_tells_each_health_change(vm, tool):
    res = run(vm, MONITOR, pmem_size=16, timeout=600)
    assert res.value("DONE") == "1"
    assert res.value("NOSUCH_RC") == "2", res.value("NOSUCH_ERR")
    assert "nosuch: no such device-mapper device" in res.value("NOSUCH_ERR")
    assert res.value("NOTOURS_RC") == "2", res.value("NOTOURS_ERR")
    assert "org: not a pmemcache device" in res.value("NOTOURS_ERR")
    # --oneshot: waited while the health was ok, returned 0 at the first change
    assert res.value("ONESHOT_WAITS") == "1"
    assert res.value("ONESHOT") == "0"
    assert res.values("ONE")[-1].endswith(
        "pc: degraded: health origin_failing (was ok; began origin_failing)"), res.values("ONE")
    # SIGTERM: a clean stop
    assert res.value("TERM") == "0"
    assert res.values("TERMERR")[-1].endswith(": monitor stopped"), res.values("TERMERR")
    # the removal of its only device ends the monitor of named devices
    assert res.value("NAMED") == "0"
    assert res.values("NAMEDERR")[-2].endswith(": pc2: gone: removed or detached (health was ok)")
    assert res.values("NAMEDERR")[-1].endswith(": monitor stopped"), res.values("NAMEDERR")
    # the monitor of every device: pc told until its removal, then pc2,
    # created after it started, until SIGTERM stopped it
    assert res.value("MONITOR") == "0"
    mon = res.values("MON")
    assert mon[0].endswith(": monitoring 1 pmemcache device and those created later"), mon
    assert mon[-1].endswith(": monitor stopped"), mon
    pc = [line for line in mon if ": pc: " in line]
    assert pc[-1].endswith(": pc: gone: removed or detached (health was ok)"), mon
    changes = [CHANGE.match(line) for line in pc[:-1]]
    assert changes and all(changes), mon
    events = [(m.group(1), m.group(2)) for m in changes]
    # told in order, none lost: each line starts where the one before ended
    assert events[0] == ("degraded", "origin_failing"), events
    assert changes[0].group(3) == "ok"
    for a, b in zip(changes, changes[1:]):
        assert b.group(3) == a.group(2), mon
    assert ("changed", "origin_failing,full") in events, events
    assert events[-1] == ("recovered", "ok"), events
    pc2 = [line for line in mon if ": pc2: " in line]
    assert pc2[0].endswith(": pc2: new pmemcache device, watched"), mon
    changes2 = [CHANGE.match(line) for line in pc2[1:]]
    assert all(changes2) and [(m.group(1), m.group(2)) for m in changes2] == [
        ("degraded", "origin_failing"), ("recovered", "ok")], mon
    # --program: EVENT NAME HEALTH, once per line, in the same order
    prog = res.values("PROG")
    assert prog == (["%s pc %s" % e for e in events] + ["gone pc -"] +
                    ["degraded pc2 origin_failing", "recovered pc2 ok"]), (prog, events)
    if res.values("SYSLOGD") == ["1"]:      # busybox syslogd came up
        log = "\n".join(res.values("SYSLOG"))
        assert "pc: degraded: health origin_failing (was ok; began origin_failing)" in log, log
        assert "pc: recovered: health ok" in log, log
