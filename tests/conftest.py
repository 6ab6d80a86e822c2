import pytest

from vm import VM, BZIMAGE, REPORT_TALLY, KASAN_KERNEL


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
# them as one block): figures["crash states checked"] = 69653, ...
FIGURES = {}


@pytest.fixture
def figures():
    return FIGURES


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    kernel = "debug kernel: KASAN, lockdep, kmemleak, DMA-API" if KASAN_KERNEL else "product kernel"
    FIGURES["kernel reports (%s)" % kernel] = "%d in %d guest boots" % (
        REPORT_TALLY["reports"], REPORT_TALLY["boots"])
    terminalreporter.section("figures of this run")
    for k, v in FIGURES.items():
        terminalreporter.write_line("%-40s %s" % (k, v))
