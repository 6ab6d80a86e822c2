"""Power cuts under ext4 and XFS on the cache, judged by their own fsck (issue 32).

Every other crash test drives the block device with our own writers and
checkers. Here a journaling file system is the client: it relies on
REQ_PREFLUSH/REQ_FUA ordering, discards (fstrim) and suspend (fsfreeze),
and e2fsck / xfs_repair judge the result, which nobody here wrote.

The stack: md raid5 over 4 virtio disks (256 MiB each) -> dm volatile
(tests/kmod/dm-volatile.c) in the boots that say so, else dm linear (the
cache knows an origin without an md UUID by its size alone, so both
stacks hold the same cache) -> the cache on 64 MiB of pmem -> two
dm-linear volumes, ext4 on the first (384 MiB), XFS on the rest. So
every cut is a cut under both file systems at once.

Each boot of the chain (one per cut) after the first:
1. mounts both through the cache (journal/log replay), reads every file
   logged so far by fs_io durable (tests/guest/fs_io.c) and compares its
   size and checksum, unmounts, runs `e2fsck -fn` / `xfs_repair -n`;
2. sends `flush`, removes the cache, and runs the same fsck and file
   check on md alone (the volumes as linear tables over md0, mounted
   read-only);
3. puts the cache back and runs the workload: per file system 3 churn
   processes (create, write, append, overwrite, rename, link, symlink,
   truncate, fallocate, punch, unlink, mkdir, rmdir, fsync; the first one
   rewrites a 24 MiB file with fdatasync), a writer of small files each
   fsync'ed with its folder and then logged "D <path> <size> <sum>" on
   the script's output, and fstrim of both every 4 s;
4. is cut (QEMU killed) at a random moment (0-3 s) once the status,
   sampled once a second, shows what makes the cut mean something, which
   the test asserts on the last sample before the cut: evictions in this
   boot (a kprobe on pmc_meta_evict), writeback, dirty blocks, discards
   from fstrim, at least MIN_FILES logged files per file system; and the
   boot's own condition:
     volatile  over dm volatile, which must hold unflushed writes (they
               are lost at the cut);
     freeze    fsfreeze -f of both, `dmsetup suspend` of the cache while
               they are frozen (must end within 60 s), resume, fsfreeze
               -u; the writers must go on (files logged after the thaw);
     trim      12 MiB of files per file system written and written back
               (`flush`), overwritten in place with writeback held off
               (dirty in the cache over the old data on md), deleted and
               trimmed (the dirty blocks must leave the cache); then
               seq_bypass 256 sends sequential writes around the cache
               (write_around > 0). The next boot also scans every file
               for the markers of both old versions (nothing may bring
               them back), and counts the bytes of files that lie in the
               old data's extents (FIEMAP, fs_io extents/overlap): some
               must, or the check would prove nothing;
     cleaner   over dm volatile, cleaner mode switched on once the cache
               has evicted: the cut comes once every block is written
               back (no more origin flushes by writeback) and at least
               AROUND_UNFLUSHED (test_durability.py) writes went around
               the cache since the volatile layer's last flush;
     full      over dm volatile, writeback switched off (watermarks 100)
               and full_wait 10 once the cache has evicted: the cut comes
               after writes found the cache full and went around or
               through it since the switch (full_waits and full_around +
               full_through grew), the volatile layer holding writes.
     detach    over dm volatile, `pmemcachectl detach` of the cache under
               the mounted file systems once it has evicted and holds
               dirty blocks: the cut comes 0-3 s after it began or, in
               half of the cuts, 0-3 s after it ended (the file systems
               on the origin alone, the cache's superblock cleared: the
               next boot's table formats it).
     window    over dm volatile, the hooked build of the module
               (test_window_cuts.py, PMC_CUT_HOOKS): 10 s after the cache
               first evicted with dirty blocks, one point of WINDOW_POINTS
               is armed (seeded, and its hit from CUT_AFTER), and the
               guest cuts its own power there; the cut must have come at
               that point and hit, and the last sample before it must
               show the conditions above.
The first boot makes both file systems; the last one only checks.

A failed check prints FS_DAMAGED (tests/vm_mutants.py), which only a
failure prints. PMC_FS_CUTS sets the number of cuts (default SHORT_CUTS,
the first three kinds; LONG_CUTS with PMC_LONG=1, the kinds in turn);
PMC_FS_KINDS=cleaner,full picks the kinds to cycle through;
PMC_MUTANT_KO=path runs another build of dm-pmemcache.ko
(tests/vm_mutants.py, checker "fs").

PMC_LONG=1 adds the mutation test: the module without its origin flush
before CLEAN must be caught by FS_MUTANT_CUTS cuts (the first one over
the volatile origin), and the unmutated module under the same cuts must
not (the control).
"""
import os
import random
import re
import time

import pytest

from test_durability import AROUND_UNFLUSHED, VOL_FIELDS, around_unflushed
from test_durability import guest_tools  # noqa: F401 (fixture: dm-volatile.ko)
from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
from test_target_powercut import power_cut
from test_window_cuts import CUT_AFTER, assert_cut_at, cut_ko  # noqa: F401 (fixture)
from vm import REPO, GuestRun, add_figure, build, check_reports
import vm_mutants
from vm_mutants import FS_DAMAGED

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
KINDS = ["volatile", "freeze", "trim", "cleaner", "full", "detach", "window"]
if os.environ.get("PMC_FS_KINDS"):
    KINDS = os.environ["PMC_FS_KINDS"].split(",")
    assert set(KINDS) <= {"volatile", "freeze", "trim", "cleaner", "full", "detach",
                          "window"}, KINDS
# make test: the first three kinds; make test-long: every kind, many times
SHORT_CUTS, LONG_CUTS = 3, 100
CUTS = int(os.environ.get("PMC_FS_CUTS", LONG_CUTS if LONG else SHORT_CUTS))
OVER_VOLATILE = ("volatile", "cleaner", "full", "detach", "window")
# window: the points of the write path a file system's load reaches
# (write-through needs cleaner mode, recovery an insmod parameter)
WINDOW_POINTS = ("new_w3", "over_w4", "over_w6", "evict_e1", "discard_d1", "wb_flushed",
                 "wb_c1")
CUT_KO = "/test/dm-pmemcache-cut.ko"
MUTANT_KO = os.environ.get("PMC_MUTANT_KO")
FS_IO = REPO / "tests/guest/fs_io"

PMEM_MB = 64
DISK_MB = 256                   # raid5 over 4: 768 MiB
E4_SECTORS = 384 << 11          # ext4's volume; XFS gets the rest
BIG_MB = 24                     # the big file each churn set rewrites
CHURN_PROCS = 3
VOLATILE = "32768 8"            # as test_durability.py: 32 MiB held at most
TABLE = "4 high_watermark 10 low_watermark 1"
TRIM_FILES = 12                 # MiB of old data per file system, trimmed
MIN_FILES = 10                  # logged files per file system before a cut
AFTER_THAW = 5                  # ... and after the thaw, in a freeze boot
MARKERS = ("PMC-OLD-DATA", "PMC-MID-DATA")
FSES = (("ext4", "e4", "/mnt/ext4"), ("xfs", "xf", "/mnt/xfs"))


@pytest.fixture(scope="module")
def fs_tools(guest_tools):
    """test_durability's guest tools (dm-volatile.ko, PMC_MUTANT_KO as
    /test/mutant.ko) and the static tests/guest/fs_io."""
    p = build(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(FS_IO),
               str(FS_IO) + ".c"])
    assert p.returncode == 0, p.stderr
    return list(guest_tools) + [(FS_IO, "/usr/bin/fs_io")]


SETUP = PRELUDE + r"""
insmod /lib/modules/extra/dm-volatile.ko || die "insmod dm-volatile"
[ -b /dev/pmem0 ] || die "no /dev/pmem0"
insmod %(ko)s || die insmod
if [ %(first)d = 1 ]; then
	md_make md0 raid5 4 a
else
	mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
fi
SZ=$(blockdev --getsz /dev/md0)
E4=%(e4)d
XF=$((SZ - E4))
# the cache's origin is always a dm device "vol" (the cache knows an md
# origin by its UUID, a dm one by its size): dm volatile or dm linear
VOLATILE=%(volatile)d
if [ $VOLATILE = 1 ]; then
	dmsetup create --noudevsync vol --table "0 $SZ volatile /dev/md0 %(vol)s" || die volatile
else
	dmsetup create --noudevsync vol --table "0 $SZ linear /dev/md0 0" || die linear
fi
dmsetup mknodes vol
ORIGIN=mapper/vol
mkdir -p /mnt/ext4 /mnt/xfs

stack() {
	dm_create pc "$(pmc_table $ORIGIN '%(table)s')" || die "create pc"
	dm_create e4 "0 $E4 linear /dev/mapper/pc 0" || die "create e4"
	dm_create xf "0 $XF linear /dev/mapper/pc $E4" || die "create xf"
}

# fsck_fs TYPE DEV WHERE: "FSCK TYPE WHERE rc=N", and its output if not 0
fsck_fs() {
	rc=0
	if [ $1 = ext4 ]; then
		/sbin/e2fsck -fn $2 > /tmp/fsck.out 2>&1 || rc=$?
	else
		/usr/sbin/xfs_repair -n $2 > /tmp/fsck.out 2>&1 || rc=$?
	fi
	echo "FSCK $1 $3 rc=$rc"
	[ $rc = 0 ] || head -n 40 /tmp/fsck.out | sed "s/^/FSCKOUT $1 $3 /"
}

# verify_fs TYPE DEV MNT WHERE [ro]: every logged file of TYPE, and with
# SCAN set no file holding an old marker; "MOUNTFAIL" if it does not mount
verify_fs() {
	opt=
	[ -z "$5" ] || opt="-o ro"
	# shellcheck disable=SC2086
	if mount -t $1 $opt $2 $3 2> /tmp/mount.err; then
		fs_io verify /test/files.$1 > /tmp/v.out || true
		grep -m 40 '^LOST' /tmp/v.out | sed "s/^/$1 $4 /"
		grep '^VERIFY' /tmp/v.out | sed "s/^/$1 $4 /"
		if [ -n "$SCAN" ]; then
			[ $4 = md ] || fs_io overlap /test/oldx.$1 $3 | sed "s/^/$1 $4 /"
			# shellcheck disable=SC2086
			fs_io scan $3 $SCAN > /tmp/s.out || true
			grep -m 40 '^FOUND' /tmp/s.out | sed "s/^/$1 $4 /"
			grep '^SCAN' /tmp/s.out | sed "s/^/$1 $4 /"
		fi
		umount $3 || die "umount $3"
	else
		echo "MOUNTFAIL $1 $4 $(head -c 300 /tmp/mount.err | tr '\n' ' ')"
	fi
}
"""

CHECK = r"""
SCAN="%(scan)s"
stack
verify_fs ext4 /dev/mapper/e4 /mnt/ext4 cache
fsck_fs ext4 /dev/mapper/e4 cache
verify_fs xfs /dev/mapper/xf /mnt/xfs cache
fsck_fs xfs /dev/mapper/xf cache
echo "ST_CHECK $(dmsetup status pc)"
dmsetup message pc 0 flush || die flush
dmsetup remove e4 && dmsetup remove xf && dmsetup remove pc || die "remove the cache"
dm_create e4md "0 $E4 linear /dev/md0 0" || die "create e4md"
dm_create xfmd "0 $XF linear /dev/md0 $E4" || die "create xfmd"
fsck_fs ext4 /dev/mapper/e4md md
verify_fs ext4 /dev/mapper/e4md /mnt/ext4 md ro
fsck_fs xfs /dev/mapper/xfmd md
verify_fs xfs /dev/mapper/xfmd /mnt/xfs md ro
dmsetup remove e4md && dmsetup remove xfmd || die "remove the md volumes"
echo CHECK_DONE=1
"""

WORK = r"""
stack
if [ %(first)d = 1 ]; then
	/sbin/mke2fs -q -t ext4 -E nodiscard /dev/mapper/e4 || die "mke2fs"
	/usr/sbin/mkfs.xfs -q -K /dev/mapper/xf || die "mkfs.xfs"
fi
mount -t ext4 /dev/mapper/e4 /mnt/ext4 || die "mount ext4"
mount -t xfs /dev/mapper/xf /mnt/xfs || die "mount xfs"
# a hung-task report prints the task's stack at KERN_INFO: on the console
# too, where it survives the power cut
echo 7 > /proc/sys/kernel/printk
# Cleaner mode sends every write to the origin, synchronously and with
# FUA: under TCG an ext4 commit then waits for 24 MiB of such writes on
# raid5 (fsync in jbd2_log_wait_commit, ext4lazyinit on a buffer) well
# past the 20 s hung-task bound.  Slow by design, not stuck: 120 s there
# (detach runs in cleaner mode too).
case %(kind)s in cleaner|detach) echo 120 > /proc/sys/kernel/hung_task_timeout_secs;; esac
# page cache written out within a second or so, not after 30 s
echo 100 > /proc/sys/vm/dirty_expire_centisecs
echo 50 > /proc/sys/vm/dirty_writeback_centisecs
T=/sys/kernel/tracing
mount -t tracefs tracefs $T 2>/dev/null || true
echo 'p:pmc_evict pmc_meta_evict' > $T/kprobe_events || die kprobe
echo 1 > $T/events/kprobes/enable
if [ %(kind)s = trim ]; then
	# old data on the origin (written back: clean in the cache), newer
	# data over it in the cache (dirty: no writeback meanwhile), then
	# deleted and trimmed; then the new files may take those blocks,
	# and seq_bypass sends sequential writes around the cache
	dmsetup message pc 0 high_watermark 100 && dmsetup message pc 0 low_watermark 100 ||
		die "watermarks"
	for m in /mnt/ext4 /mnt/xfs; do
		fs_io fill $m/old %(trim_files)d 1024 %(old)s || die "fill $m"
	done
	dmsetup message pc 0 flush || die flush
	for m in /mnt/ext4 /mnt/xfs; do
		fs_io fill $m/old %(trim_files)d 1024 %(mid)s || die "overwrite $m"
	done
	echo "TRIM0 $(dmsetup status pc)"
	# where the old data is (the next boot counts what files took over)
	fs_io extents /mnt/ext4/old | sed "s/^/OLDX ext4 /"
	fs_io extents /mnt/xfs/old | sed "s/^/OLDX xfs /"
	rm -r /mnt/ext4/old /mnt/xfs/old
	sync
	for m in /mnt/ext4 /mnt/xfs; do
		t=$(/usr/sbin/fstrim -v $m) || die "fstrim $m"
		echo "TRIMMED $t"
	done
	echo "TRIM1 $(dmsetup status pc)"
	dmsetup message pc 0 low_watermark 1 && dmsetup message pc 0 high_watermark 10 ||
		die "watermarks"
	dmsetup message pc 0 seq_bypass 256 || die "seq_bypass"
fi
dmsetup message pc 0 clear_stats
fs_io churn /mnt/ext4/churn %(procs)d %(seed)d %(big)d &
fs_io churn /mnt/xfs/churn %(procs)d %(seed2)d %(big)d &
fs_io durable /mnt/ext4 b%(boot)d %(seed)d &
fs_io durable /mnt/xfs b%(boot)d %(seed2)d &
while true; do
	sleep 4
	[ -e /tmp/frozen ] && continue
	for m in /mnt/ext4 /mnt/xfs; do
		/usr/sbin/fstrim $m || echo "FAIL: fstrim $m"
	done
done &
thawed=0
while true; do
	ev=$(awk '$1 == "pmc_evict" { print $2 }' $T/kprobe_profile)
	if [ %(kind)s = freeze ] && [ "$ev" -gt 0 ] && [ $thawed = 0 ]; then
		: > /tmp/frozen
		t0=$(date +%%s)
		timeout 60 /usr/sbin/fsfreeze -f /mnt/ext4 || die "fsfreeze -f ext4"
		timeout 60 /usr/sbin/fsfreeze -f /mnt/xfs || die "fsfreeze -f xfs"
		echo "FROZEN $(dmsetup status pc)"
		timeout 60 dmsetup suspend pc || die "suspend with the file systems frozen"
		echo "SUSPENDED $(dmsetup info -c --noheadings -o attr pc) $(dmsetup status pc)"
		dmsetup resume pc || die resume
		/usr/sbin/fsfreeze -u /mnt/ext4 || die "fsfreeze -u ext4"
		/usr/sbin/fsfreeze -u /mnt/xfs || die "fsfreeze -u xfs"
		rm /tmp/frozen
		echo "THAWED $(($(date +%%s) - t0))"
		thawed=1
	fi
	# cleaner, full: the mode is switched on once the cache has evicted
	if [ %(kind)s = cleaner ] && [ "$ev" -gt 0 ] && [ ! -e /tmp/switched ]; then
		dmsetup message pc 0 cleaner || die cleaner
		: > /tmp/switched
		echo "SWITCHED $(dmsetup status pc)"
	fi
	if [ %(kind)s = full ] && [ "$ev" -gt 0 ] && [ ! -e /tmp/switched ]; then
		# no writeback: the cache fills with dirty blocks, and a write
		# that finds no free block waits 10 ms, then goes around it
		dmsetup message pc 0 high_watermark 100 && dmsetup message pc 0 low_watermark 100 &&
			dmsetup message pc 0 full_wait 10 || die "full cache"
		: > /tmp/switched
		echo "SWITCHED $(dmsetup status pc)"
	fi
	# the cache holds dirty blocks, has written back and seen discards
	# (status fields dirty, discards, wb_pfn_blocks + wb_bounce_blocks)
	busy=$(dmsetup status pc | awk '$3 == "pmemcache" && $5 > 0 && $14 > 0 && $16 + $18 > 0 {print 1}')
	# detach: taken away online once the cache has evicted and is busy;
	# the linear table that replaces it prints no ST line
	if [ %(kind)s = detach ] && [ "$ev" -gt 0 ] && [ ! -e /tmp/switched ] &&
	   [ "$busy" = 1 ]; then
		: > /tmp/switched
		echo "DETACH_START $(dmsetup status pc)"
		( pmemcachectl detach pc --quiet > /tmp/detach.out 2>&1
		  echo "DETACH_RC=$? $(tr '\n' ' ' < /tmp/detach.out)" ) &
	fi
	# window: a point of the hooked build armed 10 s after the cache
	# first evicted and was busy; its N-th hit cuts the power
	if [ %(kind)s = window ] && [ "$ev" -gt 0 ] && [ ! -e /tmp/switched ] &&
	   [ "$busy" = 1 ]; then
		win=$((${win:-0} + 1))
		if [ $win -ge 10 ]; then
			: > /tmp/switched
			P=/sys/module/dm_pmemcache/parameters
			echo %(after)d > $P/cut_after
			echo %(point)s > $P/cut_at || die "cut_at %(point)s"
			echo "ARMED $(cat $P/cut_at) $(cat $P/cut_after)"
		fi
	fi
	# one line (one write): the writers' lines never come in between
	if [ $VOLATILE = 1 ]; then
		vol=$(dmsetup status vol)
	else
		vol=none
	fi
	echo "ST $ev $(dmsetup status pc) VOL $vol"
	sleep 1
done
"""


def boot_script(boot, kind, ko, seed, files_known, point="none", after=0):
    """The script of boot number @boot (1: make the file systems): check
    the previous cut (if @files_known), then run the workload of @kind
    (None: the last boot, check only); a window boot arms @point to cut
    at its @after-th hit."""
    first = int(boot == 1)
    s = SETUP % dict(ko=ko, first=first, e4=E4_SECTORS, volatile=int(kind in OVER_VOLATILE),
                     vol=VOLATILE, table=TABLE)
    if files_known:
        s += CHECK % dict(scan=" ".join(MARKERS) if files_known == "scan" else "")
    if kind:
        s += WORK % dict(first=first, kind=kind,
                         old=MARKERS[0], mid=MARKERS[1], trim_files=TRIM_FILES,
                         procs=CHURN_PROCS, seed=seed,
                         seed2=seed + 1, big=BIG_MB, boot=boot, point=point, after=after)
    return s


def statuses(output):
    """(evictions, cache status, volatile status or None, end of the line
    in output) of every whole ST line (the guest may be in the middle of
    printing the last one)."""
    out = []
    for m in re.finditer(r"^ST (\d*) (\S+ \S+ pmemcache [^\n]*?) VOL (?:none|\S+ \S+ volatile "
                         r"([\d ]+?))\r?\n", output, re.M):
        vol = dict(zip(VOL_FIELDS, map(int, m.group(3).split()))) if m.group(3) else None
        out.append((int(m.group(1) or 0), parse_status(m.group(2)), vol, m.end()))
    return out


def logged(output):
    """The logged (fsync'ed) files of a boot's output, whole lines only:
    {fs type: [line, ...]}."""
    files = {t: [] for t, _, _ in FSES}
    for m in re.finditer(r"^(D (/mnt/(ext4|xfs)/\S+) \d+ [0-9a-f]{16})\r?\n", output, re.M):
        files["ext4" if m.group(3) == "ext4" else "xfs"].append(m.group(1))
    return files


def precondition(kind, output, n=None):
    """What must hold at the cut, from the last of the first @n status
    samples: a list of what does not (empty: the cut may come)."""
    sts = statuses(output)[:n]
    if not sts:
        return ["no status sample"]
    ev, s, vol, end = sts[-1]
    upto = output[:end]        # only the output up to that sample counts
    missing = []
    start = re.search(r"^DETACH_START (.*)$", upto, re.M)
    if kind == "detach" and start:
        # detach's first table swap starts the counters afresh: the
        # cache's state is the one the detach began with
        s = parse_status(start.group(1))
    if ev <= 0:
        missing.append("no eviction")
    if s["wb_pfn_blocks"] + s["wb_bounce_blocks"] <= 0:
        missing.append("no writeback")
    if s["dirty"] <= 0 and kind != "cleaner":
        missing.append("no dirty block")
    if s["discards"] <= 0:
        missing.append("no discard (fstrim)")
    for t, files in logged(upto).items():
        if len(files) < MIN_FILES:
            missing.append("%d files logged on %s" % (len(files), t))
    if kind in ("volatile", "full") and not (vol and vol["held"] > 0):
        missing.append("the volatile layer holds nothing")
    if kind == "cleaner":
        # every write reaches the origin with FUA, so the layer may hold
        # nothing: what a cut tests are the writes sent around the cache
        # since its last flush with no block dirty (then nothing else
        # flushes the origin before the cut)
        around = around_unflushed([(e, st, v) for e, st, v, _ in sts])
        if around < AROUND_UNFLUSHED:
            missing.append("%d writes around the cache since the volatile layer's "
                           "last flush with no block dirty" % around)
    if kind in ("cleaner", "full"):
        # the mode on, and writes sent around the cache since
        if "\nSWITCHED " not in upto:
            missing.append("%s mode not on yet" % kind)
        else:
            s0 = parse_status(re.search(r"^SWITCHED (.*)$", upto, re.M).group(1))
            if kind == "cleaner" and s["mode"] != "cleaner":
                missing.append("status mode %s" % s["mode"])
            if kind == "cleaner" and s["dirty"]:
                missing.append("%d dirty blocks left in cleaner mode" % s["dirty"])
            if s["write_around"] <= s0["write_around"]:
                missing.append("no write around the cache since the switch")
            if kind == "full" and (s["full_waits"] <= s0["full_waits"] or
                                   s["full_around"] + s["full_through"] <=
                                   s0["full_around"] + s0["full_through"]):
                missing.append("no write found the cache full since the switch")
    if kind == "detach" and not start:
        # the cut comes during it or after it (cut_moment)
        missing.append("detach not begun")
    if kind == "trim" and s["write_around"] <= 0:
        missing.append("no write around the cache")
    if kind == "freeze":
        if "\nTHAWED " not in upto:
            missing.append("not thawed yet")
        else:
            for t, files in logged(upto[upto.index("\nTHAWED "):]).items():
                if len(files) < AFTER_THAW:
                    missing.append("%d files logged on %s after the thaw" % (len(files), t))
    return missing


def wait_for(boot, what, seconds):
    """Poll the script output of a vm.start() boot until what(output)."""
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        console, text, result = boot.read()
        if re.search(r"^FAIL:", text, re.M) or "@@EXIT" in result:
            raise AssertionError("guest stopped:\n" + text[-4000:])
        if "Kernel panic" in console:
            raise AssertionError("kernel panic:\n" + console[-3000:])
        if what(text):
            return text
        time.sleep(0.5)
    raise AssertionError("waited %d s in vain:\n%s" % (seconds, text[-4000:]))


def cut_moment(boot, kind, rng, tries=30):
    """Wait for the precondition, then a random 0-3 s, and return the
    number of status samples seen once the last one still shows it."""
    for _ in range(tries):
        wait_for(boot, lambda text: not precondition(kind, text), 600)
        if kind == "detach" and rng.random() < 0.5:
            # a cut after the switch: the file systems on the origin alone
            wait_for(boot, lambda text: "DETACH_RC=" in text, 900)
        time.sleep(rng.random() * 3)
        text = boot.read()[1]
        if not precondition(kind, text):
            return len(statuses(text))
    raise AssertionError("%s: the precondition came and went %d times" % (kind, tries))


class Tally:
    def __init__(self):
        self.fsck_runs = self.fsck_errors = self.lost = self.checked = 0


def check_results(output, files, tally, after):
    """The checks of a boot after cut @after: every fsck clean, every
    logged file there through the cache and on md, no old marker found.
    Fails with FS_DAMAGED (and the findings) otherwise."""
    bad = []
    fscks = re.findall(r"^FSCK (\S+) (\S+) rc=(\d+)$", output, re.M)
    tally.fsck_runs += len(fscks)
    for t, where, rc in fscks:
        if rc != "0":
            tally.fsck_errors += 1
            bad.append("%s fsck on %s: exit status %s" % (t, where, rc))
            bad += re.findall(r"^FSCKOUT %s %s (.*)$" % (t, where), output, re.M)[:15]
    for t, _, _ in FSES:
        for where in ("cache", "md"):
            if "FSCK %s %s " % (t, where) not in output:
                bad.append("no fsck of %s on %s" % (t, where))
            m = re.search(r"^%s %s VERIFY files=(\d+) ok=(\d+) lost=(\d+)$" % (t, where),
                          output, re.M)
            mf = re.search(r"^MOUNTFAIL %s %s (.*)$" % (t, where), output, re.M)
            if mf or not m:
                tally.lost += len(files[t])
                bad.append("%s on %s: %s" % (t, where, "does not mount: " + mf.group(1)
                                             if mf else "no file check"))
                continue
            n, ok, lost = (int(x) for x in m.groups())
            tally.checked += ok
            if n != len(files[t]) or lost:
                tally.lost += lost + abs(len(files[t]) - n)
                bad.append("%s on %s: %d of %d logged files lost or wrong" % (
                    t, where, lost, len(files[t])))
                bad += re.findall(r"^%s %s (LOST .*)$" % (t, where), output, re.M)[:15]
            for f in re.findall(r"^%s %s (FOUND .*)$" % (t, where), output, re.M):
                bad.append("%s on %s: old data back: %s" % (t, where, f))
                tally.lost += 1
    assert not bad, "%s after cut %d:\n%s" % (FS_DAMAGED, after, "\n".join(bad))


def wait_cut(proc, boot, seconds):
    """Until the guest cut its own power (a window boot): QEMU's exit
    status; fails if the script failed or the point was not reached."""
    deadline = time.time() + seconds
    while proc.poll() is None:
        text = boot.read()[1]
        if re.search(r"^FAIL:", text, re.M):
            raise AssertionError("guest stopped:\n" + text[-4000:])
        if time.time() > deadline:
            raise AssertionError("the point was not reached in %d s:\n%s"
                                 % (seconds, text[-4000:]))
        time.sleep(0.5)
    return proc.returncode


def run_chain(vm, tools, rng, cuts, figures, cut_ko=None):
    ko = "/test/mutant.ko" if MUTANT_KO else "/lib/modules/extra/dm-pmemcache.ko"
    files = list(tools)
    known = {t: [] for t, _, _ in FSES}
    oldx = {t: "" for t, _, _ in FSES}     # the trimmed data's extents
    tally = Tally()
    kinds = [KINDS[c % len(KINDS)] for c in range(cuts)]
    lists = vm.state.parent / "lists"
    lists.mkdir(exist_ok=True)
    t_start = time.time()
    for boot in range(1, cuts + 2):
        kind = kinds[boot - 1] if boot <= cuts else None
        extra = []
        for t in known:
            (lists / t).write_text("".join(line + "\n" for line in known[t]))
            extra.append((lists / t, "/test/files.%s" % t))
            (lists / ("oldx." + t)).write_text(oldx[t])
            extra.append((lists / ("oldx." + t), "/test/oldx.%s" % t))
        check = None if boot == 1 else ("scan" if kinds[boot - 2] == "trim" else "files")
        seed = rng.randrange(1, 1 << 30)
        point, after, boot_files = "none", 0, files + extra
        if kind == "window":
            point = rng.choice(WINDOW_POINTS)
            after = rng.randint(*CUT_AFTER[point])
            boot_files = boot_files + [(cut_ko, CUT_KO)]
        script = boot_script(boot, kind, CUT_KO if kind == "window" else ko, seed, check,
                             point, after)
        t0 = time.time()
        if kind is None:
            res = vm.run(script, files=boot_files, pmem_size=PMEM_MB, disk_size=DISK_MB,
                         timeout=900, check=False, allow_reports=True)
            out = res.output
        else:
            proc, log = vm.start(script, files=boot_files, pmem_size=PMEM_MB,
                                 disk_size=DISK_MB, timeout=900)
            failed = rc = None
            try:
                if check:
                    wait_for(log, lambda text: "CHECK_DONE=1" in text, 600)
                if kind == "window":
                    rc = wait_cut(proc, log, 900)
                else:
                    seen = cut_moment(log, kind, rng)
            except AssertionError as e:
                failed = e
            finally:
                power_cut(vm, proc)
            res = GuestRun.load(None, log)
            out = res.output
            if kind == "window" and not failed:
                # the cut came at the point, and after the precondition
                # (the guest's ARMED line may not have left it before the cut)
                assert_cut_at(rc, log, point, after)
                seen = len(statuses(out))
                add_figure(figures, "fs: cuts at protocol points", "%d", 1)
                print("cut %d: at %s, hit %d" % (boot, point, after))
        # the previous cut's checks first: a damaged file system may stop
        # the workload, or the kernel report it (XFS's corruption reports)
        if check and "CHECK_DONE=1" in out:
            check_results(out[:out.index("CHECK_DONE=1")], known, tally, boot - 1)
        check_reports(res)
        if check == "scan" and "CHECK_DONE=1" in out:
            # the test of the trim means something only if files that
            # survived the cut took blocks whose old data was trimmed
            reused = {t: int(v) for t, v in re.findall(
                r"^(ext4|xfs) cache OVERLAP files=\d+ bytes=(\d+)$", out, re.M)}
            print("after the trim cut, files hold %s KiB of the trimmed blocks (ext4, XFS)"
                  % ", ".join(str(reused.get(t, 0) >> 10) for t in oldx))
            add_figure(figures, "fs: trimmed KiB reused by files (ext4, XFS)", "%d, %d",
                       reused.get("ext4", 0) >> 10, reused.get("xfs", 0) >> 10)
            assert sum(reused.values()) > 0, "no file took a trimmed block: %s" % reused
        if kind is None:
            assert res.rc == 0 and "CHECK_DONE=1" in out, res.tail()
            break
        if failed:
            raise failed
        # the precondition, asserted on the last sample before the cut
        missing = precondition(kind, out, seen)
        assert not missing, "cut %d (%s) came too early: %s" % (boot, kind, ", ".join(missing))
        if kind == "detach":
            m = re.search(r"^DETACH_RC=(\d+)(.*)$", out, re.M)
            assert not m or m.group(1) == "0", m.group(0)
            print("cut %d: %s" % (boot, "after the detach ended: " + m.group(2).strip()
                                  if m else "during the detach"))
            add_figure(figures, "fs: detach cuts during, after", "%d, %d", not m, bool(m))
        if kind == "freeze":
            m = re.search(r"^SUSPENDED (\S+)", out, re.M)
            assert m and "s" in m.group(1).lower(), out[-3000:]
        if kind == "trim":
            t0s, t1s = (parse_status(re.search(r"^%s (.*)$" % k, out, re.M).group(1))
                        for k in ("TRIM0", "TRIM1"))
            # the newer copies of the old data were dirty in the cache,
            # and the trim dropped them (3/4: the deletion dirtied blocks too)
            old = TRIM_FILES * 2 * 256
            assert t0s["dirty"] >= old and t1s["dirty"] <= t0s["dirty"] - old * 3 // 4 \
                and t1s["discards"] > t0s["discards"], (t0s, t1s)
        new = logged(out)
        for t in known:
            known[t] += new[t]
            oldx[t] = "".join("X %s %s\n" % m for m in re.findall(
                r"^OLDX %s X (\d+) (\d+)$" % t, out, re.M))
            assert kind != "trim" or oldx[t], "no extents of the old data on %s" % t
        ev, s, vol, _ = statuses(out)[seen - 1]
        if kind == "detach":    # the counters of the cache the detach began with
            s = parse_status(re.search(r"^DETACH_START (.*)$", out, re.M).group(1))
        print("cut %d/%d (%s): %s logged files, %d evictions, dirty %d, writeback %d, "
              "discards %d, around %d%s; boot %.0f s" % (
                  boot, cuts, kind, "+".join(str(len(new[t])) for t in new), ev, s["dirty"],
                  s["wb_pfn_blocks"] + s["wb_bounce_blocks"], s["discards"],
                  s["write_around"], ", volatile held %d" % vol["held"] if vol else "",
                  time.time() - t0), flush=True)
    print("fs cuts %d, fsync'ed files %d (checked %d times), fsck runs %d, fsck errors %d, "
          "lost %d, %.0f s" % (cuts, sum(len(v) for v in known.values()), tally.checked,
                               tally.fsck_runs, tally.fsck_errors, tally.lost,
                               time.time() - t_start))
    add_figure(figures, "fs power cuts (each under ext4 and XFS)", "%d", cuts)
    add_figure(figures, "fs: fsync'ed files checked", "%d", tally.checked)
    add_figure(figures, "fs: fsck runs", "%d", tally.fsck_runs)
    add_figure(figures, "fs: fsck errors", "%d", tally.fsck_errors)
    add_figure(figures, "fs: fsync'ed files lost", "%d", tally.lost)
    return tally


def test_power_cuts_under_ext4_and_xfs(vm, fs_tools, figures, request):
    rng = random.Random(int(os.environ.get("PMC_SEED", "3232")))
    windows = "window" in [KINDS[c % len(KINDS)] for c in range(CUTS)]
    run_chain(vm, fs_tools, rng, CUTS, figures,
              request.getfixturevalue("cut_ko") if windows else None)


FS_MUTANT_CUTS = 1


@pytest.mark.skipif(not LONG, reason="mutation testing: set PMC_LONG=1")
@pytest.mark.parametrize("name", ["control"] + [m.name for m in vm_mutants.FS_MUTANTS])
def test_a_module_mutant_is_caught_under_ext4_and_xfs(name, figures):
    """vm_mutants.check() with the checker "fs": the module built from a
    copy of dm-pmemcache/ with the mutant's edits (none for the control),
    then test_power_cuts_under_ext4_and_xfs with it; the verdict needs
    exit status 1 and FS_DAMAGED in the output."""
    mutant = next((m for m in vm_mutants.FS_MUTANTS if m.name == name), None)
    log = vm_mutants.log_name(vm_mutants.logs_dir(), "fs %s %d cuts" % (name, FS_MUTANT_CUTS))
    verdict, why = vm_mutants.check(mutant, "fs", log, FS_MUTANT_CUTS)
    print("%s, %d cut(s) under ext4 and XFS: %s -- %s (log %s)"
          % (name, FS_MUTANT_CUTS, verdict, why, log))
    if mutant:
        add_figure(figures, "fs mutants, caught", "%d, %d", 1, verdict == "caught")
        assert verdict == "caught", why
    else:
        add_figure(figures, "fs mutant controls, not caught", "%d, %d", 1,
                   verdict == "not caught")
        assert verdict == "not caught", why
