"""Host crash-consistency model of the dm-pmemcache commit protocol.

Builds tests/host/crash_model (the module's shared metadata code compiled
in userspace over a model of pmem where stores are volatile until flushed
and fenced), runs it, and checks what it prints.  No VM, no kernel.

The long run (>= 10,000 crash states) is enabled with PMC_LONG=1 (or
LONG=1), as `make test-long` is expected to do.
"""
import os
import re
import subprocess

import pytest

from vm import build

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = os.path.join(HERE, "host")
BIN = os.path.join(HOST, "crash_model")

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")

# Each of these removes one fence or flush of the protocol (see
# docs/format.md); the checker has to notice every one of them.
BROKEN_STEPS = ["data-fence", "record-fence", "free-fence", "data-flush",
                "record-flush", "format-order", "waitprev"]
# waitprev breaks the writeback ordering, not a fence: it needs a writeback
# of an older copy still in flight when the newer one is picked, which
# takes a longer run.
BROKEN_ARGS = {"waitprev": ["--ops", "600", "--seed", "2"]}


@pytest.fixture(scope="module")
def crash_model():
    p = build(["make", "-s", "-C", HOST, "crash_model"])
    assert p.returncode == 0, p.stdout + p.stderr
    return BIN


def run_model(binary, *args, timeout=600):
    p = subprocess.run([binary, *args], capture_output=True, text=True,
                       timeout=timeout)
    m = re.search(r"crash_states=(\d+) format_states=(\d+) bad_states=(\d+) "
                  r"violations=(\d+)", p.stdout)
    assert m, f"no summary line:\n{p.stdout}\n{p.stderr}"
    res = {k: int(v) for k, v in zip(
        ("crash_states", "format_states", "bad_states", "violations"),
        m.groups())}
    res["rc"] = p.returncode
    res["stdout"] = p.stdout
    res["stderr"] = p.stderr
    print(p.stdout.strip())
    return res


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_acknowledged_write_survives_crashes(crash_model, seed):
    r = run_model(crash_model, "--ops", "300", "--seed", str(seed))
    assert r["crash_states"] > 1000
    assert r["format_states"] > 0
    assert r["violations"] == 0, r["stderr"][-2000:]
    assert r["bad_states"] == 0
    assert r["rc"] == 0


@pytest.mark.parametrize("step", BROKEN_STEPS)
def test_checker_catches_a_missing_flush_or_fence(crash_model, step):
    args = BROKEN_ARGS.get(step, ["--ops", "300", "--seed", "1"])
    r = run_model(crash_model, *args, "--break", step)
    assert r["crash_states"] > 0
    assert r["violations"] > 0, f"--break {step} was not caught"
    assert r["rc"] != 0


@pytest.mark.skipif(not LONG, reason="long crash model run: set PMC_LONG=1")
def test_long_crash_model_at_least_10000_states(crash_model, figures):
    r = run_model(crash_model, "--ops", "4000", "--seed", "7",
                  "--images", "4", timeout=1800)
    figures["crash states checked (violations)"] = "%d (%d)" % (r["crash_states"],
                                                                r["violations"])
    figures["interrupted formats checked"] = r["format_states"]
    assert r["crash_states"] >= 10000
    assert r["violations"] == 0, r["stderr"][-2000:]
    assert r["rc"] == 0
