"""One pmem range, one owner (issue 29).

dm core opens the devices of every table with one shared holder, so the
block layer lets two targets use the same pmem.  Before claim.c, a table
with two pmemcache segments on one pmem device was accepted, and a write
to one segment overwrote the other's cached block: an acknowledged write
lost.  Every way one pmem range (or one origin range) can be owned twice
must now be refused with one line, and leave no device behind.
"""
from test_bad_input import mbr
from test_target import PRELUDE, pmemcache_module  # noqa: F401
from test_target import run as run_target

# 64 MiB partitions of pmem0 (MBR written by the guest script).
P1, P2, P3 = 2048, 133120, 264192
PART_SECTORS = 131072

# case -> the lines the kernel may give for it.  The block layer refuses
# some overlaps itself: a whole disk cannot be opened while a partition of
# it is held (dm's lookup then fails with -EBUSY), and a dm-linear over
# pmem is not a synchronous DAX device.
OURS = "pmem device overlaps the cache of another device"
REFUSED = {
    "two_segments_one_origin": ("pmem device overlaps the cache of another target of this table",),
    "two_segments_one_pmem": ("pmem device overlaps the cache of another target of this table",),
    "two_devices_one_pmem": (OURS,),
    "origin_cached_twice": ("origin is already cached by another device",),
    "pmem_as_origin": ("pmem device overlaps the origin of another pmemcache target",),
    "origin_over_own_pmem": ("pmem device and origin overlap", "Origin device lookup failed"),
    "linear_over_pmem": (OURS, "pmem device is not synchronous"),
    "reload_other_pmem": ("a reload may not change a live cache's pmem device or origin",),
    "whole_namespace": (OURS, "pmem device lookup failed"),
}

SCRIPT = r"""
pmc_init
dd if=/test/mbr of=/dev/pmem0 bs=512 count=1 conv=notrunc 2>/dev/null
blockdev --rereadpt /dev/pmem0 || die rereadpt
for p in 1 2 3; do [ -b /dev/pmem0p$p ] || die "no /dev/pmem0p$p"; done
md_make md0 raid1 2 a
md_make md1 raid1 2 c
s0=$(blockdev --getsz /dev/md0)
h=$((s0 / 2))
dmesg -n 1

# refuse CASE NAME TABLE: the table must be refused and leave no device.
# Accepted, the two-segment tables are also checked for mixed data.
refuse() {
	case=$1 name=$2 tbl=$3
	dmesg -c > /dev/null
	if printf '%b' "$tbl" | dmsetup create --noudevsync "$name" 2>/dev/null; then
		echo "ACCEPTED=$case"
		if [ "$name" = two ]; then
			dmsetup mknodes two
			printf 'A%.0s' $(seq 4096) | dd of=/dev/mapper/two bs=4096 count=1 oflag=direct 2>/dev/null
			printf 'B%.0s' $(seq 4096) | dd of=/dev/mapper/two bs=4096 seek=$((h / 8)) count=1 oflag=direct 2>/dev/null
			c=$(dd if=/dev/mapper/two bs=4096 count=1 iflag=direct 2>/dev/null | head -c 1)
			echo "FIRST_BLOCK_READS=$case:$c"
		fi
		dmsetup remove "$name"
		return
	fi
	dmsetup info "$name" > /dev/null 2>&1 && echo "LEFT=$case"
	echo "REFUSED=$case"
	dmesg -c | grep 'device-mapper: table' | sed "s/^/KLINE=$case:/"
}

refuse two_segments_one_origin two \
	"0 $h pmemcache /dev/md0 /dev/pmem0p1 4096 1 format\n$h $h pmemcache /dev/md0 /dev/pmem0p1 4096\n"
refuse two_segments_one_pmem two \
	"0 $h pmemcache /dev/md0 /dev/pmem0p1 4096 1 format\n$h $h pmemcache /dev/md1 /dev/pmem0p1 4096\n"

# one live cache: md0 on p1
dm_create pc "0 $s0 pmemcache /dev/md0 /dev/pmem0p1 4096 1 format" || die create
printf 'C%.0s' $(seq 4096) | dd of=/dev/mapper/pc bs=4096 count=1 oflag=direct 2>/dev/null
refuse two_devices_one_pmem pc2 "0 $s0 pmemcache /dev/md1 /dev/pmem0p1 4096\n"
refuse origin_cached_twice pc2 "0 $s0 pmemcache /dev/md0 /dev/pmem0p2 4096 1 format\n"
refuse pmem_as_origin pc2 "0 $PART pmemcache /dev/pmem0p1 /dev/pmem0p2 4096 1 format\n"
refuse origin_over_own_pmem pc2 "0 $PART pmemcache /dev/pmem0 /dev/pmem0p3 4096 1 format\n"
dmsetup create --noudevsync lin --table "0 $PART linear /dev/pmem0p1 0" || die "linear over p1"
refuse linear_over_pmem pc2 "0 $s0 pmemcache /dev/md1 /dev/mapper/lin 4096 1 format\n"
dmsetup remove lin

# reloads: the same table again is fine, another pmem for the origin is not
dmesg -c > /dev/null
dmsetup reload pc --table "$(dmsetup table pc)" || die "reload of the same table"
dmsetup resume pc || die resume
echo RELOAD_SAME=ok
if dmsetup reload pc --table "0 $s0 pmemcache /dev/md0 /dev/pmem0p2 4096 1 format" 2>/dev/null; then
	echo "ACCEPTED=reload_other_pmem"
	dmsetup clear pc
else
	echo "REFUSED=reload_other_pmem"
	dmesg -c | grep 'device-mapper: table' | sed "s/^/KLINE=reload_other_pmem:/"
fi
c=$(dd if=/dev/mapper/pc bs=4096 count=1 iflag=direct 2>/dev/null | head -c 1)
echo "PC_BLOCK0=$c"

refuse whole_namespace pc2 "0 $s0 pmemcache /dev/md1 /dev/pmem0 4096 1 format\n"
echo "DEVICES=$(dmsetup ls | awk '{print $1}' | sort | tr '\n' ' ')"
dmsetup remove pc
"""


def test_one_pmem_range_or_origin_range_is_never_owned_twice(vm, tmp_path):
    (tmp_path / "mbr").write_bytes(
        mbr([(P1, PART_SECTORS), (P2, PART_SECTORS), (P3, PART_SECTORS)]))
    res = run_target(vm, SCRIPT.replace("$PART", str(PART_SECTORS)),
                     files=[(tmp_path / "mbr", "/test/mbr")], timeout=600)
    # Before claim.c the first table was accepted and its first block read
    # back the second segment's data: FIRST_BLOCK_READS=...:B.
    assert res.values("ACCEPTED") == [], res.values("FIRST_BLOCK_READS")
    assert sorted(res.values("REFUSED")) == sorted(REFUSED)
    assert res.values("LEFT") == []
    klines = res.values("KLINE")
    for case, whys in REFUSED.items():
        mine = [k for k in klines if k.startswith(case + ":")]
        # dm core's "error adding target" line plus ours, with the reason
        assert len([k for k in mine if "pmemcache: " in k]) == 1, (case, mine)
        assert any(w in k for k in mine for w in whys), (case, whys, mine)
    assert res.value("RELOAD_SAME") == "ok"
    assert res.value("PC_BLOCK0") == "C"
    assert res.value("DEVICES").split() == ["pc"]
