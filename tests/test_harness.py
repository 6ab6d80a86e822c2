"""The VM harness itself: boot, exit status, kernel-report detection, and
script output that no kernel message can break."""
import os
import re
import subprocess

import pytest

import vm as vm_module

from vm import KBUILD, KMOD, EXIT_TIMEOUT, VM, BootFiles, GuestRun, build_test_kmods, injected_reports, \
    qemu_aborted_before_boot


def test_guest_boots_the_patched_kernel(vm):
    res = vm.run('echo "RELEASE=$(uname -r)"; echo "VERSION=$(uname -v)"')
    release = (KBUILD / "include/config/kernel.release").read_text().strip()
    compile_h = (KBUILD / "include/generated/utsversion.h").read_text()
    uts = re.search(r'#define UTS_VERSION "(.*)"', compile_h).group(1)
    assert res.value("RELEASE") == release
    assert "-pmemcache" in release
    assert res.value("VERSION") == uts


def test_guest_exit_status_reaches_the_host(vm):
    res = vm.run("echo before; exit 3", check=False)
    assert res.rc == 3
    assert "before" in res.output


def test_kernel_warning_in_guest_fails_the_run(vm):
    with injected_reports(), pytest.raises(AssertionError, match="kernel reported problems"):
        vm.run('echo "WARNING: CPU: 0 PID: 1 injected by the harness test" > /dev/kmsg')


def test_hung_guest_is_killed_by_the_timeout(vm):
    res = vm.run("sleep 600", check=False, timeout=30)
    assert res.rc == EXIT_TIMEOUT


def test_hung_task_is_a_kernel_report(vm):
    # the product kernel has the hung-task detector; its line fails a run
    with injected_reports(), pytest.raises(AssertionError, match="blocked for more than"):
        vm.run('echo "<3>INFO: task x:1 blocked for more than 20 seconds." > /dev/kmsg')


# A console storm from two sides: a kernel module printing warnings and two
# shell loops writing /dev/kmsg, while the script prints numbered lines of
# many lengths (some as long as fio's JSON). With PMC_HARNESS_MUTANT=console
# the script writes to the shared serial console instead of its own channel
# and the host parses the console, as the harness did before: the test then
# fails (lines torn by kernel messages), which shows that it can.
FLOOD_LINES = 1500


def expected_line(i):
    words = "%d-%d" % (i, i * 7919 % 10007)
    return "L %d %s" % (i, "." * (i % 61) + (words * (400 if i % 97 == 0 else 1 + i % 9)))


FLOOD = r"""
insmod /lib/modules/extra/printk_flood.ko lines=%(klines)d &
for j in 1 2; do
	(i=0; while [ $i -lt %(klines)d ]; do
		echo "<4>pmc-kmsg $j $i: a /dev/kmsg line to crowd the console" > /dev/kmsg
		i=$((i + 1))
	done) &
done
%(redirect)s
i=0
while [ $i -lt %(n)d ]; do
	w="$i-$((i * 7919 %% 10007))"
	r=$((i %% 97 == 0 ? 400 : 1 + i %% 9))
	dots=$(head -c $((i %% 61)) /dev/zero | tr '\000' .)
	line="L $i $dots"
	k=0
	while [ $k -lt $r ]; do line="$line$w"; k=$((k + 1)); done
	echo "$line"
	i=$((i + 1))
done
wait
echo "FLOOD_DONE=1"
"""


def test_script_lines_survive_a_console_flood(vm):
    proc = build_test_kmods()
    assert proc.returncode == 0 and (KMOD / "printk_flood.ko").exists(), proc.stderr
    mutant = os.environ.get("PMC_HARNESS_MUTANT") == "console"
    res = vm.run(FLOOD % dict(n=FLOOD_LINES, klines=FLOOD_LINES,
                              redirect="exec > /dev/console 2>&1" if mutant else ""),
                 timeout=600)
    floods = len(re.findall(r"pmc-(flood|kmsg) ", res.console))
    assert floods > FLOOD_LINES, "the kernel console was not flooded (%d lines)" % floods
    text = res.console if mutant else res.output
    got = [l for l in text.splitlines() if l.startswith("L ")]
    want = [expected_line(i) for i in range(FLOOD_LINES)]
    torn = [(w, g) for w, g in zip(want, got) if w != g]
    assert len(got) == len(want) and not torn, (
        "%d script lines read, %d expected; first torn: %s"
        % (len(got), len(want), torn[:1]))
    assert re.search(r"^FLOOD_DONE=1$", text, re.M)


def test_reports_come_from_console_kernel_log_and_kmemleak():
    # below the console's loglevel a report is only in the final kernel log;
    # kmemleak's findings are only in its report; a console line is in the
    # kernel log too and counts once; script output is never scanned
    dmesg = ["[    1.0] WARNING: CPU: 0 PID: 1 at x", "[    3.1] md0: ok",
             "[    3.2] BUG: sleeping function called from invalid context"]
    result = ("@@KMEMLEAK-BEGIN@@\nunreferenced object 0xffff888004b8 (size 64):\n"
              "@@KMEMLEAK-END@@\n@@DMESG-BEGIN@@\n%s\n@@DMESG-END@@\n@@EXIT 0@@\n"
              % "\n".join(dmesg))
    res = GuestRun(0, dmesg[0] + "\n", "WARNING: not a kernel line\n", None, result)
    assert res.reports() == [dmesg[0], dmesg[2], "unreferenced object 0xffff888004b8 (size 64):"]
    assert res.dmesg.splitlines() == dmesg


ABORT = ("qemu-system-x86_64: ../../hw/pci/msix.c:218: msix_table_mmio_write: Assertion "
         "`addr + size <= dev->msix_entries_nr * PCI_MSIX_ENTRY_SIZE' failed.\n")


@pytest.mark.parametrize("console,output,again", [
    ("[    0.39] mtrr: your CPUs had inconsistent MTRRdefType settings\n", "", True),
    ("[    0.39] x\n@@BOOTED 6.1.192-pmemcache+ #1@@\n", "", False),   # the test ran
    ("[    0.39] x\n", "KEY=1\n", False),                             # the script ran
    ("[    0.39] x\n", "", None),                                      # no abort at all
])
@pytest.mark.parametrize("abort", [ABORT, None])
def test_only_a_qemu_abort_before_boot_is_booted_again(tmp_path, console, output, again, abort):
    """QEMU's assertion (its own stderr) or its death by a signal (run-vm.sh's
    line in the console log) before init: booted again; after it, never."""
    files = BootFiles.of(tmp_path / "t.1.log")
    if again is not None and abort is None:
        console += "run-vm: QEMU died of signal 11\n"
    files.console.write_text(console)
    files.out.write_text(output)
    files.qemu_stderr.write_text(abort if again is not None and abort else "")
    assert qemu_aborted_before_boot(files) is bool(again)


def test_a_mutant_run_logs_its_boots_under_its_own_name(monkeypatch, tmp_path):
    """A mutant's boots (PMC_BOOT_TAG, set by tests/vm_mutants.py for each
    mutant and its control) never log under the product test's name."""
    import vm_mutants
    monkeypatch.delenv("PMC_BOOT_TAG", raising=False)
    assert vm_module.boot_name("test_x[0]") == "test_x[0]"
    m = vm_mutants.MUTANTS[0]
    monkeypatch.setenv("PMC_BOOT_TAG", vm_mutants.boot_tag(m))
    name = VM(vm_module.boot_name("test_x[0]"), tmp_path / "state").name
    assert name.startswith("test_x_0_.mutant-origin-flush-before-CLEAN"), name
    monkeypatch.setenv("PMC_BOOT_TAG", vm_mutants.boot_tag(None))
    assert vm_module.boot_name("test_x") == "test_x.control"


def test_concurrent_runs_on_one_checkout_never_share_a_log(tmp_path):
    """Two pytest processes on one checkout (tests/mutants.sh runs one
    beside the caller's) name boots of the same test alike: a log written
    since this process started is someone else's and is skipped; an older
    one is an earlier run's and is reused."""
    os.utime(tmp_path, None)
    old = tmp_path / "t.1.log"
    old.write_text("an earlier run")
    os.utime(old, (0, 0))
    theirs = tmp_path / "t.2.log"
    theirs.write_text("another process, now")
    a, b = VM("t", tmp_path / "a"), VM("t", tmp_path / "b")
    assert a._log_path(tmp_path) == old and old.read_text() == ""
    assert b._log_path(tmp_path) == tmp_path / "t.3.log"   # skips 1 (a's) and 2
    assert theirs.read_text() == "another process, now"


class FakeBoots(VM):
    """VM whose boots are shell commands: the first never reaches init
    (a hung TCG boot), the next ones announce init, print and exit 0."""

    def command(self, script, *, log=None, **opts):
        files = BootFiles.of(log)
        if self.boots == 1:
            return ["sh", "-c", "echo $$ > %s.pid; exec sleep 15" % log]
        return ["sh", "-c", "echo '@@BOOTED x@@' >> %s; echo KEY=ran > %s; "
                "echo '@@EXIT 0@@' > %s" % (files.console, files.out, files.result)]


@pytest.fixture
def fake_boots(tmp_path, monkeypatch):
    """Fake boots that give up on init after 1 s; returns the hung-boot
    count before. The retries and boots they make are not the run's:
    undone afterwards."""
    monkeypatch.setattr(vm_module, "LOGDIR", tmp_path)
    monkeypatch.setattr(vm_module, "BOOT_WAIT", 1)
    hung = vm_module.QEMU_RETRIES["hung boots"]
    monkeypatch.setitem(vm_module.QEMU_RETRIES, "hung boots", hung)
    monkeypatch.setitem(vm_module.REPORT_TALLY, "boots", vm_module.REPORT_TALLY["boots"])
    return hung


@pytest.mark.parametrize("how", ["run", "start"])
def test_a_boot_that_never_reaches_init_is_killed_and_booted_again(tmp_path, fake_boots, how):
    hung = fake_boots
    guest = FakeBoots("fake", tmp_path / "state")
    if how == "run":
        assert guest.run("true").value("KEY") == "ran"
    else:
        proc, files = guest.start("true")
        proc.wait()
        assert "KEY=ran" in files.read()[1]
    assert vm_module.QEMU_RETRIES["hung boots"] == hung + 1
    pid = int((tmp_path / "fake.1.log.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)         # the hung boot's process group is gone


class ReportingHungBoot(FakeBoots):
    """The first boot prints a kernel WARNING and then hangs before init."""

    def command(self, script, *, log=None, **opts):
        if self.boots == 1:
            return ["sh", "-c", "echo '[    1.0] WARNING: CPU: 0 PID: 1 at x' > %s; exec sleep 15"
                    % BootFiles.of(log).console]
        return super().command(script, log=log, **opts)


@pytest.mark.parametrize("how", ["run", "start"])
def test_a_discarded_boot_is_scanned_for_kernel_reports(tmp_path, fake_boots, how):
    """The boot the harness throws away and boots again is a boot like any
    other: its kernel report fails the test (and the retry is counted)."""
    hung = fake_boots
    guest = ReportingHungBoot("fake", tmp_path / "state")
    with injected_reports(), pytest.raises(AssertionError, match="kernel reported problems"):
        if how == "run":
            guest.run("true")
        else:
            guest.start("true")
    assert vm_module.QEMU_RETRIES["hung boots"] == hung + 1


# The session-level checks of conftest.py, in a pytest of their own: the
# real conftest.py and vm.py beside a made-up test file.
SESSION_TEST = '''
import pytest
import vm

def test_a(figures):
    figures["answer"] = 42

@pytest.mark.skipif(True, reason=%(reason)r)
def test_skipped():
    pass

def test_retries():
    vm.QEMU_RETRIES["boots"] += %(retries)d
'''


def session(tmp_path, reason="long crash model run: set PMC_LONG=1", retries=0, **env):
    """Run SESSION_TEST under the real conftest.py: (exit status, output,
    the figures JSON it wrote)."""
    import json
    import shutil
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    run = tmp_path / "run"
    run.mkdir(parents=True)
    for f in ("conftest.py", "vm.py"):
        shutil.copy(os.path.join(here, f), run / f)
    (run / "test_session.py").write_text(SESSION_TEST % dict(reason=reason, retries=retries))
    out = tmp_path / "figures.json"
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "PMC_RETRY_LIMIT")}
    environ.update(KCACHE=str(tmp_path / "kcache"), KBUILD=str(tmp_path / "no-build"),
                   PMC_FIGURES_OUT=str(out), **env)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                           "test_session.py"], cwd=run, env=environ, capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr, json.loads(out.read_text())


def test_the_figures_block_is_written_as_json_with_its_run(tmp_path):
    rc, out, figs = session(tmp_path, PMC_SEED="5")
    assert rc == 0, out
    assert figs["figures"]["answer"] == 42
    assert figs["figures"]["boots booted again"].startswith("0 after QEMU's abort, 0 hung")
    assert figs["retries"] == {"boots": 0, "hung boots": 0, "limit": 3}
    assert figs["kernel"] == "product" and figs["exitstatus"] == 0
    assert "PMC_SEED=5" in figs["command"] and "test_session.py" in figs["command"]
    assert figs["tests"] == {"passed": 2, "skipped": 1}
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC$", figs["date"]) and figs["commit"]


def test_boot_retries_over_the_limit_fail_the_run(tmp_path):
    rc, out, figs = session(tmp_path, retries=4)
    assert rc == 1 and "4 boots booted again" in out and "PMC_RETRY_LIMIT=3" in out, out
    assert figs["retries"]["boots"] == 4 and figs["exitstatus"] == 1
    rc, out, _ = session(tmp_path / "limit", retries=4, PMC_RETRY_LIMIT="4")
    assert rc == 0, out


@pytest.mark.parametrize("reason,ci,fails", [
    ("long crash model run: set PMC_LONG=1", "true", False),     # long-only: allowed
    ("mutation testing: set PMC_LONG=1", "true", False),
    ("no valgrind", "true", True),
    ("no valgrind", "", False),                                  # not under CI
])
def test_under_ci_a_skip_that_is_not_long_only_fails_the_run(tmp_path, reason, ci, fails):
    rc, out, figs = session(tmp_path, reason=reason, CI=ci)
    assert rc == (1 if fails else 0), out
    assert ("unexpected skip of test_session.py::test_skipped: " + reason in out) is fails, out
    assert bool(figs["harness_failures"]) is fails


def test_workers_figures_reports_and_retries_add_up():
    """pytest -n: what each worker sends (pytest_sessionfinish) adds up in
    the controller (pytest_testnodedown)."""
    import json
    import types
    import conftest
    saved = [dict(d) for d in (conftest.FIGURES, vm_module.REPORT_TALLY, vm_module.QEMU_RETRIES)]
    try:
        conftest.FIGURES.clear()
        for d in (vm_module.REPORT_TALLY, vm_module.QEMU_RETRIES):
            d.update({k: 0 for k in d})
        for n in (1, 2):
            sent = json.dumps([{"cuts": ["%d of %d", n, 10], "seed": n},
                               {"boots": 5, "reports": 0, "injected": n},
                               {"boots": n, "hung boots": 1}])
            conftest.pytest_testnodedown(types.SimpleNamespace(workeroutput={"figures": sent}), None)
        assert conftest.FIGURES == {"cuts": ["%d of %d", 3, 20], "seed": 2}
        assert vm_module.REPORT_TALLY == {"boots": 10, "reports": 0, "injected": 3}
        assert vm_module.QEMU_RETRIES == {"boots": 3, "hung boots": 2}
    finally:
        for d, old in zip((conftest.FIGURES, vm_module.REPORT_TALLY, vm_module.QEMU_RETRIES), saved):
            d.clear()
            d.update(old)


# ---- the docs against the code (issue 30): figures and constants that
# docs/reliability.md states must be the ones the code and tests use.

REPO = vm_module.REPO


def source(path):
    return (REPO / path).read_text()


def code(path, pattern):
    """The groups of pattern's first match in a source file, as ints."""
    m = re.search(pattern, source(path), re.S | re.M)
    assert m, "%s: no match for %r (the check needs updating)" % (path, pattern)
    return tuple(int(g) for g in m.groups())


def prose(doc_path="docs/reliability.md"):
    """A doc with the generated figures section cut out (the kept runs
    quote what held on their day: render_figures.py annotates those)."""
    import render_figures
    text = source(doc_path)
    if render_figures.BEGIN in text:
        head, rest = text.split(render_figures.BEGIN)
        text = head + rest.split(render_figures.END, 1)[1]
    return " ".join(text.split())        # line breaks as spaces


def number(s):
    return int(s.replace(",", ""))


def window_cuts():
    """(short list of points, cuts of the long plan at the default rounds)."""
    import random
    import test_window_cuts as wc
    rounds, = code("tests/test_window_cuts.py", r'PMC_WINDOW_ROUNDS", "(\d+)"')
    saved, wc.ROUNDS = wc.ROUNDS, rounds
    try:
        return wc.SHORT, len(wc.plan(random.Random(1), only=None, long=True))
    finally:
        wc.ROUNDS = saved


def doc_constants():
    """(doc, regex over its prose, the values the code has): each regex
    must occur, and each occurrence's numbers must be the code's."""
    import render_figures
    short_points, long_cuts = window_cuts()
    fuzz = code("tests/test_bad_input.py",
                r'PMC_FUZZ_TABLES", "(\d+)" if LONG else "(\d+)".*?'
                r'PMC_FUZZ_MESSAGES", "(\d+)" if LONG else "(\d+)"')
    powercuts = code("tests/test_target_powercut.py", r'PMC_POWERCUTS", "(\d+)" if LONG else "(\d+)"')
    volatile = code("tests/test_durability.py", r'PMC_DURABLE_CUTS", "(\d+)" if LONG else "(\d+)"')
    factor, = code("tests/vm.py", r"TIMEOUT_FACTOR = (\d+) if KASAN_KERNEL")
    boot_wait, = code("tests/vm.py", r"BOOT_WAIT = (\d+) \* TIMEOUT_FACTOR")
    rel = "docs/reliability.md"
    seeds = re.search(r'parametrize\("seed", \[([\d, ]+)\]\)\s*def test_every_acknowledged_write_survives'
                      r'_crashes\(crash_model, seed\):\s*r = run_model\(crash_model, "--ops", "(\d+)"',
                      source("tests/test_crash_model.py"))
    assert seeds, "test_crash_model.py: the short runs moved (the check needs updating)"
    quick = code("tests/host/mutants.py", r'^QUICK_RUNS = \[\["--ops", "(\d+)", "--seed", str\(s\)\] '
                 r'for s in \([\d, ]+\)\]')
    return [
        (rel, r"short forms \((\d+) crash model seeds of (\d[\d,]*) operations",
         (len(seeds.group(1).split(",")), int(seeds.group(2)))),
        (rel, r"every mutant until one of (\d+) runs of (\d[\d,]*) operations catches it",
         (len(re.search(r'^QUICK_RUNS = .*for s in \(([\d, ]+)\)', source("tests/host/mutants.py"),
                        re.M).group(1).split(",")), quick[0])),
        (rel, r"every mutant caught by each of (\d+) runs of (\d[\d,]*) operations",
         (len(re.search(r'^LONG_RUNS = .*for s in \(([\d, ]+)\)', source("tests/host/mutants.py"),
                        re.M).group(1).split(",")),
          code("tests/host/mutants.py", r'^LONG_RUNS = \[\["--ops", "(\d+)"')[0])),
        (rel, r"long forms \(crash model `--ops (\d+)`, a 3-writer `--ops (\d+)` and a mirrored\s+"
              r"`--ops (\d+)`",
         code("tests/test_crash_model.py", r'"--ops", "(\d+)", "--seed", "7",.*?"--ops", "(\d+)", '
              r'"--seed", "8",\s*"--writers", "3".*?"--mirror", "--ops", "(\d+)", "--seed", "7"')),
        (rel, r"3 crash model seeds of [\d,]+\s+operations and (\d+) mirrored ones of ([\d,]+)",
         (len(re.search(r'parametrize\("seed", \[([\d, ]+)\]\)\ndef test_a_mirrored_cache',
                        source("tests/test_crash_model.py")).group(1).split(",")),
          code("tests/test_crash_model.py", r'"--mirror", "--ops", "(\d+)", "--seed", str\(seed\)')[0])),
        (rel, r"at the N-th hit of one of (\d+) named points", (render_figures.cut_points(),)),
        # test_full_failing.py: centiseconds, fio's start included
        (rel, r"fail with `EIO` within (\d+) s",
         tuple(n // 100 for n in code("tests/test_full_failing.py",
                                      r'for name in \("CACHED", "UNCACHED"\):.*?cs < (\d+)'))),
        (rel, r"resume and remove within (\d+) s",
         tuple(n // 100 for n in code("tests/test_full_failing.py",
                                      r'for name in \("SUSPEND", "RELOAD".*?cs < (\d+)'))),
        (rel, r"the guest gone within (\d+) s",
         code("tests/test_shutdown.py", r"wait_down\(proc, boot, (\d+)\)")),
        (rel, r"the guest powered off within (\d+) s",
         code("tests/test_md_poweroff.py", r"^DOWN_S = (\d+)$")),
        (rel, r"`flush` fails within (\d+) s",
         code("tests/test_faults.py",
              r'^PMEM_GONE = r""".*?timeout (\d+) dmsetup message pc 0 flush 2>/dev/null \|\| rc=')),
        (rel, r"(\d[\d,]*) fuzzed table lines and (\d+) messages", (fuzz[1], fuzz[3])),
        (rel, r"(\d[\d,]*) table lines and (\d+) messages\) and prints", (fuzz[0], fuzz[2])),
        (rel, r"(\d+) power cuts, (\d+) cuts over the volatile origin \(one per mode",
         (powercuts[1], volatile[1])),
        (rel, r"(\d+) power cuts, (\d+) cuts over the volatile origin, every window point cut",
         (powercuts[0], volatile[0])),
        (rel, r"(\d+) window cuts \(", (len(short_points),)),
        (rel, r"(\d+) power cuts under ext4 and XFS at once",
         code("tests/test_fs_powercut.py", r"^SHORT_CUTS, LONG_CUTS = (\d+), \d+$")),
        (rel, r"(\d+) power cuts under ext4 and XFS \(every boot kind",
         code("tests/test_fs_powercut.py", r"^SHORT_CUTS, LONG_CUTS = \d+, (\d+)$")),
        (rel, r"at least (\d+) logged files per file system; the first cut",
         code("tests/test_fs_powercut.py", r"^MIN_FILES = (\d+)")),
        (rel, r"\(at least (\d+) files logged per file system after the thaw\)",
         code("tests/test_fs_powercut.py", r"^AFTER_THAW = (\d+)")),
        (rel, r"the third after (\d+) MiB of files per file system were written back",
         code("tests/test_fs_powercut.py", r"^TRIM_FILES = (\d+)")),
        (rel, r"`recover_load` cuts \((\d+) cuts\)", (long_cuts,)),
        (rel, r"until (\d[\d,]*) writes are acknowledged \((\d[\d,]*) with `PMC_LONG=1`\)",
         code("tests/test_durability.py", r"acks=(\d+) if not LONG else (\d+)")),
        (rel, r"within (\d+) s \((\d+) s on the debug kernel\)", (boot_wait, boot_wait * factor)),
        (rel, r"checks the sectors of the next (\d+) writes",
         code("tests/test_durability.py", r"^UNSEEN_MAX = (\d+)")),
        (rel, r"at least (\d+) writes sent around the cache since the layer's last flush",
         code("tests/test_durability.py", r"^AROUND_UNFLUSHED = (\d+)")),
        (rel, r"the cut once no block is dirty and at least (\d+) writes went around",
         code("tests/test_durability.py", r"^AROUND_UNFLUSHED = (\d+)")),
        (rel, r"(\d+) named cases get the decision",
         (len(re.findall(r'^\t\t\{ "', source("tests/host/mirror_check.c"), re.M)),)),
        (rel, r"`mirror_check --model`: (\d+) seeds of (\d[\d,]*) random runs",
         (len(re.search(r"^MODEL_SEEDS = \(([\d, ]+)\)", source("tests/test_mirror_model.py"),
                        re.M).group(1).split(",")),
          code("tests/test_mirror_model.py", r"^MODEL_RUNS = (\d+)")[0])),
        (rel, r"(\d+) mutants of `pmc_mirror.c`",
         (source("tests/test_mirror_model.py").split("\nMUTANTS = [")[1].split("\n]\n")[0]
          .count('\n    ("'),)),
        (rel, r"more than `PMC_RETRY_LIMIT` \((\d+)\)",
         code("tests/conftest.py", r'PMC_RETRY_LIMIT", "(\d+)"')),
        ("docs/dm-pmemcache.rst", r"the notifier waits at most (\d+) s",
         code("dm-pmemcache/pmemcache.h", r"#define PMC_SHUTDOWN_WAIT\s+\((\d+) \* HZ\)")),
    ]


def test_the_docs_state_the_constants_the_code_has():
    wrong = []
    for doc, pattern, want in doc_constants():
        found = [tuple(number(g) for g in m.groups()) for m in re.finditer(pattern, prose(doc))]
        if not found:
            wrong.append("%s no longer says %r: reword the check with the doc" % (doc, pattern))
        wrong += ["%s: %r says %s, the code has %s" % (doc, pattern, got, want)
                  for got in found if got != tuple(want)]
    assert not wrong, "\n".join(wrong)


def test_the_short_window_cuts_the_doc_lists_are_the_tests():
    short_points, _ = window_cuts()
    m = re.search(r"\d+ window cuts \(((?:`\w+`(?:, )?)+)", prose())
    assert m and re.findall(r"`(\w+)`", m.group(1)) == short_points, m and m.group(1)


def test_test_names_in_the_docs_exist():
    """Every test (and test file) the docs, README and kept figures name."""
    defined = set()
    for f in (REPO / "tests").rglob("*.py"):
        defined.update(re.findall(r"^\s*def (test_\w+)", f.read_text(), re.M))
    texts = {str(p.relative_to(REPO)): p.read_text()
             for p in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
             + sorted((REPO / "docs").glob("*.rst")) + sorted((REPO / "docs/figures").glob("*.json"))}
    missing = []
    for name, text in texts.items():
        # a pytest -k word of a kept run's command: part of a test's name
        keywords = set(re.findall(r"-k (test_\w+)", text))
        for t in sorted(set(re.findall(r"\b(test_\w+?)(\.py)?\b", text))):
            if not t[1] and t[0] in keywords and any(t[0] in d for d in defined):
                continue
            if t[1] and not list(REPO.glob("tests/**/%s.py" % t[0])):
                missing.append("%s: %s.py" % (name, t[0]))
            elif not t[1] and t[0] not in defined and not (REPO / "tests" / (t[0] + ".py")).exists():
                missing.append("%s: %s" % (name, t[0]))
    assert not missing, "named in the docs, not in tests/:\n" + "\n".join(missing)


def test_the_figures_table_is_rendered_from_the_kept_runs():
    """docs/reliability.md's figures section is exactly what
    tests/render_figures.py makes of docs/figures/*.json: a hand edit fails."""
    import render_figures
    doc = source("docs/reliability.md")
    want = render_figures.expected(doc)
    assert doc == want, "docs/reliability.md's figures section is not the rendered one: " \
        "run /usr/bin/python3 tests/render_figures.py (and keep figures in docs/figures/)"


def figure_rows(doc):
    """(figure, value) of each row of the figures table of a doc's text."""
    import render_figures
    section = doc.split(render_figures.BEGIN)[1].split(render_figures.END)[0]
    rows, inside = [], False
    for line in section.split("\n"):
        if line.startswith("| figure | last run | from |"):
            inside = True
        elif inside and line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append((cells[0], cells[1]))
    assert rows, "no figures table"
    return rows


def quantities_shown_twice(doc):
    import render_figures
    seen, twice = {}, []
    for key, value in figure_rows(doc):
        if render_figures.per_run(key):
            continue
        q = render_figures.quantity(key)
        if q in seen:
            twice.append("%r (%s) and %r (%s)" % (seen[q][0], seen[q][1], key, value))
        seen[q] = (key, value)
    return twice


def test_the_figures_table_gives_each_quantity_once():
    """A figure a newer run gives too (the hand-copied "host mutants
    26 / 26" beside the generated "45, caught 45") must not be shown."""
    twice = quantities_shown_twice(source("docs/reliability.md"))
    assert not twice, "shown twice in the figures table:\n" + "\n".join(twice)


def stale_counts(doc):
    """Figures of counts the code has (host mutants, --break modes) that
    neither match the code nor say what it has now."""
    import render_figures
    wrong = []
    for key, value in figure_rows(doc):
        what = render_figures.COUNTED.get(render_figures.quantity(key))
        if not what:
            continue
        now = what[2](REPO)
        if render_figures.first_number(value) != now and \
                "%s has %d %s now" % (what[0], now, what[1]) not in value:
            wrong.append("%s: %s (the code has %d)" % (key, value, now))
    return wrong


def test_counts_in_the_figures_table_are_the_codes_or_say_so():
    wrong = stale_counts(source("docs/reliability.md"))
    assert not wrong, "\n".join(wrong)


def test_a_newer_run_supersedes_a_quantity_and_a_stale_count_says_so(tmp_path):
    import json
    import render_figures
    old = {"date": "2026-12-06", "kernel": "product", "command": "x", "transcribed": "by hand",
           "figures": {"host mutants / caught / controls not caught": "26 / 26 / 1 of 1",
                       "kernel reports (product kernel)": "0 in 3 guest boots"}}
    new = {"date": "2026-12-07", "kernel": "product", "command": "pytest", "exitstatus": 0,
           "figures": {"host mutants": "45, caught 45",
                       "kernel reports (product kernel)": "0 in 0 guest boots"}}
    (tmp_path / "a.json").write_text(json.dumps(old))
    (tmp_path / "b.json").write_text(json.dumps(new))
    runs = render_figures.load_runs(tmp_path)
    text = render_figures.render(runs, render_figures.cut_points(), REPO)
    assert "26 / 26" not in text
    now = render_figures.host_mutant_counts()["all"]
    note = "" if now == 45 else "; `tests/host/mutants.py --list` has %d host mutants now" % now
    assert "| host mutants | 45, caught 45%s | run `b` |" % note in text
    # a figure every run gives about itself stays, once per run
    assert text.count("| kernel reports (product kernel) |") == 2
    # the older run alone: its figure is shown, with what the code has now
    (tmp_path / "b.json").unlink()
    text = render_figures.render(render_figures.load_runs(tmp_path), 17, REPO)
    assert "26 / 26 / 1 of 1" in text and ("has %d host mutants now" % now) in text


def test_a_run_at_other_cut_points_says_so(tmp_path):
    import json
    import render_figures
    run = {"date": "2026-12-05", "kernel": "product", "command": "pytest", "commit": "a" * 40,
           "dirty": True, "exitstatus": 0, "tests": {"passed": 3}, "cut_points": 16,
           "figures": {"cuts": "51 | 0"}}
    (tmp_path / "r.json").write_text(json.dumps(run))
    text = render_figures.render(render_figures.load_runs(tmp_path), 17)
    assert "run at 16 cut points, `pmc_cut.h` has 17 now" in text
    assert "| `r` | 2026-12-05 | aaaaaaaaaaaa (dirty tree) | product | `pytest` | written by pytest, " \
           "exit status 0; tests: 3 passed;" in text
    assert "| cuts | 51 \\| 0 | run `r` |" in text
    assert "run at" not in render_figures.render(render_figures.load_runs(tmp_path), 16)


def test_skip_reasons_read_alike_from_this_process_and_from_a_worker():
    import types
    import conftest
    for longrepr in (("t.py", 3, "Skipped: no valgrind"), ["t.py", 3, "Skipped: no valgrind"]):
        assert conftest.skip_reason(types.SimpleNamespace(longrepr=longrepr)) == "no valgrind"


def test_the_power_cut_oracle_allows_only_a_write_whose_line_was_lost():
    """A cut can keep write i in pmem and lose its "W i" line (virtio-serial
    is emptied by QEMU's main loop): expected_sectors() allows that one write
    after the last acknowledged one, in the shape of a write of the writer
    (one sector or one whole block), and nothing older or newer."""
    import test_target_powercut as tp
    out = "W 1 8 8\nACK 1\nW 2 3 1\nACK 2\n"
    allowed, nacked = tp.expected_sectors(out)
    assert nacked == 2 and allowed.unlogged == 3
    base = {s: 0 for s in range(tp.NBLOCKS * 8)}
    base.update({s: 1 for s in range(8, 16)})
    base[3] = 2
    assert tp.lost_writes(base, allowed) == {}
    whole = {**base, **{s: 3 for s in range(16, 24)}}
    assert tp.lost_writes(whole, allowed) == {}
    assert tp.lost_writes({**base, 40: 3}, allowed) == {}
    torn = {**base, 16: 3, 17: 3}
    assert set(tp.lost_writes(torn, allowed)) == {16, 17}
    assert set(tp.lost_writes({**base, 9: 0}, allowed)) == {9}       # ack 1 lost
    assert set(tp.lost_writes({**base, 40: 4}, allowed)) == {40}     # never issued
    # with the write in flight logged, no other write is allowed
    allowed, _ = tp.expected_sectors(out + "W 3 16 8\n")
    assert allowed.unlogged is None
    assert set(tp.lost_writes({**base, 40: 3}, allowed)) == {40}


def test_the_tests_python_has_no_undefined_name():
    """pyflakes3 (qemu/deps.sh installs it) over the tests' Python: a name
    used and never defined or imported fails only when its test runs, and
    in a VM test that is many minutes in (d6582f1 left lost_writes
    unimported in two files: five mirror tests failed in CI)."""
    files = sorted(str(p) for p in (REPO / "tests").rglob("*.py"))
    p = subprocess.run(["pyflakes3"] + files, capture_output=True, text=True)
    bad = [l for l in (p.stdout + p.stderr).splitlines()
           if "undefined name" in l or "syntax" in l.lower()]
    assert not bad, "\n".join(bad)
