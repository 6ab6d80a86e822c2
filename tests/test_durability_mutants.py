"""The verdict of tests/mutants.sh (tests/vm_mutants.py) and the make-test
subset of its VM mutants (issue 30).

A mutant is "caught" only if its checker's exit status says the check
failed and the output has a token that only a failing check prints
(vm_mutants.verdict). Host tests here feed the verdict canned logs: a
passing run (its figures block says "acknowledged writes lost 0", which
the old `grep -q "acknowledged writes lost"` took for a catch), runs that
failed for other reasons, and real pytest failure output of
check_results(). They also apply every mutant to today's sources: each
edit must match exactly once.

The VM test runs the cheapest cuts over the volatile origin that catch
two module mutants (no origin flush before CLEAN, no FUA on
write-around), and the same checker on the unmutated module (the
negative control), judged by the same verdict.
"""
import os
import subprocess
import sys

import pytest

import vm_mutants
from vm import BZIMAGE, KBUILD, REPO
from vm_mutants import FS_DAMAGED, LOST, NO_FUA, MutantError, apply_edits, verdict

# what conftest.py prints at the end of a passing run (its format)
FIGURES = "".join("%-40s %s\n" % kv for kv in [
    ("cuts over the volatile origin (ack. writes)", "1 (388)"),
    ("acknowledged writes lost", 0),
    ("window cuts: acknowledged writes lost", 0),
    ("kernel reports (product kernel)", "0 in 3 guest boots")])
PASSED = (".                                                                        [100%]\n"
          "============================= figures of this run ==============================\n"
          + FIGURES + "1 passed in 341.20s (0:05:41)\n")
# failed, but not on a lost write: a guest that did not boot
OTHER_FAILURE = ("F\n=================================== FAILURES ===================================\n"
                 "E       AssertionError: the guest did not boot in 3 tries\n"
                 "FAILED tests/test_durability.py::test_power_cuts_over_a_volatile_origin[0]"
                 " - AssertionError: the guest did not boot in 3 tries\n"
                 "1 failed in 912.02s (0:15:12)\n")
MODEL_OK = "ops=300 crash_states=5120 format_states=40 bad_states=0 violations=0\n"
MODEL_BAD = ("VIOLATION (W3): sector 8 (block 1) got 0; entries: 1\n"
             "ops=300 crash_states=100 format_states=40 bad_states=1 violations=1\n")
MODEL_ABORT = "crash_model: crash_model.c:1203: pick: Assertion `n > 0' failed.\n"

CHECK_FAILS = '''
from test_durability import check_results

def test_lost():
    check_results("ORIGIN CHECK sectors=253892 ok=220976 bad=32916\\n", "ORIGIN")
'''
CHECK_PASSES = '''
from test_durability import check_results

def test_none_lost():
    assert check_results("ORIGIN CHECK sectors=100 ok=100 bad=0\\n", "ORIGIN") == 100

def test_no_result():
    check_results("", "ORIGIN")
'''


def nested_pytest(tmp_path, name, text):
    """pytest on a small test of check_results(): its real output."""
    (tmp_path / name).write_text(text)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", "-q",
                        "--rootdir", str(tmp_path), str(tmp_path / name)],
                       cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "tests")))
    return p.returncode, p.stdout + p.stderr


def test_a_passing_run_is_not_caught():
    """The old verdict keyed on a text a passing run prints."""
    assert "acknowledged writes lost" in PASSED     # old: grep -q ... -> "caught"
    for checker in ("vm", "window:over_w2", "window-quiet:wb_c1", "fua", "fs"):
        assert verdict(checker, 0, PASSED) == "not caught"
        # the figures block even with a failed status (a later test failed)
        assert verdict(checker, 1, PASSED) == "not caught"
        assert verdict(checker, 1, OTHER_FAILURE) == "not caught"
        assert verdict(checker, 1, "") == "not caught"


def test_the_failure_token_and_exit_status_are_both_needed():
    for checker, token in (("vm", LOST), ("window:over_w2", LOST),
                           ("window-quiet:wb_c1", LOST), ("fua", NO_FUA), ("fs", FS_DAMAGED)):
        failed = "E       AssertionError: %s (ORIGIN):\n" % token
        assert verdict(checker, 1, failed) == "caught"
        assert verdict(checker, 0, failed) == "not caught"
        assert verdict(checker, 2, failed) == "not caught"     # interrupted
        # the token without the assertion that raises it (a source listing)
        assert verdict(checker, 1, token + "\n") == "not caught"
    # the FUA checker wants its own token, the cut checkers theirs
    assert verdict("fua", 1, "AssertionError: %s (CACHE)" % LOST) == "not caught"
    assert verdict("vm", 1, "AssertionError: %s: 4 sent, 2 FUA" % NO_FUA) == "not caught"


def test_the_model_verdict():
    assert verdict("model", 1, MODEL_BAD) == "caught"
    assert verdict("model", 0, MODEL_OK) == "not caught"
    assert verdict("model", 134, MODEL_ABORT) == "not caught"     # an assertion of the model
    assert verdict("model", 1, MODEL_OK) == "not caught"
    assert verdict("model", "timeout", MODEL_BAD) == "not caught"


def test_the_verdict_of_real_pytest_output(tmp_path):
    """check_results() under pytest: a lost write is caught, no lost write
    and a check without a result (another failure) are not."""
    rc, out = nested_pytest(tmp_path, "test_fails.py", CHECK_FAILS)
    assert rc == 1, out
    assert verdict("vm", rc, out) == "caught", out
    assert "bad=32916" in vm_mutants.finding("vm", out), out
    rc, out = nested_pytest(tmp_path, "test_passes.py", CHECK_PASSES)
    assert rc == 1 and "1 passed" in out and "no ORIGIN check result" in out, out
    assert verdict("vm", rc, out) == "not caught", out


def test_only_the_token_constants_spell_the_tokens():
    """No passing run can print a token that no source spells out."""
    for token in (LOST, NO_FUA, FS_DAMAGED):
        for d in ("tests", "dm-pmemcache", "qemu"):
            for f in (REPO / d).rglob("*"):
                if f.is_file() and f.suffix in (".py", ".sh", ".c", ".h", ""):
                    assert token not in f.read_text(errors="replace"), f


def test_every_mutant_applies_exactly_once():
    src = REPO / "dm-pmemcache"
    mutants = vm_mutants.all_mutants()
    assert len(mutants) >= 14
    mutants += vm_mutants.FS_MUTANTS
    assert len([m for m in mutants if m.checker == "model"]) == 8
    for m in mutants:
        text = (src / m.file).read_text()
        new = apply_edits(text, m.edits)
        assert new != text, m.name
    for name in vm_mutants.QUICK:
        assert [m for m in mutants if m.name == name and m.checker == "vm"], name
    with pytest.raises(MutantError, match="0 times"):
        apply_edits("a b c", [("d", "x")])
    with pytest.raises(MutantError, match="2 times"):
        apply_edits("a b a", [("a", "x")])
    with pytest.raises(MutantError, match="2 times"):
        apply_edits("x\na a\n", [(2, "a", "b")])
    # the second edit of a multi-edit mutant is checked as well
    with pytest.raises(MutantError, match="0 times"):
        apply_edits("a b", [("a", "x"), ("c", "y")])


def test_a_fence_mutant_keeps_the_control_flow(tmp_path):
    """Recovery's fence is the body of a brace-less if: the mutant must
    leave an if with an empty statement, not give it the loop below; and
    every fence mutant compiles as the model compiles it."""
    text = (REPO / "dm-pmemcache/pmc_meta.c").read_text()
    fences = [m for m in vm_mutants.fence_mutants() if "PMC_P_RECOVER" in m.name]
    assert len(fences) == 1
    new = apply_edits(text, fences[0].edits)
    assert "\tif (!fenced)\n\t\t(void)0;\n" in new
    assert len(new.split("\n")) == len(text.split("\n"))
    for m in vm_mutants.fence_mutants():
        f = tmp_path / "pmc_meta.c"
        f.write_text(apply_edits(text, m.edits))
        p = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                            "-Wno-unused-parameter", "-Wno-sign-compare", "-std=gnu11",
                            "-I", str(REPO / "dm-pmemcache"), str(f)],
                           capture_output=True, text=True)
        assert p.returncode == 0, (m.name, p.stderr)


@pytest.mark.skipif(not BZIMAGE.exists() or not (KBUILD / "Module.symvers").exists(),
                    reason="no kernel build at %s" % KBUILD)
def test_vm_mutants_of_the_module_are_caught_and_the_control_is_not(figures):
    """The make-test subset of tests/mutants.sh: each mutant of
    vm_mutants.QUICK under its fewest cuts over the volatile origin, and
    the unmutated module under the most of them."""
    logs = vm_mutants.logs_dir()
    cuts = max(vm_mutants.QUICK.values())
    log = vm_mutants.log_name(logs, "make-test control vm %d cuts" % cuts)
    control, why = vm_mutants.check(None, "vm", log, cuts)
    print("control vm, %d cuts (unmutated): %s (%s, log %s)" % (cuts, control, why, log))
    caught = 0
    for m in vm_mutants.MUTANTS:
        if m.name not in vm_mutants.QUICK:
            continue
        n = vm_mutants.QUICK[m.name]
        log = vm_mutants.log_name(logs, "make-test %s" % m.name)
        v, why = vm_mutants.check(m, m.checker, log, n)
        caught += v == "caught"
        print("mutant %s, %d cuts: %s -- %s (log %s)" % (m.name, n, v, why, log))
    figures["VM mutants"] = "%d, caught %d" % (len(vm_mutants.QUICK), caught)
    figures["VM mutant controls"] = "1, not caught %d" % (control == "not caught")
    assert control == "not caught", why
    assert caught == len(vm_mutants.QUICK) >= 2
