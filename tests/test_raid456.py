"""The cache over raid5 (4 members) and raid6 (5 members), in the three DMA
variants of the guest (issue 16): plain virtio, iommu_platform=on
(dma-direct) and intel-iommu (dma-iommu). One boot per variant, both
levels in it. For each level, three rounds of verified writes through the
cache, each written back with `flush`:

1. while a member is failed as soon as writeback has cleaned a block;
2. on the array left degraded;
3. while the member, blank again, is being recovered (the resync is
   throttled so that the whole writeback runs inside it);

then every round is verified again on md itself, and an md check finds no
parity mismatch. Every block must have gone page-less (status route pfn,
wb_pfn_blocks, no bounce), no write back may fail, and the debug kernel's
DMA-API checker must count no error.
"""
import pytest

from test_pfn_io import DMA_DEBUG_COUNT, check_dma_debug
from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401

ROUND = "--rw=randwrite --bs=4k --size=24m --ioengine=libaio --iodepth=16 --offset=%dm"
OFFSETS = {"failed": 0, "degraded": 32, "recovering": 64}

SCRIPT = PRELUDE + r"""
pmc_init
# the cache sees 64 MiB per member: recovery takes seconds, not minutes
md_456() {
	mdadm --create /dev/md0 --run --quiet --metadata=1.2 --assume-clean \
		--level=$1 --raid-devices=$2 --chunk=64 --size=65536 $3 2>&1 ||
		die "mdadm --create $1"
}

flush_bg() {
	dmsetup message pc 0 flush &
	fp=$!
}

# flushed WHAT: the flush started by flush_bg ended well
flushed() { wait $fp || die "flush ($1)"; }

# round LEVEL NAME: verified writes through the cache, then flush_bg
round() {
	fio_job $1_$2 /dev/mapper/pc $(eval echo \$job_$2)
	d0=$(dmsetup status pc | awk '{print $5}')
	[ "$d0" -gt 0 ] || die "$1 $2: nothing dirty"
	flush_bg
}

level() {
	lvl=$1 n=$2 devs=$3 m=$4
	md_456 $lvl $n "$devs"
	dm_create pc "$(pmc_table md0 '5 high_watermark 100 low_watermark 100 format')" ||
		die create

	# one stripe in flight at a time: the flush of 6,144 blocks takes
	# some 128 passes, so that the member surely fails in the middle
	dmsetup message pc 0 writeback_jobs 48 || die "writeback_jobs 48"
	round $lvl failed
	# fail the member as soon as writeback has cleaned a first block
	while kill -0 $fp 2>/dev/null &&
		[ "$(dmsetup status pc | awk '{print $5}')" = "$d0" ]; do :; done
	kill -0 $fp 2>/dev/null && echo "FAILED_IN_WRITEBACK=$lvl"
	mdadm /dev/md0 --fail $m > /dev/null 2>&1 || die "fail $m"
	flushed "$lvl, member failed"
	dmsetup message pc 0 writeback_jobs 1024 || die "writeback_jobs 1024"
	echo "${lvl}_failed_degraded=$(cat /sys/block/md0/md/degraded)"
	status ${lvl}_failed

	round $lvl degraded
	flushed "$lvl, degraded"
	status ${lvl}_degraded

	mdadm /dev/md0 --remove $m > /dev/null 2>&1 || die "remove $m"
	mdadm --zero-superblock $m || die "zero $m"
	# 100 KiB/s: 64 MiB take 11 minutes, far longer than the round
	echo 100 > /sys/block/md0/md/sync_speed_min
	echo 100 > /sys/block/md0/md/sync_speed_max
	mdadm /dev/md0 --add $m > /dev/null 2>&1 || die "add $m"
	round $lvl recovering
	echo "${lvl}_flush_began_in=$(cat /sys/block/md0/md/sync_action)"
	flushed "$lvl, recovering"
	echo "${lvl}_flush_ended_in=$(cat /sys/block/md0/md/sync_action)"
	status ${lvl}_recovering
	echo system > /sys/block/md0/md/sync_speed_min
	echo system > /sys/block/md0/md/sync_speed_max
	mdadm --wait /dev/md0 > /dev/null 2>&1 || true
	echo "${lvl}_degraded_after=$(cat /sys/block/md0/md/degraded)"

	dmsetup remove pc || die "remove pc"
	for r in failed degraded recovering; do
		fio_check ${lvl}_$r /dev/md0 $(eval echo \$job_$r)
	done
	echo check > /sys/block/md0/md/sync_action
	sleep 1
	mdadm --wait /dev/md0 > /dev/null 2>&1 || true
	echo "${lvl}_mismatch=$(cat /sys/block/md0/md/mismatch_cnt)"
	mdadm --stop /dev/md0 > /dev/null 2>&1 || die "stop md0"
	mdadm --zero-superblock $devs > /dev/null 2>&1 || true
}

job_failed="%(failed)s"
job_degraded="%(degraded)s"
job_recovering="%(recovering)s"
level raid5 4 "/dev/vda /dev/vdb /dev/vdc /dev/vdd" /dev/vdb
level raid6 5 "/dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde" /dev/vdc
""" % {k: ROUND % v for k, v in OFFSETS.items()} + DMA_DEBUG_COUNT + "echo DONE=1\n"


@pytest.mark.parametrize("iommu", ["none", "platform", "intel"])
def test_raid456_member_failed_degraded_and_recovering(vm, iommu):
    res = vm.run(SCRIPT, iommu=iommu, timeout=1800)
    v = res.value
    assert v("DONE") == "1"
    assert res.values("FAILED_IN_WRITEBACK") == ["raid5", "raid6"]
    total = 0
    for lvl in ("raid5", "raid6"):
        assert v(lvl + "_failed_degraded") == "1"
        # the throttled recovery lasts the whole writeback of round 3
        assert v(lvl + "_flush_began_in") == "recover"
        assert v(lvl + "_flush_ended_in") == "recover"
        assert v(lvl + "_degraded_after") == "0"
        assert v(lvl + "_mismatch") == "0"
        before = 0
        for r in OFFSETS:
            s = parse_status(v("STATUS%s_%s" % (lvl, r)))
            assert s["dirty"] == 0 and s["wb_errors"] == 0, (lvl, r, s)
            assert s["route"] == "pfn" and s["wb_bounce_blocks"] == 0, (lvl, r, s)
            # each round wrote back page-less
            assert s["wb_pfn_blocks"] > before, (lvl, r, s)
            before = s["wb_pfn_blocks"]
        total += before
    assert res.values("VERIFY_OK") == ["%s_%s" % (lvl, r) for lvl in ("raid5", "raid6")
                                       for r in OFFSETS]
    check_dma_debug(res)
    print("%s: %d blocks written back page-less over raid5 and raid6" % (iommu, total))
