"""pmemcachectl and a mirrored cache (issue 31, steps 1 and 5): create,
activate by identity, a half that cannot start alone, a degraded start.

Boot 1 (both NVDIMMs): `create --mirror /dev/pmem1` loads `mirror
<pmem1>`; fio writes dirty blocks; the device is removed. `create` on
half B alone is refused by the tool with its line (the module refuses it
too: alone it may be the stale half). `activate --all` finds the two
halves by their mirror info and creates one device with both; fio
verifies through it.

Boot 2 (pmem1 gone): `activate --all` does not start half A alone (it
cannot tell whether B ran alone since): exit 9 and its line. `create
--mirror missing --degraded --force` does (the administrator's word);
then, A knowing it ran alone, `activate --all` starts it alone by itself
(`mirror -`). fio verifies every block at each step.

`replace` (one boot, both NVDIMMs): half B's namespace is unbound under
the running cache (health mirror_degraded), then bound again and wiped
(a blank new half); `pmemcachectl replace pc --cache /dev/pmem1` reloads
the table with B as the mirror again, the resume copies A to it, health
ok; fio verifies; then B alone (`mirror - degraded`) holds every block;
then the pair again, and `detach` clears the superblocks of both halves,
as `remove` of a new pair does.
"""
from test_events import tool  # noqa: F401
from test_mirror import DEGRADED, MIRROR_PRELUDE, PMEM2_MB, PMEM_MB
from test_target import parse_status, pmemcache_module  # noqa: F401

JOB = "--rw=randwrite --bs=4k --size=8m --offset=0"
WM = "--high-watermark 100 --low-watermark 100"

BOTH = MIRROR_PRELUDE + r"""
pmc_init2
md_make md0 raid1 2 a
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 --mirror /dev/pmem1 %(wm)s \
	|| die "create --mirror"
echo "TABLE=$(dmsetup table pc)"
echo "PMEM1=$(cat /sys/block/pmem1/dev)"
fio_job small /dev/mapper/pc %(job)s
status 1
dmsetup remove pc
if pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem1 2>/tmp/e; then
	die "half B alone created"
fi
echo "HALF_RC=$(grep -c 'is a half of a mirrored cache' /tmp/e)"
pmemcachectl activate --all || die "activate --all"
# (fio_job and fio_check set $name and $dev)
cname=$(dmsetup ls --target pmemcache | cut -f1)
echo "ACTIVE=$(dmsetup ls --target pmemcache | wc -l)"
echo "TABLE2=$(dmsetup table $cname)"
fio_check small /dev/mapper/$cname %(job)s
dmsetup remove $cname
"""

ALONE = MIRROR_PRELUDE + r"""
pmc_init
[ -b /dev/pmem1 ] && die "pmem1 is there"
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
rc=0
pmemcachectl activate --all 2>/tmp/e || rc=$?
echo "ACTIVATE_RC=$rc"
echo "ACTIVATE_LINE=$(grep -c 'whose other half is not present' /tmp/e)"
echo "ACTIVE=$(dmsetup ls --target pmemcache | grep -vc 'No devices')"
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 --mirror missing --degraded \
	--force %(wm)s || die "create --mirror missing --degraded"
echo "TABLE3=$(dmsetup table pc)"
status 2
fio_check small /dev/mapper/pc %(job)s
dmsetup remove pc
pmemcachectl activate --all || die "activate --all, A knowing it ran alone"
cname=$(dmsetup ls --target pmemcache | cut -f1)
echo "TABLE4=$(dmsetup table $cname)"
fio_check small /dev/mapper/$cname %(job)s
dmsetup remove $cname
"""


def test_create_mirror_activate_the_pair_and_a_half_alone(vm, tool):
    sub = dict(job=JOB, wm=WM)
    both = vm.run(BOTH % sub, pmem_size=PMEM_MB, pmem2_size=PMEM2_MB, timeout=900)
    assert both.value("TABLE").endswith(" mirror " + both.value("PMEM1")), both.value("TABLE")
    assert parse_status(both.value("STATUS1"))["dirty"] > 0      # precondition
    assert both.value("HALF_RC") == "1"
    assert both.value("ACTIVE") == "1"
    assert both.value("TABLE2").endswith(" mirror " + both.value("PMEM1")), both.value("TABLE2")
    assert both.values("VERIFY_OK") == ["small"]
    alone = vm.run(ALONE % sub, pmem_size=PMEM_MB, timeout=900)
    assert alone.value("ACTIVATE_RC") == "9" and alone.value("ACTIVATE_LINE") == "1"
    assert alone.value("ACTIVE") == "0"
    assert alone.value("TABLE3").endswith(" mirror -"), alone.value("TABLE3")
    assert parse_status(alone.value("STATUS2"))["dirty"] > 0
    assert alone.value("TABLE4").endswith(" mirror -"), alone.value("TABLE4")
    assert alone.values("VERIFY_OK") == ["small", "small"]
    print("create --mirror: %s; half B alone refused by the tool; activate --all: one device "
          "on both halves; without B: activate refused (exit 9), --mirror missing --degraded "
          "started A, then activate started A alone; fio verified at each step"
          % both.value("TABLE"))


REPLACE = MIRROR_PRELUDE + r"""
pmc_init2
md_make md0 raid1 2 a
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 --mirror /dev/pmem1 %(wm)s \
	|| die "create --mirror"
fio_job small /dev/mapper/pc %(job)s
unbind_pmem pmem1
fio_check small /dev/mapper/pc %(job)s
status 1
rc=0
pmemcachectl replace pc --cache /dev/pmem0 2>/tmp/e || rc=$?
echo "SELF_RC=$rc"
# the NVDIMM back, wiped: a blank new half
echo "$ns" > /sys/bus/nd/drivers/nd_pmem/bind || die bind
[ -b /dev/pmem1 ] || die "no /dev/pmem1 after bind"
dd if=/dev/zero of=/dev/pmem1 bs=4096 count=1 oflag=direct conv=notrunc 2>/dev/null || die wipe
dmesg -c > /dev/null
rc=0
pmemcachectl replace pc --cache /dev/pmem1 || rc=$?
echo "REPLACE_RC=$rc"
echo "COPIED=$(dmesg | grep -c 'mirror: copying the half on')"
echo "TABLE=$(dmsetup table pc)"
echo "PMEM1=$(cat /sys/block/pmem1/dev)"
status 2
fio_check small /dev/mapper/pc %(job)s
dmsetup remove pc
dm_create pc "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem1 4096 %(degraded)s" \
	|| die "pmem1 alone"
status 3
fio_check small /dev/mapper/pc %(job)s
dmsetup remove pc
# the pair again (A stale: the resume copies B to it); detach clears both
dm_create pc "0 $(blockdev --getsz /dev/md0) pmemcache /dev/md0 /dev/pmem1 4096 2 mirror \
	/dev/pmem0" || die "the pair again"
pmemcachectl detach pc --quiet > /tmp/d || die "detach the pair"
echo "DETACHED=$(tr '\n' ' ' < /tmp/d)"
for h in pmem0 pmem1; do
	cmp -n 4096 /dev/$h /dev/zero > /dev/null && echo "CLEARED=$h"
done
fio_check small /dev/mapper/pc %(job)s
dmsetup remove pc
# a new pair on the blank halves; remove (flushed first) clears both too
pmemcachectl create pc2 --origin /dev/md0 --cache /dev/pmem0 --mirror /dev/pmem1 \
	|| die "create the pair on blank halves"
dd if=/dev/urandom of=/dev/mapper/pc2 bs=4k count=16 oflag=direct 2>/dev/null || die write
pmemcachectl remove pc2 > /tmp/d || die "remove the pair"
echo "REMOVED=$(tr '\n' ' ' < /tmp/d)"
for h in pmem0 pmem1; do
	cmp -n 4096 /dev/$h /dev/zero > /dev/null && echo "CLEARED2=$h"
done
"""


def test_replace_a_lost_half_with_a_blank_one(vm, tool):
    res = vm.run(REPLACE % dict(job=JOB, wm=WM, degraded=DEGRADED), pmem_size=PMEM_MB,
                 pmem2_size=PMEM2_MB, timeout=900)
    s1, s2, s3 = (parse_status(res.value("STATUS%d" % i)) for i in (1, 2, 3))
    assert s1["health"] == "mirror_degraded" and s1["dirty"] > 0, s1     # preconditions
    assert res.value("SELF_RC") == "1"          # the survivor is no new half
    assert res.value("REPLACE_RC") == "0" and res.value("COPIED") == "1"
    assert res.value("TABLE").endswith(" mirror " + res.value("PMEM1")), res.value("TABLE")
    assert s2["health"] == "ok" and s2["dirty"] == s1["dirty"], s2
    assert s3["dirty"] == s1["dirty"], s3
    assert res.values("VERIFY_OK") == ["small"] * 4
    # detach of the pair: the superblocks of both halves cleared
    assert res.values("CLEARED") == ["pmem0", "pmem1"], res.value("DETACHED")
    assert "superblocks of /dev/pmem1 and /dev/pmem0 are cleared" in res.value("DETACHED")
    assert res.values("CLEARED2") == ["pmem0", "pmem1"], res.value("REMOVED")
    print("replace: half B lost while running (%d dirty blocks), then back blank: "
          "replace copied A to it, health ok, and B alone holds every block (fio verify)"
          % s1["dirty"])
