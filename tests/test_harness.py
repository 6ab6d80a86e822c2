"""The VM harness itself: boot, exit status, kernel-report detection, and
script output that no kernel message can break."""
import os
import re

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
def test_only_a_qemu_abort_before_boot_is_booted_again(tmp_path, console, output, again):
    files = BootFiles.of(tmp_path / "t.1.log")
    files.console.write_text(console)
    files.out.write_text(output)
    files.qemu_stderr.write_text(ABORT if again is not None else "")
    assert qemu_aborted_before_boot(files) is bool(again)


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


@pytest.mark.parametrize("how", ["run", "start"])
def test_a_boot_that_never_reaches_init_is_killed_and_booted_again(tmp_path, monkeypatch, how):
    monkeypatch.setattr(vm_module, "LOGDIR", tmp_path)
    monkeypatch.setattr(vm_module, "BOOT_WAIT", 1)
    hung = vm_module.QEMU_RETRIES["hung boots"]
    # the retries these tests provoke are not the run's: undone afterwards
    monkeypatch.setitem(vm_module.QEMU_RETRIES, "hung boots", hung)
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
def test_a_discarded_boot_is_scanned_for_kernel_reports(tmp_path, monkeypatch, how):
    """The boot the harness throws away and boots again is a boot like any
    other: its kernel report fails the test (and the retry is counted)."""
    monkeypatch.setattr(vm_module, "LOGDIR", tmp_path)
    monkeypatch.setattr(vm_module, "BOOT_WAIT", 1)
    hung = vm_module.QEMU_RETRIES["hung boots"]
    # the retries these tests provoke are not the run's: undone afterwards
    monkeypatch.setitem(vm_module.QEMU_RETRIES, "hung boots", hung)
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
