"""Drive the QEMU guest from pytest: boot, run a script, collect logs.

One boot per VM.run(). The guest prints its kernel log and the script's
exit status between markers (qemu/guest-init.sh); this module parses them
and fails on any kernel report (BUG, WARNING, KASAN, lockdep, kmemleak,
DMA-API, hung tasks), whether or not the script itself succeeded.
"""
import fcntl
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KCACHE = Path(os.environ.get("KCACHE", "/var/cache/dm-pmemcache"))
KBUILD = Path(os.environ.get("KBUILD", KCACHE / "build"))
BZIMAGE = KBUILD / "arch/x86/boot/bzImage"
IMAGE = KCACHE / "guest-base.cpio.gz"
LOGDIR = KCACHE / "test-logs"
RUN_VM = REPO / "qemu/run-vm.sh"


def _kasan_kernel():
    try:
        return "CONFIG_KASAN=y" in (KBUILD / ".config").read_text()
    except OSError:
        return False


# A KASAN kernel under TCG -cpu max (5-level paging) reports a wild access
# in an interrupt taken during identify_boot_cpu(), at the 5-level direct
# map address of an irq_desc, before any code of ours runs.  4-level paging
# avoids it; the product kernel keeps 5-level paging.
KASAN_KERNEL = _kasan_kernel()
BOOT_APPEND = "no5lvl" if KASAN_KERNEL else ""
# KASAN, lockdep and kmemleak make a TCG guest about three times slower.
TIMEOUT_FACTOR = 3 if KASAN_KERNEL else 1

# Lines that mean the kernel found something wrong. Boot banners of the
# debug options ("kmemleak: Kernel memory leak detector initialized",
# "DMA-API: debugging enabled") deliberately do not match.
KERNEL_REPORTS = re.compile(
    r"BUG:|WARNING:|Oops|KASAN|possible recursive locking|"
    r"possible circular locking|inconsistent lock state|"
    r"unreferenced object 0x|kmemleak: \d+ new suspected|"
    r"DMA-API: \S+ \S+: |Kernel panic|general protection fault|"
    r"Call Trace:|blocked for more than \d+ seconds")

EXIT_TIMEOUT = 124
EXIT_CRASH = 125


def build(cmd):
    """Run a build command under a lock of this checkout: tests may run in
    parallel workers (pytest -n) that build the same folders."""
    with open(REPO / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(cmd, capture_output=True, text=True)


def guest_files():
    """Built artefacts every guest gets, if they exist."""
    files = [(REPO / "tests/guest/lib.sh", "/test/lib.sh")]
    for ko in sorted(REPO.glob("dm-pmemcache/*.ko")) + sorted(REPO.glob("tests/kmod/*.ko")):
        files.append((ko, "/lib/modules/extra/" + ko.name))
    tool = REPO / "userspace/pmemcachectl"
    if tool.exists():
        files.append((tool, "/usr/sbin/pmemcachectl"))
    return files


# "[   11.045203] text\n" printed after something else on the same line
MID_LINE_KERNEL_MSG = re.compile(r"(?<=[^\n])\[ *\d+\.\d+\] [^\n]*\n")


@dataclass
class GuestRun:
    rc: int
    console: str
    log_path: Path

    @property
    def dmesg(self):
        m = re.search(r"@@DMESG-BEGIN@@\n(.*)@@DMESG-END@@", self.console, re.S)
        return m.group(1) if m else ""

    @property
    def output(self):
        """What the script printed (and kernel lines), without the final dmesg dump.
        A kernel line that landed in the middle of a script line (TCG's
        "hrtimer: interrupt took ...") is cut out, joining the two halves."""
        out = re.sub(r"@@DMESG-BEGIN@@.*@@DMESG-END@@\n?", "", self.console, flags=re.S)
        return MID_LINE_KERNEL_MSG.sub("", out)

    def reports(self):
        return [l for l in self.console.splitlines() if KERNEL_REPORTS.search(l)]

    def tail(self, n=60):
        return "\n".join(self.console.splitlines()[-n:])

    def values(self, key):
        """Values the script printed as 'KEY=value' lines."""
        return [m.group(1) for m in re.finditer(r"^%s=(.*)$" % re.escape(key), self.output, re.M)]

    def value(self, key):
        vals = self.values(key)
        assert vals, "guest printed no %s= line:\n%s" % (key, self.tail())
        return vals[-1]


# Guest boots whose console was checked for kernel reports in this run,
# and the reports found (make test-long prints them, with the kernel).
REPORT_TALLY = {"boots": 0, "reports": 0}


def check_reports(res):
    """Fail on any kernel report in a guest's console; count the boot."""
    reports = res.reports()
    REPORT_TALLY["boots"] += 1
    REPORT_TALLY["reports"] += len(reports)
    if reports:
        raise AssertionError("kernel reported problems (log %s):\n%s\n--- tail ---\n%s"
                             % (res.log_path, "\n".join(reports[:20]), res.tail()))


class VM:
    """A guest with its own state folder (pmem and disk images).

    Successive run() calls on one VM boot again on the same images, as after
    a reboot or a power cut.
    """

    def __init__(self, name, state_dir):
        self.name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        self.state = Path(state_dir)
        self.state.mkdir(parents=True, exist_ok=True)
        self.boots = 0

    def command(self, script, *, files=(), iommu="none", append="", timeout=600,
                disks=6, disk_size=512, pmem_size=1024, throttle=None, memory=2048,
                log=None):
        if not BZIMAGE.exists():
            raise RuntimeError("no kernel at %s: run make kernel" % BZIMAGE)
        script_path = self.state / ("script-%d.sh" % self.boots)
        script_path.write_text("set -e\n. /test/lib.sh\n" + script)
        cmd = [str(RUN_VM), "--kernel", str(BZIMAGE), "--initrd", str(IMAGE),
               "--state", str(self.state), "--script", str(script_path),
               "--iommu", iommu, "--timeout", str(timeout * TIMEOUT_FACTOR),
               "--disks", str(disks),
               "--disk-size", str(disk_size), "--pmem-size", str(pmem_size),
               "--memory", str(memory), "--log", str(log)]
        append = " ".join(x for x in (BOOT_APPEND, append) if x)
        if append:
            cmd += ["--append", append]
        if throttle:
            cmd += ["--throttle", throttle]
        for src, dst in list(guest_files()) + list(files):
            cmd += ["--files", "%s:%s" % (src, dst)]
        return cmd

    def _log_path(self):
        LOGDIR.mkdir(parents=True, exist_ok=True)
        self.boots += 1
        log = LOGDIR / ("%s.%d.log" % (self.name, self.boots))
        # a log left by an earlier pytest run must never be read as this one's
        log.unlink(missing_ok=True)
        return log

    def run(self, script, *, check=True, allow_reports=False, **opts):
        """Boot, run script, power off. With check, a non-zero exit fails."""
        log = self._log_path()
        cmd = self.command(script, log=log, **opts)
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        console = log.read_text(errors="replace") if log.exists() else ""
        res = GuestRun(proc.returncode, console, log)
        if not allow_reports:
            check_reports(res)
        if check and res.rc != 0:
            raise AssertionError("guest script exited %d (log %s)\n%s\n--- tail ---\n%s"
                                 % (res.rc, log, proc.stderr.strip(), res.tail()))
        return res

    def start(self, script, **opts):
        """Boot in the background (for power cuts); returns (Popen, log path)."""
        log = self._log_path()
        cmd = self.command(script, log=log, **opts)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        return proc, log

    @staticmethod
    def power_cut(proc):
        """Kill QEMU at once: pmem keeps exactly what the guest had stored.

        run-vm.sh runs QEMU in its own process group (timeout --foreground),
        so killing the group kills QEMU itself, not only the script."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # QEMU, a grandchild, can outlive run-vm.sh by a moment and still
        # hold the image locks the next boot needs: wait for the group.
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
