"""A grown origin keeps its cache (issue 29): mdadm --grow under a live
cache, then a reload with the new size and a load of the same cache
again.  Before, every load after the grow was refused ("origin size
differs"), with the dirty blocks stranded in pmem.  pmemcachectl check
and activate find the grown array by its UUID (the superblock keeps the
size at format).  A shrunk origin is still refused: blocks beyond its end
could never be written back.
"""
import re

from test_events import tool  # noqa: F401
from test_target import parse_status, pmemcache_module  # noqa: F401
from test_target import run
from vm import REPO

JOB_A = "--rw=randwrite --bs=4k --size=16m --offset=0"


def test_mdadm_grow_under_a_live_cache(vm, tool):
    res = run(vm, r"""
pmc_init
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean --level=raid1 \
	--raid-devices=2 --size=131072 /dev/vda /dev/vdb || die "mdadm --create"
s0=$(blockdev --getsz /dev/md0)
feat='4 high_watermark 100 low_watermark 100'
dm_create pc "0 $s0 pmemcache /dev/md0 /dev/pmem0 4096 $feat" || die create
fio_job a /dev/mapper/pc %(a)s
status 1
mdadm --grow /dev/md0 --size=max --assume-clean || die "mdadm --grow"
s1=$(blockdev --getsz /dev/md0)
echo "SECTORS=$s0,$s1"
# as pmemcachectl(8), "Growing the origin", says
n=$s1
dmsetup reload pc --table "$(dmsetup table pc | sed "s/^0 [0-9]* /0 $n /")" || die "reload after the grow"
dmsetup resume pc || die resume
status 2
b=$(( (s1 - 65536) * 512 ))
fio_job b /dev/mapper/pc --rw=randwrite --bs=4k --size=16m --offset=$b
dmsetup remove pc
dm_create pc "0 $s1 pmemcache /dev/md0 /dev/pmem0 4096 $feat" || die "load after the grow"
status 3
fio_check a /dev/mapper/pc %(a)s
# at the next boot: the superblock still records the size at format, the
# tool finds the grown array by its UUID and checks the blocks cached past
# the old end against it
dmsetup remove pc
rc=0; pmemcachectl check /dev/pmem0 > /tmp/o || rc=$?; echo "CHECK_RC=$rc"
echo "CHECK_PAST=$(sed -n 's/^ *past size *\([0-9]*\) .*/\1/p' /tmp/o)"
rc=0; pmemcachectl check /dev/pmem0 --origin /dev/md0 > /dev/null || rc=$?
echo "CHECK_ORIGIN_RC=$rc"
pmemcachectl activate /dev/pmem0 --name pc > /dev/null || die "activate after the grow"
echo "VERSION=$(pmemcachectl --version | tail -1)"
echo "TABLE=$(dmsetup table pc)"
fio_check b /dev/mapper/pc --rw=randwrite --bs=4k --size=16m --offset=$b
dmsetup message pc 0 flush || die flush
dmsetup remove pc
fio_check a /dev/md0 %(a)s
fio_check b /dev/md0 --rw=randwrite --bs=4k --size=16m --offset=$b
# shrunk below what the cache was made for: refused
mdadm --grow /dev/md0 --size=65536 || die "mdadm --grow smaller"
s2=$(blockdev --getsz /dev/md0)
dmsetup create --noudevsync pc --table "0 $s2 pmemcache /dev/md0 /dev/pmem0 4096" 2>/dev/null &&
	die "a shrunk origin was accepted"
echo SHRUNK_REFUSED=1
""" % dict(a=JOB_A), timeout=600)
    s0, s1 = map(int, res.value("SECTORS").split(","))
    assert s1 > s0
    st = {i: parse_status(res.value("STATUS%d" % i)) for i in (1, 2, 3)}
    assert st[1]["dirty"] > 0
    assert st[2]["dirty"] == st[1]["dirty"]
    assert st[3]["dirty"] >= st[1]["dirty"]
    assert res.values("VERIFY_OK") == ["a", "b", "a", "b"]
    # blocks cached past the old end, dirty: the activation below had work
    assert int(res.value("CHECK_PAST")) > 0 and res.value("CHECK_RC") == "4", res.tail()
    assert res.value("CHECK_ORIGIN_RC") == "4", res.tail()
    assert res.value("TABLE").startswith("0 %d pmemcache " % s1), res.value("TABLE")
    # pmemcachectl --version names the loaded target's version (target.c)
    tv = re.search(r"\.version = \{(\d+), (\d+), (\d+)\}",
                   (REPO / "dm-pmemcache/target.c").read_text()).groups()
    assert res.value("VERSION") == "target pmemcache %s" % ".".join(tv)
    assert res.value("SHRUNK_REFUSED") == "1"
    assert "origin size differs" in res.dmesg
