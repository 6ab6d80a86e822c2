"""The guest platform: raw (page-less) pmem and md RAID over virtio."""
import json

import pytest


def test_pmem0_is_a_raw_namespace_without_dax(vm):
    res = vm.run("""
ndctl list -N > /tmp/ns.json
echo "NS=$(tr -d '\\n ' < /tmp/ns.json)"
echo "DAX=$(cat /sys/block/pmem0/queue/dax)"
echo "SIZE=$(cat /sys/block/pmem0/size)"
""")
    ns = json.loads(res.value("NS"))
    ns = ns if isinstance(ns, list) else [ns]
    assert [n["mode"] for n in ns] == ["raw"]
    assert ns[0]["blockdev"] == "pmem0"
    assert res.value("DAX") == "0"
    assert int(res.value("SIZE")) * 512 == 1 << 30


@pytest.mark.parametrize("level,disks", [("raid1", 2), ("raid10", 4), ("raid5", 4)])
def test_md_raid_passes_fio_verify(vm, level, disks):
    res = vm.run("""
make_md %s %d
echo "LEVEL=$(cat /sys/block/md0/md/level)"
echo "DEGRADED=$(cat /sys/block/md0/md/degraded)"
fio_verify /dev/md0 --rw=randwrite --bs=4k --size=16m --numjobs=1 \\
	--output-format=json --output=/tmp/fio.json
echo "FIO=$(tr -d '\\n' < /tmp/fio.json)"
""" % (level, disks))
    assert res.value("LEVEL") == level
    assert res.value("DEGRADED") == "0"
    job = json.loads(res.value("FIO"))["jobs"][0]
    assert job["error"] == 0
    assert job["write"]["io_bytes"] == 16 << 20
    # the verify phase read everything back and compared checksums
    assert job["read"]["io_bytes"] == 16 << 20
