"""End-to-end page-less I/O of core-patches in the guest.

tests/kmod/pfnwb.ko writes a known pattern into the raw (page-less) NFIT
pmem namespace with the CPU and writes that range to a block device with a
bio built by bio_add_pfn(); the guest then reads the target back with
ordinary I/O and compares it with pmem.  This runs through md raid1,
raid10 and dm-linear to virtio-blk, in three DMA variants: plain virtio
(sg_phys, no DMA API), iommu_platform=on (dma-direct) and intel-iommu with
iommu_platform=on (dma-iommu, proved by a kprobe on iommu_dma_map_pfn).
raid5 and raid6 copy page-less bios into their stripe cache through
pfn_kmap (core-patches 0016, 0017), also degraded and with a hot-added
member that cannot take them; a queue that never opted in (loop) and raid1
after hot-adding an incapable member must fail with -EOPNOTSUPP, without
hanging and without degrading the array.
"""
import pytest

from vm import KBUILD, KMOD, build_test_kmods

# The debug kernel (make test DEBUG=1) must report dma-debug's error count.
DMA_API_DEBUG = "CONFIG_DMA_API_DEBUG=y" in (
    (KBUILD / ".config").read_text() if (KBUILD / ".config").exists() else "")
EOPNOTSUPP = -95


@pytest.fixture(scope="module", autouse=True)
def pfnwb_module():
    """Build tests/kmod/pfnwb.ko against the product kernel."""
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)
    proc = build_test_kmods()
    # A build error is a failure, whatever it mentions: a kernel without
    # core-patches' bio_add_pfn() is not the kernel under test (issue 30).
    assert proc.returncode == 0, "tests/kmod did not build:\n" + proc.stderr
    assert (KMOD / "pfnwb.ko").exists()


GUEST_LIB = r"""
T=/sys/kernel/tracing
mount -t tracefs tracefs $T 2>/dev/null || true
echo 'p:pfn_map dma_map_pfn_attrs' > $T/kprobe_events
echo 'p:pfn_iommu iommu_dma_map_pfn' >> $T/kprobe_events
echo 'p:pfn_kmap pfn_kmap_copy_from' >> $T/kprobe_events
echo 1 > $T/events/kprobes/enable

hits() { awk -v e="$1" '$1 == e { print $2 }' $T/kprobe_profile; }

has_pfn_flag() { grep -qw PFN /sys/kernel/debug/block/$1/state; }

seed=0
# pfnwb NAME TARGET SECTOR LEN [GAP]: write pmem to TARGET with bio_add_pfn,
# print NAME_rc=<errno>, and on success NAME_match=1 if TARGET reads back
# exactly what pmem holds.
pfnwb() {
	name=$1 tgt=$2 sec=$3 len=$4 gap=${5:-0}
	seed=$((seed + 1))
	poff=$((seed * 8 * 1024 * 1024))
	if insmod /lib/modules/extra/pfnwb.ko target=$tgt sector=$sec len=$len \
		gap=$gap seed=$seed pmem_off=$poff; then
		rmmod pfnwb
		rc=0
	else
		rc=$(dmesg | sed -n 's/.*pfnwb: result=\(-*[0-9]*\).*/\1/p' | tail -1)
	fi
	echo "${name}_rc=$rc"
	echo "${name}_tpfn=$(dmesg | sed -n 's/.*pfnwb: target_pfn=\([01]\).*/\1/p' | tail -1)"
	[ "$rc" = 0 ] || return 0
	blockdev --flushbufs /dev/pmem0
	blockdev --flushbufs $tgt
	half=$((len / 2 / 4096))
	skip2=$((poff / 4096 + half))
	[ "$gap" = 1 ] && skip2=$((skip2 + 1))
	dd if=/dev/pmem0 bs=4096 skip=$((poff / 4096)) count=$half 2>/dev/null > /tmp/want
	dd if=/dev/pmem0 bs=4096 skip=$skip2 count=$half 2>/dev/null >> /tmp/want
	dd if=$tgt bs=512 skip=$sec count=$((len / 512)) 2>/dev/null > /tmp/got
	head -c 16 /tmp/want | grep -q "pfnwb seed=$seed" || die "$name: no pattern in pmem"
	if cmp -s /tmp/want /tmp/got; then echo "${name}_match=1"; else echo "${name}_match=0"; fi
}

# data area of md member N, as seen on the member device
member_md5() {
	off=$(cat /sys/block/md0/md/rd$1/offset)
	dev=$(basename "$(readlink /sys/block/md0/md/rd$1/block)")
	blockdev --flushbufs /dev/$dev
	dd if=/dev/$dev bs=512 skip=$off count=16384 2>/dev/null | md5sum | cut -d' ' -f1
}

stop_md() { mdadm --stop /dev/md0 >/dev/null 2>&1; mdadm --zero-superblock /dev/vd[a-f] >/dev/null 2>&1 || true; }

# md_check NAME: wait for any resync, scrub, print NAME_mismatch=<count>
# md_repair: make parity consistent first (--assume-clean over members
# that held another layout before), so that md_check sees only our writes
# md_action ACTION: ask md for a sync action once it takes one (md says
# EBUSY while a sync it started itself is still being set up or reaped)
md_action() {
	i=0
	until echo $1 > /sys/block/md0/md/sync_action 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 30 ] || die "md0 refuses $1"
		mdadm --wait /dev/md0 >/dev/null 2>&1 || sleep 1
	done
}

md_repair() {
	md_action repair
	sleep 1
	mdadm --wait /dev/md0 >/dev/null 2>&1 || true
}

# (mdadm --wait exits 1 when there was nothing to wait for)
md_check() {
	mdadm --wait /dev/md0 >/dev/null 2>&1 || true
	md_action check
	sleep 1
	mdadm --wait /dev/md0 >/dev/null 2>&1 || true
	echo "$1_mismatch=$(cat /sys/block/md0/md/mismatch_cnt)"
}
"""

# The debug kernel's DMA-API checker: the guest prints its error count,
# check_dma_debug() wants 0.
DMA_DEBUG_COUNT = r"""
if [ -r /sys/kernel/debug/dma-api/error_count ]; then
	echo dma_debug_errors=$(cat /sys/kernel/debug/dma-api/error_count)
fi
"""


def check_dma_debug(res):
    """On the debug kernel, or wherever the guest printed a count: 0."""
    if DMA_API_DEBUG or res.values("dma_debug_errors"):
        assert res.value("dma_debug_errors") == "0"


GUEST_SCRIPT = GUEST_LIB + r"""
has_pfn_flag vda && echo vda_pfn=1 || echo vda_pfn=0

# raid1 over vda, vdb; dm-linear over it
make_md 1 2
pfnwb r1_64k /dev/md0 0 65536
pfnwb r1_2bvec /dev/md0 256 65536 1
pfnwb r1_4m /dev/md0 2048 4194304
[ "$(member_md5 0)" = "$(member_md5 1)" ] && echo r1_mirrors_equal=1 || echo r1_mirrors_equal=0
dm_create lin "0 65536 linear /dev/md0 16384"
pfnwb lin_16k /dev/mapper/lin 64 16384
dmsetup remove lin

# hot-add a member that cannot take page-less bios (loop on tmpfs)
truncate -s 512M /tmp/spare.img
losetup /dev/loop0 /tmp/spare.img
pfnwb loop_only /dev/loop0 0 4096
mdadm /dev/md0 --add /dev/loop0 >/dev/null
pfnwb r1_after_add /dev/md0 0 65536
echo r1_degraded=$(cat /sys/block/md0/md/degraded)
echo r1_state=$(cat /sys/block/md0/md/array_state)
stop_md
losetup -d /dev/loop0

# raid10 over 4 disks
make_md 10 4
pfnwb r10_256k /dev/md0 0 262144
pfnwb r10_4m_2bvec /dev/md0 4097 4194304 1
stop_md

# raid5 over 4, raid6 over 5: md copies into its stripe cache with the
# CPU through pfn_kmap; members see stripe pages only
for lvl in 5 6; do
	make_md $lvl $((lvl - 1))
	md_repair
	k0=$(hits pfn_kmap)
	pfnwb r${lvl}_64k /dev/md0 0 65536
	pfnwb r${lvl}_4m_2bvec /dev/md0 4097 4194304 1
	echo r${lvl}_kmap_hits=$(($(hits pfn_kmap) - k0))
	echo r${lvl}_degraded=$(cat /sys/block/md0/md/degraded)
	md_check r$lvl
	stop_md
done

echo map_hits=$(hits pfn_map)
echo iommu_hits=$(hits pfn_iommu)
""" + DMA_DEBUG_COUNT + "echo DONE=1\n"


@pytest.mark.parametrize("iommu", ["none", "platform", "intel"])
def test_pfn_writeback_through_md_and_dm(vm, iommu):
    res = vm.run(GUEST_SCRIPT, iommu=iommu, timeout=900)
    v = res.value
    assert v("DONE") == "1"
    assert v("vda_pfn") == "1"
    assert v("r1_64k_tpfn") == "1"  # bdev_pfn(md0): md has no debugfs state
    for name in ("r1_64k", "r1_2bvec", "r1_4m", "lin_16k", "r10_256k", "r10_4m_2bvec"):
        assert v(name + "_rc") == "0", name
        assert v(name + "_match") == "1", name
    assert v("r1_mirrors_equal") == "1"
    # a queue that never opted in, a raid1 with an incapable member, raid5
    assert int(v("loop_only_rc")) == EOPNOTSUPP
    assert v("r1_after_add_tpfn") == "0"
    assert int(v("r1_after_add_rc")) == EOPNOTSUPP
    assert v("r1_degraded") == "0"
    for lvl in (5, 6):
        for name in ("r%d_64k" % lvl, "r%d_4m_2bvec" % lvl):
            assert v(name + "_rc") == "0", name
            assert v(name + "_tpfn") == "1", name
            assert v(name + "_match") == "1", name
        assert int(v("r%d_kmap_hits" % lvl)) > 0
        assert v("r%d_degraded" % lvl) == "0"
        assert v("r%d_mismatch" % lvl) == "0"
    if iommu == "none":
        assert int(v("map_hits")) == 0
    else:
        assert int(v("map_hits")) > 0
    if iommu == "intel":
        assert int(v("iommu_hits")) > 0
    else:
        assert int(v("iommu_hits")) == 0
    check_dma_debug(res)


SWIOTLB_SCRIPT = GUEST_LIB + r"""
has_pfn_flag vda && echo vda_pfn=1 || echo vda_pfn=0
make_md 1 2
pfnwb r1 /dev/md0 0 65536
echo r1_degraded=$(cat /sys/block/md0/md/degraded)
echo DONE=1
"""


def test_pfn_refused_with_swiotlb_force(vm):
    """Bouncing would copy from an unmapped address: virtio must not opt in."""
    res = vm.run(SWIOTLB_SCRIPT, iommu="platform", append="swiotlb=force", timeout=600)
    assert res.value("DONE") == "1"
    assert res.value("vda_pfn") == "0"
    assert int(res.value("r1_rc")) == EOPNOTSUPP
    assert res.value("r1_degraded") == "0"


REFUSAL_SCRIPT = GUEST_LIB + r"""
# pfnwb_bounded NAME TARGET SECTOR LEN GAP [pfnwb args]: like pfnwb without
# the read-back, but a write that never completes (a request requeued for
# ever) prints NAME_rc=hang after 30 s instead of stopping the script.
pfnwb_bounded() {
	name=$1 tgt=$2 sec=$3 len=$4 gap=$5
	shift 5
	seed=$((seed + 1))
	rm -f /tmp/pfnwb.rc
	(if insmod /lib/modules/extra/pfnwb.ko target=$tgt sector=$sec len=$len \
		gap=$gap seed=$seed pmem_off=$((seed * 8 * 1024 * 1024)) "$@"; then
		rmmod pfnwb
		echo 0
	else
		echo fail
	fi > /tmp/pfnwb.rc) &
	n=0
	while [ ! -s /tmp/pfnwb.rc ] && [ $n -lt 30 ]; do
		sleep 1
		n=$((n + 1))
	done
	if [ ! -s /tmp/pfnwb.rc ]; then
		echo "${name}_rc=hang"
		return 0
	fi
	rc=$(cat /tmp/pfnwb.rc)
	[ "$rc" = 0 ] || rc=$(dmesg | sed -n 's/.*pfnwb: result=\(-*[0-9]*\).*/\1/p' | tail -1)
	echo "${name}_rc=$rc"
}

make_md 1 2
# vdb behind an external port: whole pages still map, halves of pages
# would need a bounce, which dma_map_pfn() refuses at I/O time
pfnwb_bounded r1_pages /dev/md0 0 4096 0 untrust=/dev/vdb
pfnwb_bounded r1_halves /dev/md0 8 4096 1
echo r1_degraded=$(cat /sys/block/md0/md/degraded)
echo vdb_state=$(cat /sys/block/md0/md/dev-vdb/state)
echo vdb_bad=$(wc -l < /sys/block/md0/md/dev-vdb/bad_blocks)
has_pfn_flag vda && echo vda_pfn=1 || echo vda_pfn=0
has_pfn_flag vdb && echo vdb_pfn=1 || echo vdb_pfn=0
stop_md
# a plain disk: refused at mapping, then at submission
pfnwb_bounded vdc_halves /dev/vdc 0 4096 1 untrust=/dev/vdc
pfnwb_bounded vdc_again /dev/vdc 0 4096 0
echo DONE=1
"""


def test_dma_refusal_at_io_time_fails_with_notsupp(vm):
    """A page-less range that the DMA mapping refuses only at I/O time (an
    untrusted device behind an IOMMU would need a bounce for half a page):
    virtio must fail the request with BLK_STS_NOTSUPP and stop taking
    page-less bios, never requeue it for ever; md passes the refusal up
    without failing the member (core-patches 0013, 0014)."""
    res = vm.run(REFUSAL_SCRIPT, iommu="intel", timeout=600)
    v = res.value
    assert v("DONE") == "1"
    assert v("r1_pages_rc") == "0"
    assert int(v("r1_halves_rc")) == EOPNOTSUPP
    assert v("r1_degraded") == "0"
    assert v("vdb_state") == "in_sync" and v("vdb_bad") == "0"
    assert v("vda_pfn") == "1" and v("vdb_pfn") == "0"
    assert int(v("vdc_halves_rc")) == EOPNOTSUPP
    assert int(v("vdc_again_rc")) == EOPNOTSUPP
    assert "no more page-less I/O" in res.dmesg


WRITECACHE_SCRIPT = r"""
# 6.1.192 oopsed here (NULL dax_device in dax_synchronous()); with the fix
# the table load fails with a clear error instead.
size=$(blockdev --getsz /dev/vda)
if dmsetup create --noudevsync wc --table "0 $size writecache p /dev/vda /dev/pmem0 4096 0" \
	> /tmp/wc.out 2>&1; then
	echo wc_created=1
else
	echo wc_created=0
fi
dmesg | grep -q "Cache device is not DAX with struct pages" && echo wc_msg=1 || echo wc_msg=0
echo DONE=1
"""


def test_writecache_on_raw_pmem_fails_cleanly(vm):
    res = vm.run(WRITECACHE_SCRIPT, timeout=300)
    assert res.value("DONE") == "1"
    assert res.value("wc_created") == "0"
    assert res.value("wc_msg") == "1"


RAID456_SCRIPT = GUEST_LIB + r"""
for lvl in 5 6; do
	n=$((lvl - 1))
	make_md $lvl $n
	md_repair
	# degraded: one member failed (two for raid6)
	mdadm /dev/md0 --fail /dev/vdb --remove /dev/vdb >/dev/null 2>&1
	[ $lvl = 6 ] && mdadm /dev/md0 --fail /dev/vdc --remove /dev/vdc >/dev/null 2>&1
	echo r${lvl}_deg_before=$(cat /sys/block/md0/md/degraded)
	pfnwb r${lvl}_degraded /dev/md0 0 262144
	# a member that cannot take page-less bios, recovering onto it
	truncate -s 512M /tmp/spare.img
	losetup /dev/loop0 /tmp/spare.img
	mdadm /dev/md0 --add /dev/loop0 >/dev/null
	pfnwb r${lvl}_recovery /dev/md0 2048 4194304 1
	echo r${lvl}_action=$(cat /sys/block/md0/md/sync_action)
	mdadm --wait /dev/md0 >/dev/null 2>&1 || true
	pfnwb r${lvl}_after /dev/md0 16384 65536
	md_check r$lvl
	echo r${lvl}_deg_after=$(cat /sys/block/md0/md/degraded)
	stop_md
	losetup -d /dev/loop0
	rm -f /tmp/spare.img
done
""" + DMA_DEBUG_COUNT + "echo DONE=1\n"


def test_raid456_degraded_and_recovering_take_pfn_bios(vm):
    """raid5/raid6 keep taking page-less bios when degraded and while they
    recover onto a hot-added member that cannot take them (a loop device):
    the members only ever see stripe pages."""
    res = vm.run(RAID456_SCRIPT, iommu="intel", timeout=1200)
    v = res.value
    assert v("DONE") == "1"
    for lvl, failed in ((5, "1"), (6, "2")):
        assert v("r%d_deg_before" % lvl) == failed
        for name in ("degraded", "recovery", "after"):
            n = "r%d_%s" % (lvl, name)
            assert v(n + "_rc") == "0", n
            assert v(n + "_tpfn") == "1", n
            assert v(n + "_match") == "1", n
        assert v("r%d_mismatch" % lvl) == "0"
        assert v("r%d_deg_after" % lvl) == str(int(failed) - 1)
    assert "no more page-less I/O" not in res.dmesg
    check_dma_debug(res)
