"""A self-test of tests/kmod/dm-volatile.c (issue 30).

The power cuts over a volatile origin (test_durability.py) mean
something only if dm volatile loses what a disk's volatile write cache
may lose, and keeps the rest. One boot writes four 64 KiB regions
through dm volatile over a virtio disk, with early write-out off:

  C  plain, then fdatasync (REQ_PREFLUSH)  written out by the flush
  B  O_DSYNC                               kept: a REQ_FUA write, and
                                           then a flush (a block device
                                           flushes after an O_DSYNC write)
  A  plain O_DIRECT write, after both      held: lost at the cut
  D  plain                                 held: lost at the cut

reads A to D back through dm volatile (reads see held data), asserts the
status holds exactly A's and D's chunks, and is cut. The next boot reads
the disk itself: A and D must be as before the first boot (zeros), B and
C must hold their bytes.

The test can fail: two mutants of dm-volatile.c (every write written
through at once; a flush that writes nothing out) must each leave a
region wrong, and the unmutated module none (the control).
"""
import re
import shutil
import subprocess
import time

from pathlib import Path

import pytest

from test_durability import guest_tools  # noqa: F401 (fixture)
from test_target import PRELUDE
from test_target_powercut import cut_console, power_cut
from vm import KBUILD, KCACHE, check_reports
from vm_mutants import KSRC, apply_edits

KMOD = Path(__file__).resolve().parent / "kmod"
# (name, edits of dm-volatile.c): each must leave a region wrong
MUTANTS = [("every write written through", [("} else if (bio->bi_opf & REQ_FUA) {",
                                              "} else if (1) {")]),
           ("a flush writes nothing out", [("blk_status_t st = vol_writeout_all(vc);\n\n\tatomic64_inc(&vc->flushes);",
                                            "blk_status_t st = BLK_STS_OK;\n\n\tatomic64_inc(&vc->flushes);")])]

REGION = 65536
# (name, byte offset, byte written, how durable_io writes it, kept at the cut)
# in the order written: a flush writes out everything held before it
REGIONS = [("C", 2 << 20, 0x43, "fdatasync", True),
           ("B", 1 << 20, 0x42, "dsync", True),
           ("A", 0 << 20, 0x41, "", False),
           ("D", 3 << 20, 0x44, "", False)]

BYTES = r"""
bytes() {	# the distinct bytes of a region, e.g. "41" or "00 41"
	dd if=$1 bs=%(len)d skip=$(($2 / %(len)d)) count=1 2>/dev/null |
		od -An -v -tx1 | tr -s ' ' '\n' | grep . | sort -u | tr '\n' ' '
}
""" % dict(len=REGION)

WRITE = PRELUDE + BYTES + r"""
insmod %(ko)s || die "insmod dm-volatile"
dmsetup create --noudevsync vol --table \
	"0 $(blockdev --getsz /dev/vda) volatile /dev/vda 32768 0" || die volatile
dmsetup mknodes vol
%(writes)s
%(reads)s
echo "STATUS=$(dmsetup status vol)"
echo CUT_NOW=1
sleep 100000
"""

CHECK = PRELUDE + BYTES + r"""
%(reads)s
"""


def wrong_regions(vm, files, ko="/lib/modules/extra/dm-volatile.ko"):
    """Run the self-test with the dm-volatile module at ko (a guest path);
    the regions that came out wrong after the cut, as "NAME got BYTES"."""
    writes = "\n".join("durable_io pwrite /dev/mapper/vol %d %d %d %s || die 'write %s'"
                       % (off, REGION, byte, how, name) for name, off, byte, how, _ in REGIONS)
    reads = "\n".join('echo "%s=$(bytes %%s %d)"' % (name, off) for name, off, _, _, _ in REGIONS)
    proc, boot = vm.start(WRITE % dict(ko=ko, writes=writes,
                                       reads=reads % (("/dev/mapper/vol",) * 4)),
                          files=files, pmem_size=16, timeout=600)
    try:
        deadline = time.time() + 500
        while "CUT_NOW=1" not in boot.read()[1]:
            assert "@@EXIT" not in boot.read()[2] and time.time() < deadline, boot.read()[1][-3000:]
            time.sleep(0.5)
    finally:
        power_cut(vm, proc)
    before = cut_console(boot)
    for name, _, byte, _, _ in REGIONS:
        # reads through the layer see every write, held or not
        assert re.search(r"^%s=%02x $" % (name, byte), before, re.M), before[-2000:]
    held = int(re.search(r"^STATUS=\S+ \S+ volatile (\d+) ", before, re.M).group(1))

    res = vm.run(CHECK % dict(reads=reads % (("/dev/vda",) * 4)), pmem_size=16, timeout=600)
    check_reports(res)
    wrong = []
    for name, _, byte, _, kept in REGIONS:
        got = re.search(r"^%s=(.*)$" % name, res.output, re.M)
        if not got or got.group(1) != ("%02x " % byte if kept else "00 "):
            wrong.append("%s got %s" % (name, got.group(1).strip() if got else "nothing"))
    return held, wrong


def test_dm_volatile_loses_exactly_what_was_not_flushed(vm, guest_tools):
    held, wrong = wrong_regions(vm, list(guest_tools))
    # the precondition of the cut: A's and D's chunks, and only those, held
    assert held == sum(not kept for *_, kept in REGIONS) * REGION // 4096, held
    assert not wrong, wrong


def build_mutant(tmp_path, edits):
    src = tmp_path / "kmod"
    src.mkdir()
    shutil.copy(KMOD / "Kbuild", src)
    c = (KMOD / "dm-volatile.c").read_text()
    (src / "dm-volatile.c").write_text(apply_edits(c, edits))
    # only dm-volatile: the Kbuild's other objects are not copied
    (src / "Kbuild").write_text("obj-m += dm-volatile.o\n")
    p = subprocess.run(["flock", str(KCACHE / "kernel-build.lock"), "make", "-s", "-C", str(KSRC),
                        "O=%s" % KBUILD, "CC=ccache gcc", "M=%s" % src, "modules"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return src / "dm-volatile.ko"


@pytest.mark.parametrize("mutant", [m[0] for m in MUTANTS])
def test_mutants_of_dm_volatile_are_caught(vm, guest_tools, tmp_path, mutant):
    ko = build_mutant(tmp_path, dict(MUTANTS)[mutant])
    _, wrong = wrong_regions(vm, list(guest_tools) + [(ko, "/test/dm-volatile.ko")],
                             "/test/dm-volatile.ko")
    print("dm-volatile mutant %r: %s" % (mutant, "caught: " + ", ".join(wrong) if wrong
                                         else "not caught"))
    assert wrong, "dm-volatile mutant %r not caught" % mutant
