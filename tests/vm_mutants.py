#!/usr/bin/python3
"""Mutation testing of the durability sites (issues 14 and 30).

Each mutant removes one durability step from a copy of dm-pmemcache/ in a
temporary folder and runs the checker that must notice it:
  vm     the module is built against the shared kernel build and
         tests/test_durability.py::test_power_cuts_over_a_volatile_origin
         runs with it (MUTANT_CUTS cuts over the volatile origin, default
         8: each mode twice);
  window:POINT,...
         the module is built with PMC_CUT_HOOKS=1 and
         tests/test_window_cuts.py::test_power_cuts_in_the_protocol_windows
         runs with it, cutting the power at those points (pmc_cut.h) in
         that order. These mutants break an ordering that matters only
         inside one window, which a random cut almost never hits: with
         MUTANT_COMPARE=1 each is also run by the vm checker (random cuts),
         reported on a line of its own and not counted;
  window-quiet:POINT,...
         the same, but each boot stops its writers once armed, waits for
         writeback to go quiet, then flushes and cuts at the 8th hit
         (PMC_CUT_QUIET=1, PMC_CUT_AFTER=8): the batch it cuts in was
         covered by no earlier origin flush;
  fs     the module is built as for vm and
         tests/test_fs_powercut.py::test_power_cuts_under_ext4_and_xfs
         runs with it (MUTANT_CUTS cuts under ext4 and XFS, the first
         over the volatile origin); its mutants are FS_MUTANTS, run by
         test_a_module_mutant_is_caught_under_ext4_and_xfs (PMC_LONG=1),
         not by this script;
  fua    the module is built as for vm and
         tests/test_durability.py::test_writes_past_a_full_cache_reach_the_origin_with_fua
         runs with it (random cuts rarely catch a missing FUA there:
         writeback flushes the origin every few milliseconds under
         pressure);
  model  tests/host/crash_model is built over the mutant's pmc_meta.c and
         runs the make-test seeds (--ops 300, seeds 1 2 3, and the
         waitprev run --ops 600 --seed 2), stopping at the first run that
         catches it.

The verdict (verdict()) keys on the checker's exit status and on a token
that only a failing check prints: pytest's status 1 (tests failed) and
"AssertionError: " + LOST (the checks of the cuts), + NO_FUA (the FUA
count) or + FS_DAMAGED (fsck or a logged file, under a file system); crash_model's status 1 and a line starting with "VIOLATION" (a
failed assertion of the model is not one). A test that fails for any
other reason, or a passing one (whose figures block says "acknowledged
writes lost 0"), is "not caught".

Every checker has a negative control: the unmutated module (or model)
run by the same checker, with the same cuts, must come out "not caught".
Every edit of a mutant must match its text exactly once; a fence mutant
replaces the fence statement by `(void)0;` (deleting the line would make
the next statement the body of an `if` without braces).
Nothing in dm-pmemcache/ itself is changed.

usage: tests/mutants.sh [NAME-PATTERN] (this script; MUTANT_CUTS,
MUTANT_COMPARE, MUTANT_LOGS, MUTANT_CONTROLS=0 to skip the controls)
Prints one line per control and per mutant, "controls N, not caught N" and
"durability sites N, mutants caught N". Exit status 0 if every mutant was
caught and no control was.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import namedtuple
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KCACHE = Path(os.environ.get("KCACHE", "/var/cache/dm-pmemcache"))
KBUILD = Path(os.environ.get("KBUILD", KCACHE / "build"))
KSRC = Path(os.environ.get("KSRC", KCACHE / "linux"))
PY = os.environ.get("PY", sys.executable)

# The failure tokens. Only the assertion messages of a failed check print
# them (tests/test_durability.py: check_results() and the FUA count); a
# passing run prints its figures ("acknowledged writes lost 0"), never
# these. Nothing else may spell them out (test_durability_mutants.py).
LOST = "DURABILITY-FAILURE: " + "acknowledged writes lost"
NO_FUA = "DURABILITY-FAILURE: " + "writes past the cache without FUA"
# tests/test_fs_powercut.py: fsck found errors, or a logged fsync'ed file
# is lost or wrong, after a power cut under ext4 and XFS
FS_DAMAGED = "DURABILITY-FAILURE: " + "file system damaged by a power cut"
MODEL_RUNS = [["--seed", "1"], ["--seed", "2"], ["--seed", "3"],
              ["--ops", "600", "--seed", "2"]]

# edits: [(old, new)] or [(line number, old, new)]: each old must occur
# exactly once in the file (or in that line)
Mutant = namedtuple("Mutant", "name file checker edits")

MUTANTS = [
    Mutant("origin flush before CLEAN (pmc_env_origin_flush)", "writeback.c", "vm",
           [("return blkdev_issue_flush(pc->origin->bdev);", "return 0;")]),
    Mutant("FUA of write-around (pmc_write_around)", "io.c", "vm",
           [("bio->bi_opf |= REQ_FUA;", "(void)0;")]),
    Mutant("FUA of write-through in a full cache (pmc_through_write)", "io.c", "fua",
           [("REQ_OP_WRITE | REQ_SYNC | REQ_FUA);", "REQ_OP_WRITE | REQ_SYNC);")]),
    # the older copy made FREE with the data (W1), before the new record
    # exists (W3): only a cut between the two loses it
    Mutant("older copy freed before the new record (W5 before W3)", "pmc_meta.c",
           "window:over_w2,over_w2,over_w2,over_w2",
           [("\t/* W2: the data is durable",
             "\tif (old != PMC_NO_SLOT)\n\t\tpmc_meta_invalidate(m, old, PMC_P_FREE);\n"
             "\t/* W2: the data is durable")]),
    # a clean cached copy made FREE after the write-through's origin
    # write (T2 after T1): a cut between them leaves it CLEAN over the
    # newer origin data (through_t1 is armed once every block is clean)
    Mutant("clean copy freed after the write-through (T2 after T1)", "pmc_write.c",
           "window:through_t1,through_t1",
           [("\tif (!r && t->slot != PMC_NO_SLOT &&\n",
             "\tif (0 && !r && t->slot != PMC_NO_SLOT &&\n")]),
    # CLEAN stored before the origin flush (C1 before C0): the batch's
    # flush after its CLEAN stores, its result ignored (pmc_wb_complete()).
    # Cut at the 8th CLEAN of the first batch after the writers stopped
    # and writeback went quiet (window-quiet): no earlier flush covered
    # those blocks (random wb_c1 cuts mostly land on blocks that the
    # previous batch's flush had made durable)
    Mutant("CLEAN before the origin flush (C1 before C0)", "pmc_wb.c",
           "window-quiet:wb_c1,wb_c1,wb_c1",
           [("\tr = pmc_wb_flush_before_clean(pc, any);\n", "\tr = 0;\n"),
            ("\tif (id >= 0)\n\t\tpmc_env_pmem_exit(pc, id);\n",
             "\tpmc_wb_flush_before_clean(pc, any);\n"
             "\tif (id >= 0)\n\t\tpmc_env_pmem_exit(pc, id);\n")]),
]

FENCE_STMT = re.compile(r"\bpmc_pmem_fence\((PMC_P_[A-Z]+)\);")


# The checker "fs": the power cuts under ext4 and XFS of
# tests/test_fs_powercut.py (the first cut is over the volatile origin).
FS_MUTANTS = [
    Mutant("origin flush before CLEAN, under ext4 and XFS (pmc_env_origin_flush)",
           "writeback.c", "fs", MUTANTS[0].edits),
]


def fence_mutants(src=REPO / "dm-pmemcache"):
    """Every pmem fence of the shared metadata code, one at a time: the
    statement becomes (void)0; so that the control flow stays as it is."""
    out = []
    for n, line in enumerate((src / "pmc_meta.c").read_text().split("\n"), 1):
        m = FENCE_STMT.search(line)
        if m and not line.startswith("static"):
            out.append(Mutant("pmem fence pmc_meta.c:%d (%s)" % (n, m.group(1)), "pmc_meta.c",
                              "model", [(n, m.group(0), "(void)0;")]))
    return out


def all_mutants():
    return MUTANTS + fence_mutants()


# The make-test subset: the fewest cuts over the volatile origin that
# caught each mutant every time (cut 1 is "full", cut 2 "cleaner"); the
# control runs the unmutated module with the most of them.
QUICK = {"origin flush before CLEAN (pmc_env_origin_flush)": 1,
         "FUA of write-around (pmc_write_around)": 2}


class MutantError(Exception):
    pass


def apply_edits(text, edits):
    """The text with every edit made; each must match exactly once."""
    lines = None
    for e in edits:
        if len(e) == 3:
            n, old, new = e
            lines = text.split("\n")
            if not 0 < n <= len(lines) or lines[n - 1].count(old) != 1:
                raise MutantError("line %d: %r occurs %d times in %r" % (
                    n, old, lines[n - 1].count(old) if 0 < n <= len(lines) else 0,
                    lines[n - 1] if 0 < n <= len(lines) else ""))
            lines[n - 1] = lines[n - 1].replace(old, new)
            text = "\n".join(lines)
        else:
            old, new = e
            if text.count(old) != 1:
                raise MutantError("%r occurs %d times" % (old, text.count(old)))
            text = text.replace(old, new)
    return text


def token_re(checker):
    kind = checker.split(":")[0]
    if kind == "model":
        return re.compile(r"^VIOLATION", re.M)
    token = {"fua": NO_FUA, "fs": FS_DAMAGED}.get(kind, LOST)
    return re.compile(re.escape("AssertionError: " + token))


def verdict(checker, rc, log):
    """"caught" if the checker's exit status says its check failed (1, for
    pytest and crash_model) and its output has the failure token that only
    a failing check prints; "not caught" otherwise."""
    return "caught" if rc == 1 and token_re(checker).search(log) else "not caught"


def finding(checker, log):
    """The failure line and the one after it, for the report."""
    m = token_re(checker).search(log)
    if not m:
        return ""
    rest = log[m.start():].split("\n")
    if checker == "model":
        return rest[0][:150]
    cuts = re.findall(r"^cut (\d+)/(\d+) ", log, re.M)
    text = " ".join(re.sub(r"^E\s+", "", l).strip() for l in rest[:2])[:200]
    summary = re.search(r"(CACHE|ORIGIN) CHECK sectors=\d+ ok=\d+ bad=[1-9]\d*", log)
    if summary and summary.group(0) not in text:
        text += " (%s)" % summary.group(0)
    return "%s%s" % ("after cut %s of %s: " % cuts[-1] if cuts else "", text)


def copy_module(tmp):
    dst = Path(tmp) / "dm-pmemcache"
    shutil.copytree(REPO / "dm-pmemcache", dst,
                    ignore=shutil.ignore_patterns("*.o", "*.ko", ".*.cmd", "*.mod*",
                                                  "modules.order", "Module.symvers"))
    return dst


def build_module(src, hooks, log):
    cmd = ["flock", str(KCACHE / "kernel-build.lock"), "make", "-s", "-C", str(KSRC),
           "O=%s" % KBUILD, "CC=ccache gcc", "M=%s" % src, "modules"]
    if hooks:
        cmd.append("PMC_CUT_HOOKS=1")
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(log, "a") as f:
        f.write("$ %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.returncode == 0


def guest_module(tmp, mutant_file=None, edits=()):
    """(files, path) for a guest script's insmod: the product module, or
    with @edits made to dm-pmemcache/@mutant_file a mutant built from a
    copy of it in @tmp (the build must succeed)."""
    if not mutant_file:
        return [], "/lib/modules/extra/dm-pmemcache.ko"
    src = copy_module(tmp)
    path = src / mutant_file
    path.write_text(apply_edits(path.read_text(), edits))
    log = Path(tmp) / "build.log"
    assert build_module(src, False, log), log.read_text()
    return [(src / "dm-pmemcache.ko", "/test/mutant.ko")], "/test/mutant.ko"


def boot_tag(mutant):
    """What the boots of @mutant's run are logged under (vm.boot_name())."""
    return "control" if mutant is None else "mutant-" + re.sub(r"\W+", "-", mutant.name).strip("-")


def run_pytest(test, env, log):
    env = dict(os.environ, KCACHE=str(KCACHE), KBUILD=str(KBUILD), PMC_LONG="0",
               PMC_DURABLE_CHAINS="1", **env)
    cmd = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-x", "-q", test]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    out = p.stdout + p.stderr
    with open(log, "a") as f:
        f.write("$ %s %s\n%s" % (" ".join("%s=%s" % kv for kv in sorted(
            (k, v) for k, v in env.items() if k.startswith(("PMC_", "MUTANT")))),
            " ".join(cmd), out))
    return p.returncode, out


def check(mutant, checker, log, cuts=None):
    """Build the mutant (None: the unmutated module, a control) and run
    the checker on it. Returns (verdict, finding); verdict "did not build"
    or "could not be applied" when there was nothing to check."""
    cuts = cuts or int(os.environ.get("MUTANT_CUTS", "8"))
    Path(log).write_text("")
    with tempfile.TemporaryDirectory(prefix="pmc-mutant-") as tmp:
        src = copy_module(tmp)
        if mutant:
            path = src / mutant.file
            try:
                path.write_text(apply_edits(path.read_text(), mutant.edits))
            except MutantError as e:
                return "could not be applied", str(e)
        kind, _, points = checker.partition(":")
        if kind == "model":
            host = Path(tmp) / "host"
            host.mkdir()
            for f in ("crash_model.c", "Makefile"):
                shutil.copy(REPO / "tests/host" / f, host)
            p = subprocess.run(["make", "-s", "-C", str(host), "SRC=%s" % src, "crash_model"],
                               capture_output=True, text=True)
            with open(log, "a") as f:
                f.write(p.stdout + p.stderr)
            if p.returncode:
                return "did not build", ""
            # one violation is enough (a broken recovery can make a run of
            # the model explore for many minutes after it)
            for args in MODEL_RUNS:
                cmd = [str(host / "crash_model"), "--ops", "300", "--stop-at-first", *args]
                try:
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                    rc, out = p.returncode, p.stdout + p.stderr
                except subprocess.TimeoutExpired as e:
                    rc, out = "timeout", "%s" % e
                with open(log, "a") as f:
                    f.write("$ %s\n%s\nrc %s\n" % (" ".join(cmd), out, rc))
                if verdict(checker, rc, out) == "caught":
                    return "caught", finding(checker, out)
            return "not caught", ""
        if not build_module(src, kind.startswith("window"), log):
            return "did not build", ""
        ko = str(src / "dm-pmemcache.ko")
        # its boots log under their own name, never as the product test's
        tag = {"PMC_BOOT_TAG": boot_tag(mutant)}
        if kind == "vm":
            rc, out = run_pytest(
                "tests/test_durability.py::test_power_cuts_over_a_volatile_origin",
                {"PMC_DURABLE_CUTS": str(cuts), "PMC_MUTANT_KO": ko, **tag}, log)
        elif kind == "fs":
            rc, out = run_pytest(
                "tests/test_fs_powercut.py::test_power_cuts_under_ext4_and_xfs",
                {"PMC_FS_CUTS": str(cuts), "PMC_MUTANT_KO": ko, **tag}, log)
        elif kind == "fua":
            rc, out = run_pytest(
                "tests/test_durability.py::"
                "test_writes_past_a_full_cache_reach_the_origin_with_fua",
                {"PMC_MUTANT_KO": ko, **tag}, log)
        else:
            quiet = kind == "window-quiet"
            rc, out = run_pytest(
                "tests/test_window_cuts.py::test_power_cuts_in_the_protocol_windows",
                {"PMC_CUT_POINTS": points, "PMC_CUT_QUIET": str(int(quiet)),
                 "PMC_CUT_AFTER": "8" if quiet else "0", "PMC_CUT_KO": ko, **tag}, log)
        with open(log, "a") as f:
            f.write("\nexit status %d\n" % rc)
        v = verdict(checker, rc, out)
        return v, finding(checker, out) if v == "caught" else "exit status %d" % rc


def log_name(logs, name):
    return Path(logs) / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log")


def logs_dir():
    from vm import LOGDIR
    d = Path(os.environ.get("MUTANT_LOGS", LOGDIR / "mutants"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def main(argv):
    only = argv[1] if len(argv) > 1 else ""
    logs = logs_dir()
    cuts = int(os.environ.get("MUTANT_CUTS", "8"))
    mutants = [m for m in all_mutants() if only in m.name]
    bad = 0
    if os.environ.get("MUTANT_CONTROLS", "1") != "0":
        checkers = list(dict.fromkeys(m.checker for m in mutants))
        quiet = 0
        for c in checkers:
            log = log_name(logs, "control " + c)
            v, why = check(None, c, log, cuts)
            quiet += v == "not caught"
            bad += v != "not caught"
            print("control %s (unmutated): %s%s (log %s)" % (
                c, v, "" if v == "not caught" else ", MUST NOT BE: " + why, log), flush=True)
        print("controls %d, not caught %d" % (len(checkers), quiet), flush=True)
    caught = 0
    for m in mutants:
        log = log_name(logs, m.name)
        if m.checker.startswith("window") and os.environ.get("MUTANT_COMPARE", "0") == "1":
            clog = log_name(logs, m.name + ".random")
            v, why = check(m, "vm", clog, cuts)
            print("comparison, not counted: mutant %s under %d random cuts: %s (log %s)"
                  % (m.name, cuts, v, clog), flush=True)
        v, why = check(m, m.checker, log, cuts)
        caught += v == "caught"
        print("mutant %s: %s%s (log %s)" % (m.name, v, " -- " + why if why else "", log),
              flush=True)
    bad += caught != len(mutants)
    print("durability sites %d, mutants caught %d" % (len(mutants), caught))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "tests"))
    sys.exit(main(sys.argv))
