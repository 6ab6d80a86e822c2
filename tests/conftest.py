import pytest

from vm import VM, BZIMAGE


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
