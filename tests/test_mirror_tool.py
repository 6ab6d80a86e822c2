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
"""
from test_events import tool  # noqa: F401
from test_mirror import MIRROR_PRELUDE, PMEM2_MB, PMEM_MB
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
