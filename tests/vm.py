"""Drive the QEMU guest from pytest: boot, run a script, collect logs.

One boot per VM.run(). Each boot has three channels (qemu/run-vm.sh): the
serial console (kernel messages only), the script's own output (a virtio
port), and init's result (exit status, whole kernel log, kmemleak). Script
output is parsed from its channel alone, so a kernel line can never land
inside a script line. Any kernel report (BUG, WARNING, KASAN, lockdep,
kmemleak, DMA-API, hung tasks) fails the run, whether or not the script
itself succeeded.
"""
import contextlib
import fcntl
import hashlib
import os
import re
import signal
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KCACHE = Path(os.environ.get("KCACHE", "/var/cache/dm-pmemcache"))
KBUILD = Path(os.environ.get("KBUILD", KCACHE / "build"))
BZIMAGE = KBUILD / "arch/x86/boot/bzImage"
IMAGE = KCACHE / "guest-base.cpio.gz"
# One folder per checkout: test runs of two checkouts (a worktree, a fresh
# clone) that share KCACHE never overwrite each other's logs.
LOGDIR = KCACHE / "test-logs" / ("%s-%s" % (REPO.name, hashlib.sha1(bytes(REPO)).hexdigest()[:8]))
# Logs of this checkout written since this process started belong to
# another pytest process on the same checkout (tests/mutants.sh runs one):
# never reuse their names.
PROCESS_START = time.time()
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
# The guest cut its own power (isa-debug-exit, the PMC_CUT_HOOKS test build
# of tests/test_window_cuts.py); run-vm.sh appends CUT_LINE to the console.
EXIT_CUT = 123
CUT_LINE = re.compile(r"^run-vm: power cut by the guest: isa-debug-exit value (\d+)$", re.M)


def build(cmd):
    """Run a build command under a lock of this checkout: tests may run in
    parallel workers (pytest -n) that build the same folders."""
    with open(REPO / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(cmd, capture_output=True, text=True)


def host_mutant(tmp, name, old, new, host_sources, shared):
    """A host program built from a copy of dm-pmemcache/ in which @name
    (one of its files) has @old replaced by @new, which must occur exactly
    once: tests/host/@host_sources plus the copy's @shared files and its
    userspace shim.  Returns the binary's path."""
    src = Path(tmp) / "src"
    shutil.copytree(REPO / "dm-pmemcache", src,
                    ignore=shutil.ignore_patterns("*.o", "*.ko", "*.cmd", ".*"))
    text = (src / name).read_text()
    assert text.count(old) == 1, "%s: the mutant's text occurs %d times" % (name, text.count(old))
    (src / name).write_text(text.replace(old, new))
    binary = Path(tmp) / "mutant"
    p = subprocess.run(["gcc", "-O2", "-std=gnu11", "-w", "-I%s" % src, "-o", str(binary)]
                       + [str(REPO / "tests/host" / f) for f in host_sources]
                       + [str(src / f) for f in shared] + [str(src / "user/pmc_shim_user.c")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return str(binary)


KSRC = Path(os.environ.get("KSRC", KCACHE / "linux"))
KMOD = REPO / "tests/kmod"


def build_test_kmods():
    """Build the test modules of tests/kmod against the kernel under test
    (under the kernel build lock: they build in its O= folder)."""
    return subprocess.run(["flock", str(KCACHE / "kernel-build.lock"),
                           "make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
                           "M=%s" % KMOD, "modules"], capture_output=True, text=True)


def guest_files():
    """Built artefacts every guest gets, if they exist."""
    files = [(REPO / "tests/guest/lib.sh", "/test/lib.sh")]
    for ko in sorted(REPO.glob("dm-pmemcache/*.ko")) + sorted(REPO.glob("tests/kmod/*.ko")):
        files.append((ko, "/lib/modules/extra/" + ko.name))
    tool = REPO / "userspace/pmemcachectl"
    if tool.exists():
        files.append((tool, "/usr/sbin/pmemcachectl"))
    return files


@dataclass
class BootFiles:
    """Where one boot's three channels are written (see qemu/run-vm.sh)."""
    console: Path   # serial console: kernel messages
    out: Path       # the script's stdout and stderr
    result: Path    # init's exit status, kernel log and kmemleak report

    @classmethod
    def of(cls, log):
        return cls(log, log.with_suffix(".out"), log.with_suffix(".result"))

    def unlink(self):
        for p in (self.console, self.out, self.result, self.qemu_stderr):
            p.unlink(missing_ok=True)

    @property
    def qemu_stderr(self):
        return self.console.with_name(self.console.name + ".qemu")

    def read(self):
        """(console, output, result) as written so far."""
        def text(p):
            return p.read_text(errors="replace") if p.exists() else ""
        return text(self.console) + text(self.qemu_stderr), text(self.out), text(self.result)


def _section(text, name):
    m = re.search(r"@@%s-BEGIN@@\n(.*)@@%s-END@@" % (name, name), text, re.S)
    return m.group(1) if m else ""


@dataclass
class GuestRun:
    rc: int
    console: str        # the serial console: kernel messages only
    output: str         # what the script printed, nothing else
    log_path: Path
    result: str = ""    # init's report after the script (absent after a power cut)

    @classmethod
    def load(cls, rc, files):
        console, output, result = files.read()
        return cls(rc, console, output, files.console, result)

    @property
    def dmesg(self):
        """The whole kernel log, as dmesg printed it after the script."""
        return _section(self.result, "DMESG")

    def reports(self):
        """Kernel reports: on the console (all a power-cut boot has), in the
        final kernel log (messages below the console's loglevel) and in
        kmemleak's report."""
        text = "\n".join((self.console, self.dmesg, _section(self.result, "KMEMLEAK")))
        # a line on the console is in the final kernel log too: count it once
        return list(dict.fromkeys(l for l in text.splitlines() if KERNEL_REPORTS.search(l)))

    def tail(self, n=60):
        return ("--- script output ---\n%s\n--- console ---\n%s"
                % ("\n".join(self.output.splitlines()[-n:]),
                   "\n".join(self.console.splitlines()[-n // 2:])))

    def values(self, key):
        """Values the script printed as 'KEY=value' lines."""
        return [m.group(1) for m in re.finditer(r"^%s=(.*)$" % re.escape(key), self.output, re.M)]

    def value(self, key):
        vals = self.values(key)
        assert vals, "guest printed no %s= line:\n%s" % (key, self.tail())
        return vals[-1]


# QEMU 7.2 under TCG sometimes aborts on its own assertion while the guest
# kernel is still setting up PCI devices, long before our code runs (seen in
# about 1 of 300 boots on a loaded 2-core machine), or dies of a signal
# there (a SIGSEGV at the same point of boot, once): run-vm.sh says so.
QEMU_BOOT_ABORT = re.compile(r"msix_table_mmio_write: Assertion|^run-vm: QEMU died of signal",
                             re.M)
QEMU_RETRIES = {"boots": 0, "hung boots": 0}
# A TCG guest on a loaded 2-core machine sometimes stops early in boot,
# before init (seen: the serial console silent after "tsc: Unable to
# calibrate against PIT" for 15 minutes, a debug kernel; and a boot stuck
# after ACPI).  Init announces itself within about 60 s even then, three
# times that on the debug kernel: a guest that has not after BOOT_WAIT is
# killed and booted again, once.  Nothing of the test has run then.
BOOT_WAIT = 300 * TIMEOUT_FACTOR


def wait_for_init(proc, files, seconds=None):
    """Wait until the guest's init announced itself or QEMU ended; return
    True if neither happened within @seconds (default BOOT_WAIT): a hung
    boot, which the caller kills and boots again."""
    deadline = time.time() + (BOOT_WAIT if seconds is None else seconds)
    while proc.poll() is None and "@@BOOTED" not in files.read()[0]:
        if time.time() >= deadline:
            return True
        time.sleep(0.2)
    return False


def kill_boot(proc):
    """Kill a boot's whole process group (run-vm.sh, QEMU, its helpers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def qemu_aborted_before_boot(files):
    """True if QEMU died on its known MSI-X assertion before the guest's init
    announced itself: nothing of the test ran, the images are untouched, and
    booting again is the same test."""
    console, output, _ = files.read()
    return bool(QEMU_BOOT_ABORT.search(console)) and "@@BOOTED" not in console and not output


# Guest boots whose console was checked for kernel reports in this run,
# and the reports found (make test-long prints them, with the kernel).
REPORT_TALLY = {"boots": 0, "reports": 0, "injected": 0}


@contextlib.contextmanager
def injected_reports():
    """Reports that a harness test provokes on purpose are not the
    product's: counted apart."""
    before = REPORT_TALLY["reports"]
    try:
        yield
    finally:
        REPORT_TALLY["injected"] += REPORT_TALLY["reports"] - before
        REPORT_TALLY["reports"] = before


def add_figure(figures, key, fmt, *numbers):
    """figures[key] += numbers, printed as fmt % numbers: a figure that
    several tests (or pytest workers) add up."""
    old = figures.get(key)
    if isinstance(old, list) and old[0] == fmt:
        numbers = [a + b for a, b in zip(old[1:], numbers)]
    figures[key] = [fmt] + list(numbers)


def check_reports(res, allow=None):
    """Fail on any kernel report in a guest's console; count the boot.
    @allow: a regex of report lines that the test expects (and says why)."""
    reports = res.reports()
    if allow:
        reports = [l for l in reports if not re.search(allow, l)]
    REPORT_TALLY["boots"] += 1
    REPORT_TALLY["reports"] += len(reports)
    if reports:
        raise AssertionError("kernel reported problems (log %s):\n%s\n--- tail ---\n%s"
                             % (res.log_path, "\n".join(reports[:20]), res.tail()))


def discard_boot(proc, files, kind, why):
    """A boot that is booted again (the caller's one retry): counted in
    QEMU_RETRIES[kind] (conftest shows the count among the figures and fails
    a run over PMC_RETRY_LIMIT), and scanned for kernel reports like any
    other boot: a report in it fails the test, never hides behind the retry."""
    QEMU_RETRIES[kind] += 1
    print("%s (%s): booting again" % (why, files.console))
    check_reports(GuestRun.load(proc.returncode, files))


def boot_name(test_name):
    """The name a test's boots are logged under: the test's, and for a run
    of a mutant or its control (tests/vm_mutants.py sets PMC_BOOT_TAG)
    "<test>.<tag>", so that a mutant's expected failure is never found
    under the product test's own name."""
    tag = os.environ.get("PMC_BOOT_TAG", "")
    return "%s.%s" % (test_name, tag) if tag else test_name


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
                log=None, icount=False, pmem2_size=0):
        """The run-vm.sh command line of one boot. Sizes in MiB. pmem2_size:
        a second NVDIMM, /dev/pmem1 (state folder's pmem2.img). pmem_size
        up to 64 GiB works with the default memory (a sparse NVDIMM file;
        run-vm.sh checks the host has room for what the guest may write,
        and the module's index needs about 250 MB at 64 GiB). icount: one
        vCPU whose clocks count its instructions (run-vm.sh --icount)."""
        if not BZIMAGE.exists():
            raise RuntimeError("no kernel at %s: run make kernel" % BZIMAGE)
        script_path = self.state / ("script-%d.sh" % self.boots)
        script_path.write_text("set -e\n. /test/lib.sh\n" + script)
        cmd = [str(RUN_VM), "--kernel", str(BZIMAGE), "--initrd", str(IMAGE),
               "--state", str(self.state), "--script", str(script_path),
               "--iommu", iommu, "--timeout", str(timeout * TIMEOUT_FACTOR),
               "--disks", str(disks),
               "--disk-size", str(disk_size), "--pmem-size", str(pmem_size),
               "--memory", str(memory)]
        chan = BootFiles.of(log)
        cmd += ["--log", str(chan.console), "--out", str(chan.out),
                "--result", str(chan.result)]
        append = " ".join(x for x in (BOOT_APPEND, append) if x)
        if append:
            cmd += ["--append", append]
        if throttle:
            cmd += ["--throttle", throttle]
        if icount:
            cmd.append("--icount")
        if pmem2_size:
            cmd += ["--pmem2-size", str(pmem2_size)]
        for src, dst in list(guest_files()) + list(files):
            cmd += ["--files", "%s:%s" % (src, dst)]
        return cmd

    def _log_path(self, logdir=None):
        """The console log of the next boot; BootFiles.of() names the others."""
        logdir = logdir or LOGDIR
        logdir.mkdir(parents=True, exist_ok=True)
        while True:
            self.boots += 1
            log = logdir / ("%s.%d.log" % (self.name, self.boots))
            try:
                if log.stat().st_mtime >= PROCESS_START:
                    continue        # a concurrent process's (or this one's) boot
            except FileNotFoundError:
                pass
            # logs left by an earlier pytest run must never be read as this one's
            BootFiles.of(log).unlink()
            try:
                os.close(os.open(log, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return log
            except FileExistsError:
                continue            # another process claimed it just now

    def run(self, script, *, check=True, allow_reports=False, **opts):
        """Boot, run script, power off. With check, a non-zero exit fails."""
        for attempt in range(2):
            log = self._log_path()
            cmd = self.command(script, log=log, **opts)
            err = open(str(log) + ".stderr", "w+")
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                    text=True, start_new_session=True)
            files = BootFiles.of(log)
            if wait_for_init(proc, files) and not attempt:
                kill_boot(proc)
                err.close()
                discard_boot(proc, files, "hung boots", "the guest did not reach init in %d s"
                             % BOOT_WAIT)
                continue
            proc.wait()
            err.seek(0)
            stderr = err.read()
            err.close()
            if attempt or not qemu_aborted_before_boot(files):
                break
            discard_boot(proc, files, "boots", "QEMU aborted before the guest booted")
        res = GuestRun.load(proc.returncode, files)
        if not allow_reports:
            check_reports(res)
        if check and res.rc != 0:
            raise AssertionError("guest script exited %d (log %s)\n%s\n--- tail ---\n%s"
                                 % (res.rc, log, stderr.strip(), res.tail()))
        return res

    def start(self, script, **opts):
        """Boot in the background (for power cuts); returns (Popen, BootFiles)."""
        for attempt in range(2):
            log = self._log_path()
            cmd = self.command(script, log=log, **opts)
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            files = BootFiles.of(log)
            if attempt:
                break
            # Until init announces itself, QEMU's boot abort may still come.
            if wait_for_init(proc, files):
                kill_boot(proc)
                discard_boot(proc, files, "hung boots", "the guest did not reach init in %d s"
                             % BOOT_WAIT)
                continue
            if proc.poll() is None or not qemu_aborted_before_boot(files):
                break
            discard_boot(proc, files, "boots", "QEMU aborted before the guest booted")
        return proc, files

    @staticmethod
    def power_cut(proc):
        """Kill QEMU at once: pmem keeps exactly what the guest had stored.

        run-vm.sh runs QEMU in its own process group (timeout --foreground),
        so killing the group kills QEMU itself, not only the script.  A
        guest that cut its own power has left no group to kill."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
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


def wait_down(proc, files, seconds, describe=None):
    """Seconds from the guest's GOING_DOWN=1 line (on its script output)
    until QEMU is gone, for a boot of VM.start() whose script goes down
    itself (poweroff -f, reboot -f).  A guest that never prints the line
    (or ends first) fails.  One still up `seconds` after it gets a power
    cut and fails with describe(console, output), by default the end of
    its console."""
    deadline = time.time() + 900
    while "GOING_DOWN=1\n" not in files.read()[1]:
        if proc.poll() is not None or time.time() > deadline:
            VM.power_cut(proc)
            raise AssertionError("the guest never went down:\n" + files.read()[1][-3000:])
        time.sleep(0.2)
    t0 = time.time()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        VM.power_cut(proc)
        console, output, _ = files.read()
        raise AssertionError("the guest did not end within %d s of going down:\n%s"
                             % (seconds, describe(console, output) if describe
                                else console[-3000:])) from None
    return time.time() - t0
