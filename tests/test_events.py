"""Events and health (issue 17): what an administrator hears about.

A cache over a dm origin that is switched to `error` and back:
- the first failed writeback logs one kernel line, raises a dm event
  (a `dmsetup wait` started before it returns) and status says
  `origin_failing`;
- writes that then fill the cache wait all of full_wait: `full` joins it;
- with the origin back, writeback succeeds and blocks are freed: both
  conditions end (each with an info line and an event), health is `ok`
  again, and the data written while the origin failed reads back from it.
"""
from test_target import parse_status, pmemcache_module, run  # noqa: F401


def test_failing_origin_raises_events_and_health(vm):
    res = run(vm, r"""
events() { dmsetup info -c --noheadings -o events pc; }
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
