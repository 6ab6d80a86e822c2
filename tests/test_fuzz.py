"""Coverage-guided fuzzing of the on-pmem loader (issue 29).

tests/host/fuzz_meta is the module's own pmc_meta.c and pmc_index.c under
libFuzzer with AddressSanitizer and UBSan (clang): each input is a small
pmem image (12 KiB .. 1 MiB) that is opened, recovered and checked the way
the module loads a cache (see the top of tests/host/fuzz_meta.c).  Host
only, no VM.

make test: replay the corpus (tests/host/fuzz-corpus/meta: what libFuzzer
-merge=1 kept of the seeds and of the campaigns), the seeds
(fuzz-corpus/seeds: images that userspace/tests/mkimage writes, made by
`make -C tests/host fuzz-seeds`) and every regression input
(fuzz-corpus/meta-regress: each crash or broken invariant the fuzzer
found, and hand-made ones for the checks it had not reached), fuzz briefly
from the corpus, require the corpus to still cover most of pmc_meta.c, and
put back, one at a time, checks of pmc_meta.c that the loader needs: the
replay must catch each.

PMC_LONG=1 (make test-long): fuzz for a fixed number of executions
(PMC_FUZZ_RUNS, default 10,000,000, one process), then print executions,
corpus size, the coverage of pmc_meta.c by the resulting corpus, crashes
and sanitizer reports.
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from vm import build

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = os.path.join(HERE, "host")
FUZZ = os.path.join(HOST, "fuzz_meta")
FUZZ_COV = os.path.join(HOST, "fuzz_meta_cov")
CORPUS = os.path.join(HOST, "fuzz-corpus", "meta")
REGRESS = os.path.join(HOST, "fuzz-corpus", "meta-regress")
SEEDS = os.path.join(HOST, "fuzz-corpus", "seeds")
FUZZ_TABLE = os.path.join(HOST, "fuzz_table")
FUZZ_TABLE_COV = os.path.join(HOST, "fuzz_table_cov")
TABLE_CORPUS = os.path.join(HOST, "fuzz-corpus", "table")
TABLE_MAX_LEN = 256

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
LONG_RUNS = int(os.environ.get("PMC_FUZZ_RUNS", "10000000"))
MAX_LEN = 4096

# What a sanitizer or the harness prints when it finds something.
REPORT = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|"
                    r"runtime error:|SUMMARY: UndefinedBehaviorSanitizer|"
                    r"fuzz_(meta|table): .*violated")


@pytest.fixture(scope="module")
def fuzzer():
    p = build(["make", "-s", "-C", HOST, "fuzz_meta", "fuzz_meta_cov",
               "fuzz_table", "fuzz_table_cov"])
    assert p.returncode == 0, p.stdout + p.stderr
    return FUZZ


def inputs(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if os.path.isfile(os.path.join(d, f)))


def run(cmd, timeout, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=env)
    out = p.stdout + p.stderr
    reports = len(REPORT.findall(out))
    return p.returncode, out, reports


def stats(out):
    return {k: int(v) for k, v in re.findall(r"^stat::(\w+):\s+(\d+)", out, re.M)}


def coverage(corpus_dirs, tmp_path, binary=FUZZ_COV, source="pmc_meta.c"):
    """Lines, functions and regions of dm-pmemcache/@source that the
    inputs execute (clang source-based coverage of the harness replaying
    them)."""
    raw = str(tmp_path / "cov.profraw")
    prof = str(tmp_path / "cov.profdata")
    env = dict(os.environ, LLVM_PROFILE_FILE=raw)
    files = [f for d in corpus_dirs for f in inputs(d)]
    rc, out, _ = run([binary, "-runs=1"] + files, 600, env)
    assert rc == 0, out[-3000:]
    subprocess.run(["llvm-profdata", "merge", "-sparse", "-o", prof, raw],
                   check=True)
    p = subprocess.run(["llvm-cov", "export", "-summary-only", "-format=text",
                        binary, "-instr-profile=" + prof],
                       capture_output=True, text=True, check=True)
    meta = [f["summary"] for f in json.loads(p.stdout)["data"][0]["files"]
            if f["filename"].endswith("dm-pmemcache/" + source)]
    assert len(meta) == 1, p.stdout[:2000]
    t = meta[0]
    return t["lines"], t["functions"], t["regions"]


def corpus_size(d):
    files = inputs(d)
    return len(files), sum(os.path.getsize(f) for f in files)


def test_corpus_and_regressions_replay_clean(fuzzer):
    """Every corpus and regression input loads without a crash, a sanitizer
    report or a broken invariant."""
    files = inputs(CORPUS) + inputs(SEEDS) + inputs(REGRESS)
    assert len(inputs(CORPUS)) >= 10 and len(inputs(SEEDS)) >= 10
    rc, out, reports = run([fuzzer, "-runs=1"] + files, 300)
    assert rc == 0 and reports == 0, out[-4000:]
    assert out.count("Executed ") == len(files), out[-2000:]


def test_corpus_stays_small():
    """The in-tree corpus is minimized (-merge=1) and well under 1 MiB."""
    n, size = corpus_size(CORPUS)
    assert size < 512 * 1024, "%d inputs, %d bytes: minimize it" % (n, size)


def test_corpus_covers_the_loader(fuzzer, tmp_path):
    """The corpus still reaches most of pmc_meta.c (the loader, recovery and
    the write path after it): a harness or format change that stops the
    inputs from loading shows here."""
    lines, funcs, _ = coverage([CORPUS, SEEDS, REGRESS], tmp_path)
    assert lines["percent"] >= 85, lines
    assert funcs["percent"] >= 90, funcs


def test_short_fuzz_from_corpus(fuzzer, tmp_path):
    """A few seconds of fuzzing from the corpus (fixed seed) finds
    nothing."""
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work)
    art = tmp_path / "artifacts"
    art.mkdir()
    rc, out, reports = run([fuzzer, "-runs=20000", "-seed=1",
                            "-max_len=%d" % MAX_LEN, "-print_final_stats=1",
                            "-artifact_prefix=%s/" % art, str(work)], 300)
    assert rc == 0 and reports == 0 and not os.listdir(art), out[-4000:]
    assert stats(out)["number_of_executed_units"] >= 20000


def long_fuzz(name, binary, cov_binary, source, corpus, cov_extra, max_len,
              tmp_path, figures):
    """PMC_FUZZ_RUNS executions of @binary in one niced process from a copy
    of @corpus; figures: executions, corpus, coverage of @source, crashes
    and sanitizer reports."""
    work = tmp_path / "corpus"
    shutil.copytree(corpus, work)
    art = tmp_path / "artifacts"
    art.mkdir()
    t0 = time.monotonic()
    rc, out, reports = run(["nice", "-n", "10", binary, "-runs=%d" % LONG_RUNS,
                            "-seed=29", "-max_len=%d" % max_len,
                            "-print_final_stats=1",
                            "-artifact_prefix=%s/" % art, str(work)], 6 * 3600)
    secs = max(time.monotonic() - t0, 1)
    st = stats(out)
    crashes = len(os.listdir(art))
    execs = st.get("number_of_executed_units", 0)
    n, size = corpus_size(work)
    lines, funcs, regions = coverage([work] + cov_extra, tmp_path, cov_binary,
                                     source)
    figures[name + " executions"] = "%d in %d s (%d/s)" % (
        execs, secs, execs / secs)
    figures[name + " corpus"] = "%d inputs, %d bytes" % (n, size)
    figures["%s coverage of %s" % (name, source)] = \
        "lines %d/%d (%.1f%%), functions %d/%d, regions %.1f%%" % (
            lines["covered"], lines["count"], lines["percent"],
            funcs["covered"], funcs["count"], regions["percent"])
    figures[name + " crashes / sanitizer reports"] = "%d / %d" % (
        crashes, reports)
    print(out[-1500:])
    assert rc == 0 and reports == 0 and crashes == 0, out[-4000:]
    assert execs >= LONG_RUNS


@pytest.mark.skipif(not LONG, reason="long form: PMC_LONG=1 (make test-long)")
def test_long_fuzz(fuzzer, tmp_path, figures):
    """PMC_FUZZ_RUNS executions (>= 10,000,000 by default) in one process,
    from the corpus: no crash, no sanitizer report; figures printed."""
    long_fuzz("fuzz_meta", fuzzer, FUZZ_COV, "pmc_meta.c", CORPUS,
              [SEEDS, REGRESS], MAX_LEN, tmp_path, figures)


# Checks of the loader put back to the bug they prevent, one at a time
# (what, text of pmc_meta.c, text of the mutant): replaying the corpus and
# the regression inputs must catch each.
SRC = os.path.normpath(os.path.join(HERE, "..", "dm-pmemcache"))
CHECKS_REMOVED = [
    ("a superblock larger than the device is taken",
     "\tif (le64_to_cpu(sb.pmem_bytes) > pmem_bytes) {\n",
     "\tif (0) {\n"),
    ("geometry lets the data blocks run past the device",
     "\t\tif (off + n * block_size <= pmem_bytes)\n",
     "\t\tif (off <= pmem_bytes)\n"),
    ("a sector mask beyond the block is live",
     "\t\tvalid && !(valid & ~m->full_mask) &&\n",
     "\t\tvalid &&\n"),
    ("a block number beyond 48 bits is live",
     "\t\tle64_to_cpu(r->oblock) <= PMC_OBLOCK_MAX &&\n",
     ""),
    ("a seq above PMC_SEQ_MAX is live",
     " &&\n\t\tle64_to_cpu(r->seq) <= PMC_SEQ_MAX;\n",
     ";\n"),
    ("a write takes a seq above PMC_SEQ_MAX (fuzz_meta found it)",
     "\tif (seq > PMC_SEQ_MAX)\n\t\treturn -EIO;\n",
     ""),
    ("recovery leaves torn records as they are",
     "\t\t\tst->torn++;\n\t\t\tpmc_meta_invalidate(m, slot, PMC_P_RECOVER);\n",
     "\t\t\tst->torn++;\n"),
    ("the older of two live copies stays live",
     "\t\t\t\tpmc_index_unlink(idx, old);\n"
     "\t\t\t\tpmc_meta_invalidate(m, old, PMC_P_RECOVER);\n",
     "\t\t\t\tpmc_index_unlink(idx, old);\n"),
]


FUZZ_FLAGS = ["-g", "-O1", "-std=gnu11", "-I" + SRC,
              "-fsanitize=fuzzer,address,undefined",
              "-fno-sanitize-recover=all"]


def assert_mutant_caught(what, name, fixed, broken, objs, files, tmp_path):
    """dm-pmemcache/@name with @fixed replaced by @broken, linked with
    @objs (sources or objects): replaying @files must crash or report (the
    replay stops at the first input that does)."""
    with open(os.path.join(SRC, name)) as f:
        text = f.read()
    assert text.count(fixed) == 1, "mutant text not found: " + what
    mutant = tmp_path / name
    mutant.write_text(text.replace(fixed, broken))
    binary = str(tmp_path / "fuzz_mutant")
    p = subprocess.run(["clang", *FUZZ_FLAGS, "-o", binary, str(mutant),
                        *objs], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rc, out, reports = run([binary, "-runs=1"] + files, 300)
    if reports:
        first = REPORT.search(out)
        ran = re.findall(r"^Running: (\S+)", out[:first.start()], re.M)
        print("%s: caught by %s: %s" % (
            what, os.path.basename(ran[-1]) if ran else "?", first.group(0)))
    assert rc != 0 and reports, "not caught: " + what


@pytest.fixture(scope="module")
def fuzz_objs(tmp_path_factory):
    """The harness and the unchanged units, compiled once for the mutants."""
    d = tmp_path_factory.mktemp("fuzz_objs")
    objs = []
    for src in [os.path.join(HOST, "fuzz_meta.c"),
                os.path.join(SRC, "pmc_index.c"),
                os.path.join(SRC, "user", "pmc_shim_user.c")]:
        o = str(d / (os.path.basename(src) + ".o"))
        p = subprocess.run(["clang", *FUZZ_FLAGS, "-c", "-o", o, src],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        objs.append(o)
    return objs


@pytest.mark.parametrize("what,fixed,broken", CHECKS_REMOVED,
                         ids=[c[0].replace(" ", "-") for c in CHECKS_REMOVED])
def test_removed_loader_check_is_caught(fuzz_objs, tmp_path, what, fixed,
                                        broken):
    """The replay is no test that cannot fail: with one check of pmc_meta.c
    removed, some corpus or regression input must crash or report."""
    assert_mutant_caught(what, "pmc_meta.c", fixed, broken, fuzz_objs,
                         inputs(CORPUS) + inputs(SEEDS) + inputs(REGRESS),
                         tmp_path)


# ---- the table's feature parser (pmc_table.c, tests/host/fuzz_table.c) ----

def test_table_corpus_replays_clean(fuzzer):
    files = inputs(TABLE_CORPUS)
    assert len(files) >= 10
    rc, out, reports = run([FUZZ_TABLE, "-runs=1"] + files, 300)
    assert rc == 0 and reports == 0, out[-4000:]
    assert out.count("Executed ") == len(files), out[-2000:]


def test_table_corpus_covers_the_parser(fuzzer, tmp_path):
    lines, funcs, _ = coverage([TABLE_CORPUS], tmp_path, FUZZ_TABLE_COV,
                               "pmc_table.c")
    assert lines["percent"] >= 95, lines
    assert funcs["percent"] == 100, funcs


def test_table_short_fuzz(fuzzer, tmp_path):
    work = tmp_path / "corpus"
    shutil.copytree(TABLE_CORPUS, work)
    art = tmp_path / "artifacts"
    art.mkdir()
    rc, out, reports = run([FUZZ_TABLE, "-runs=100000", "-seed=1",
                            "-max_len=%d" % TABLE_MAX_LEN,
                            "-print_final_stats=1",
                            "-artifact_prefix=%s/" % art, str(work)], 300)
    assert rc == 0 and reports == 0 and not os.listdir(art), out[-4000:]


TABLE_CHECKS_REMOVED = [
    ("a tunable out of range is taken",
     "*v < t->min || *v > t->max", "*v < t->min"),
    ("a feature given twice is taken",
     "\t\t    (t >= 0 && (f->set & BIT(t)))) {", "\t\t    0) {"),
    ("low_watermark above high_watermark is taken",
     "\tif (f->val[PMC_T_LOW_WM] > f->val[PMC_T_HIGH_WM]) {", "\tif (0) {"),
    ("a feature count that lies is taken",
     "\tif (n != argc) {", "\tif (n > argc) {"),
    ("a feature's missing value is read",
     "\t\tif (!argc) {\n\t\t\t*error = \"Feature argument is missing its value\";",
     "\t\tif (0) {\n\t\t\t*error = \"Feature argument is missing its value\";"),
    ("a feature's name is taken as the mirror device",
     "\t\t\tif (pmc_tunable_find(f->mirror) >= 0 ||\n\t\t\t    pmc_feature_word(f->mirror)) {",
     "\t\t\tif (0) {"),
]


@pytest.mark.parametrize("what,fixed,broken", TABLE_CHECKS_REMOVED,
                         ids=[c[0].replace(" ", "-") for c in TABLE_CHECKS_REMOVED])
def test_removed_parser_check_is_caught(fuzzer, tmp_path, what, fixed, broken):
    """With one check of pmc_table.c removed, replaying the table corpus
    must crash or report."""
    assert_mutant_caught(what, "pmc_table.c", fixed, broken,
                         [os.path.join(HOST, "fuzz_table.c")],
                         inputs(TABLE_CORPUS), tmp_path)


@pytest.mark.skipif(not LONG, reason="long form: PMC_LONG=1 (make test-long)")
def test_long_fuzz_table(fuzzer, tmp_path, figures):
    """PMC_FUZZ_RUNS executions of the feature parser, one process."""
    long_fuzz("fuzz_table", FUZZ_TABLE, FUZZ_TABLE_COV, "pmc_table.c",
              TABLE_CORPUS, [], TABLE_MAX_LEN, tmp_path, figures)
