import json

import pytest

from vm import VM, BZIMAGE, REPORT_TALLY, KASAN_KERNEL, add_figure


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
    return VM(request.node.name, tmp_path / "state")


# Figures a test wants shown at the end of the run (make test-long prints
# them as one block): figures["crash states checked"] = 69653, ...  A value
# [fmt, n1, n2, ...] is a sum: tests of several workers that give the same
# figure add up (add_figure), and it is printed as fmt % (n1, n2, ...).
FIGURES = {}


@pytest.fixture
def figures():
    return FIGURES


# Under pytest -n, each worker sends its figures and kernel report tally
# to the controller, which prints them.
def pytest_sessionfinish(session):
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["figures"] = json.dumps([FIGURES, REPORT_TALLY])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    sent = getattr(node, "workeroutput", {}).get("figures")
    if not sent:
        return
    figs, tally = json.loads(sent)
    for k, v in figs.items():
        if isinstance(v, list):
            add_figure(FIGURES, k, *v)
        else:
            FIGURES[k] = v
    for k in REPORT_TALLY:
        REPORT_TALLY[k] += tally[k]


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    kernel = "debug kernel: KASAN, lockdep, kmemleak, DMA-API" if KASAN_KERNEL else "product kernel"
    FIGURES["kernel reports (%s)" % kernel] = "%d in %d guest boots%s" % (
        REPORT_TALLY["reports"], REPORT_TALLY["boots"],
        " (and %d that the harness's own tests inject)" % REPORT_TALLY["injected"]
        if REPORT_TALLY["injected"] else "")
    terminalreporter.section("figures of this run")
    for k, v in FIGURES.items():
        if isinstance(v, list):
            v = v[0] % tuple(v[1:])
        terminalreporter.write_line("%-40s %s" % (k, v))
