import datetime
import json
import os
import subprocess
import sys

import pytest

from vm import VM, BZIMAGE, boot_name, REPO, LOGDIR, REPORT_TALLY, QEMU_RETRIES, KASAN_KERNEL, add_figure


def pytest_collection_modifyitems(config, items):
    # VM tests need the built kernel; say so once instead of failing each.
    if not BZIMAGE.exists():
        skip = pytest.mark.skip(reason="no kernel at %s: run make kernel" % BZIMAGE)
        for item in items:
            if "vm" in item.fixturenames:
                item.add_marker(skip)


@pytest.fixture
def vm(request, tmp_path):
    """A fresh guest (new pmem and disk images) for one test."""
    return VM(boot_name(request.node.name), tmp_path / "state")


# Figures a test wants shown at the end of the run (make test-long prints
# them as one block): figures["crash states checked"] = 69653, ...  A value
# [fmt, n1, n2, ...] is a sum: tests of several workers that give the same
# figure add up (add_figure), and it is printed as fmt % (n1, n2, ...).
# The block is also written as JSON (figures_json): to
# $KCACHE/test-logs/<checkout>/figures-<time>-<pid>.json, and to PMC_FIGURES_OUT
# if set (docs/figures/*.json are kept runs: tests/render_figures.py makes
# docs/reliability.md's figures table from them).
FIGURES = {}

# Skips that only say "this is the long form": the only skips a run under
# CI=true (.ci/run) may have. Any other skip (no kernel, a missing tool, a
# test module that did not build) fails such a run.
LONG_ONLY_SKIPS = (
    "long crash model run: set PMC_LONG=1",         # test_crash_model.py
    "mutation testing: set PMC_LONG=1",             # test_durability.py
    "long form: PMC_LONG=1 (make test-long)",       # test_fuzz.py
)
# Boots booted again (QEMU's abort before init, a boot hung before init)
# that a session tolerates; more fail it (PMC_RETRY_LIMIT).
RETRY_LIMIT = int(os.environ.get("PMC_RETRY_LIMIT", "3"))
# Why this session fails although its tests passed (printed at the end).
HARNESS_FAILURES = []


@pytest.fixture
def figures():
    return FIGURES


# Under pytest -n, each worker sends its figures, kernel report tally and
# boot retries to the controller, which prints them.
def pytest_sessionfinish(session):
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["figures"] = json.dumps([FIGURES, REPORT_TALLY, QEMU_RETRIES])
        return
    HARNESS_FAILURES[:] = harness_failures(session.config)
    if HARNESS_FAILURES and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    sent = getattr(node, "workeroutput", {}).get("figures")
    if not sent:
        return
    figs, tally, retries = json.loads(sent)
    for k, v in figs.items():
        if isinstance(v, list):
            add_figure(FIGURES, k, *v)
        else:
            FIGURES[k] = v
    for k in REPORT_TALLY:
        REPORT_TALLY[k] += tally[k]
    for k in QEMU_RETRIES:
        QEMU_RETRIES[k] += retries.get(k, 0)


def skip_reason(report):
    """The reason of a skipped test report ("Skipped: " stripped)."""
    longrepr = report.longrepr
    # (path, line, reason); a list when it came from a pytest -n worker
    reason = str(longrepr[2]) if isinstance(longrepr, (tuple, list)) else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def harness_failures(config):
    """What fails the run besides its tests: boot retries over the limit,
    and under CI=true any skip that is not a long-only one."""
    failed = []
    retried = sum(QEMU_RETRIES.values())
    if retried > RETRY_LIMIT:
        failed.append("%d boots booted again (%s), more than PMC_RETRY_LIMIT=%d"
                      % (retried, ", ".join("%s %d" % kv for kv in QEMU_RETRIES.items()),
                         RETRY_LIMIT))
    if os.environ.get("CI") == "true":
        tr = config.pluginmanager.get_plugin("terminalreporter")
        for rep in (tr.stats.get("skipped", []) if tr else []):
            reason = skip_reason(rep)
            if reason not in LONG_ONLY_SKIPS:
                failed.append("CI=true: unexpected skip of %s: %s" % (rep.nodeid, reason))
    return failed


def git(*args):
    try:
        return subprocess.run(["git", "-C", str(REPO)] + list(args), capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def figures_json(config, exitstatus, shown):
    """The figures block as the kept JSON of this run (tests/render_figures.py)."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    counts = {k: len(v) for k, v in (tr.stats.items() if tr else []) if k}
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith("PMC_") or k in ("CI", "KBUILD", "LONG")}
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "kernel": "debug" if KASAN_KERNEL else "product",
        "command": " ".join(["%s=%s" % kv for kv in env.items()] +
                            ["pytest"] + sys.argv[1:]),
        "exitstatus": int(exitstatus) or (1 if HARNESS_FAILURES else 0),
        "tests": counts,
        "retries": dict(QEMU_RETRIES, limit=RETRY_LIMIT),
        "kernel_reports": dict(REPORT_TALLY),
        "harness_failures": HARNESS_FAILURES,
        "figures": shown,
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if HARNESS_FAILURES:
        terminalreporter.section("the run fails: harness checks", red=True)
        for line in HARNESS_FAILURES:
            terminalreporter.write_line(line)
    if not FIGURES and not REPORT_TALLY["boots"] and not any(QEMU_RETRIES.values()):
        return
    kernel = "debug kernel: KASAN, lockdep, kmemleak, DMA-API" if KASAN_KERNEL else "product kernel"
    FIGURES["kernel reports (%s)" % kernel] = "%d in %d guest boots%s" % (
        REPORT_TALLY["reports"], REPORT_TALLY["boots"],
        " (and %d that the harness's own tests inject)" % REPORT_TALLY["injected"]
        if REPORT_TALLY["injected"] else "")
    FIGURES["boots booted again"] = "%d after QEMU's abort, %d hung before init (limit %d)" % (
        QEMU_RETRIES["boots"], QEMU_RETRIES["hung boots"], RETRY_LIMIT)
    terminalreporter.section("figures of this run")
    shown = {}
    for k, v in FIGURES.items():
        if isinstance(v, list):
            v = v[0] % tuple(v[1:])
        shown[k] = v
        terminalreporter.write_line("%-40s %s" % (k, v))
    text = json.dumps(figures_json(config, exitstatus, shown), indent=1) + "\n"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    paths = [LOGDIR / ("figures-%s-%d.json" % (stamp, os.getpid()))]
    if os.environ.get("PMC_FIGURES_OUT"):
        paths.append(os.path.abspath(os.environ["PMC_FIGURES_OUT"]))
    for path in paths:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            terminalreporter.write_line("figures written to %s" % path)
        except OSError as e:
            terminalreporter.write_line("figures not written to %s: %s" % (path, e))
