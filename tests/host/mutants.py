#!/usr/bin/env python3
"""Mutation testing of every durability site of the shared metadata code.

A durability site is a line of dm-pmemcache/pmc_meta.c or pmc_index.c that
  - fences pmem (pmc_pmem_fence / pmc_meta_fence): the mutant deletes the
    call;
  - stores to pmem with a flush (pmc_pmem_write, memcpy_flushcache in the
    kernel, or pmc_meta_store, which stores to both halves of a mirror):
    the mutant stores without the flush (memcpy in the kernel;
    pmc_model_store_noflush in the model: the store is visible but no
    fence makes it durable; the model has one half);
  - orders writeback (sets PMC_SF_WAITPREV): the mutant deletes it.
The policy units pmc_wb.c (writeback), pmc_io.c (st->around, eviction,
discard) and pmc_write.c (the write path: commit, around, through,
full cache) are shared code too: their fences are sites as above, and
each of their decisions (POLICY) is turned wrong one at a time (the text
of the real code must match exactly once).
Each mutant is a copy of the file with that one change, compiled into its
own crash_model in a temporary folder, and run until the model reports a
VIOLATION (an abort of the model does not count).  Every mutant must be
caught.  The runs pass --data-only (the model's st->around bookkeeping
check is off), and a POLICY mutant counts as caught only by a violation
about the data (DATA_VIOLATION: a lost, stale or garbage write), never by
a check of the model's own bookkeeping.

The model's own copies of io.c steps (lines marked "SITE:" in
crash_model.c: the flush of a bio's data, the REQ_PREFLUSH fence) are mutated the same way and listed separately: they
test the model's copy, not the module.

usage: mutants.py [--long] [--only TEXT] [--list] [--keep]
Prints "controls 3, not caught 3", one line per mutant, "durability
sites N, mutants caught N" and "I/O policy mutants N, caught N".
Exit status 0 if every mutant of the shared code was caught and the
negative control (the unmutated sources, the same runs) was not.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "..", "dm-pmemcache"))
MODEL = os.path.join(HERE, "crash_model.c")
SHARED = ["pmc_meta.c", "pmc_index.c", "pmc_wb.c", "pmc_io.c", "pmc_write.c"]
# The mirror's shared units: their sites and decisions are run with the
# model's second half (--mirror): the copy to a half (pmc_resync.c) and
# the info steps around it (pmc_mirror.c).
MIRROR_SHARED = ["pmc_resync.c", "pmc_mirror.c"]
# Sites of those no run of the model reaches, with why: printed, counted
# apart, never called caught.
MIRROR_NOT_MODELLED = {
    "pmc_mirror_scrub": "S1 guards against two cuts inside updates of one info "
                        "slot whose words coincide, which this model does not "
                        "build; both sites are mutants of tests/test_mirror_model.py, "
                        "caught there (mirror_check --torn cuts S1 and the next "
                        "update in flight)",
}
CFLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter",
          "-Wno-sign-compare", "-std=gnu11"]
NOFLUSH_DECL = ("void pmc_model_store_noflush(void *dst, const void *src, "
                "size_t len, enum pmc_ptag tag);\n"
                "#define pmc_meta_store_noflush(m, dst, src, len, tag) "
                "pmc_model_store_noflush(dst, src, len, tag)\n")

# How hard the model tries before a mutant counts as not caught: quick
# (make test) stops at the first run that catches it; long (make
# test-long) needs every run to catch it.
QUICK_RUNS = [["--ops", "3000", "--seed", str(s)] for s in (1, 2, 3, 4, 5)]
LONG_RUNS = [["--ops", "20000", "--seed", str(s)] for s in (1, 2, 3, 4, 5)]
MIRROR_QUICK_RUNS = [["--mirror", *r] for r in QUICK_RUNS]
MIRROR_LONG_RUNS = [["--mirror", *r] for r in LONG_RUNS]
CRC_QUICK_RUNS = [["--data-crc", *r] for r in QUICK_RUNS]
CRC_LONG_RUNS = [["--data-crc", *r] for r in LONG_RUNS]

# The protocol bugs the model found, put back one at a time: each must be
# caught too (file, what, text of the fixed code, text of the old code).
REGRESSIONS = [
    ("pmc_meta.c", "recovery leaves torn records as they are (seq reuse)",
     "\t\t\tst->torn++;\n\t\t\tpmc_meta_invalidate(m, slot, PMC_P_RECOVER);\n"
     "\t\t\tfenced = false;\n",
     "\t\t\tst->torn++;\n"),
    ("pmc_meta.c", "a discard fences only a slot under writeback (D1')",
     "\tpmc_meta_invalidate(m, old, PMC_P_FREE);\n\tpmc_pmem_fence(PMC_P_FREE);\n"
     "\tif (pmc_slot_flags(idx->slot[old]) & PMC_SF_WB) {\n",
     "\tpmc_meta_invalidate(m, old, PMC_P_FREE);\n"
     "\tif (pmc_slot_flags(idx->slot[old]) & PMC_SF_WB) {\n"
     "\t\tpmc_pmem_fence(PMC_P_FREE);\n"),
    ("pmc_write.c", "a write-through frees a clean copy after its origin write (T2 after T1)",
     "\tif (!r && t->slot != PMC_NO_SLOT &&\n\t    !(pmc_slot_flags(t->v) & PMC_SF_DIRTY)) {\n",
     "\tif (0 && !r && t->slot != PMC_NO_SLOT &&\n\t    !(pmc_slot_flags(t->v) & PMC_SF_DIRTY)) {\n"),
]

# The decisions of the shared I/O policy units (pmc_wb.c, pmc_io.c,
# pmc_write.c), each turned wrong one at a time: (file, what, text of the
# real code, mutated text), or (file, what, (real, mutated), (real,
# mutated)) for a mutant of two edits.  Each must be caught by what it does
# to the data (DATA_VIOLATION), not by a bookkeeping check of the model.
POLICY = [
    ("pmc_wb.c", "writeback claims a block while a write of ours to the origin runs in its stripe (st->around)",
     "\tok = READ_ONCE(idx->slot[c->slot]) == c->v &&\n"
     "\t     !pmc_env_stripe_around(pc, oblock);\n",
     "\tok = READ_ONCE(idx->slot[c->slot]) == c->v;\n"),
    ("pmc_wb.c", "no origin flush before CLEAN (C1)",
     "\tr = pmc_env_origin_flush(pc);\n",
     "\tr = 0;\n"),
    ("pmc_wb.c", "a failed origin flush is ignored: CLEAN anyway",
     "\tif (r)\n\t\treturn r;\n",
     "\tif (r)\n\t\treturn 0;\n"),
    ("pmc_wb.c", "a failed origin write is marked CLEAN",
     "\tif (pmc_meta_wb_done(m, idx, slot, ok, &f))\n",
     "\tif (pmc_meta_wb_done(m, idx, slot, true, &f))\n"),
    ("pmc_io.c", "a write of ours to the origin is not counted in st->around (pmc_origin_write_get())",
     "\tpmc_env_around_inc(pc, oblock);\n",
     ""),
    ("pmc_io.c", "a write goes around the cache although the block is cached",
     "\tif (pmc_index_lookup(idx, oblock) != PMC_NO_SLOT ||\n\t    pmc_index_inflight(idx, oblock) ||\n",
     "\tif (pmc_index_inflight(idx, oblock) ||\n"),
    ("pmc_io.c", "a write goes around the cache while an older copy is written back",
     "\tif (pmc_index_lookup(idx, oblock) != PMC_NO_SLOT ||\n\t    pmc_index_inflight(idx, oblock) ||\n",
     "\tif (pmc_index_lookup(idx, oblock) != PMC_NO_SLOT ||\n"),
    ("pmc_io.c", "eviction does not check the slot again under the stripe lock",
     "\tif (READ_ONCE(idx->slot[s]) == v) {\n",
     "\tif (1) {\n"),
    ("pmc_write.c", "a write does not wait for a write through the cache of its block (busy)",
     "\twhile (pmc_env_through_busy(pc, oblock)) {\n",
     "\twhile (0) {\n"),
    ("pmc_write.c", "a write goes through the cache while an older copy is written back",
     "\tif (pmc_index_inflight(idx, w->oblock)) {\n\t\tr = -EBUSY;\n",
     "\tif (0) {\n\t\tr = -EBUSY;\n"),
    ("pmc_write.c", "a failed origin write of a write-through (T1) is acknowledged",
     "\tr = pmc_env_through_write(pc, t);\n",
     "\tr = pmc_env_through_write(pc, t);\n\tr = 0;\n"),
    ("pmc_write.c", "T2 drops the dirty copy although T1 failed",
     "\tif (!r && t->slot != PMC_NO_SLOT) {\n",
     "\tif (t->slot != PMC_NO_SLOT) {\n"),
    ("pmc_write.c", "a full cache sends a cached block around the cache instead of through it",
     "\t\tif (pmc_write_around(pc, idx, w))\n\t\t\treturn PMC_W_AROUND;\n\t\tr = pmc_write_through(pc, m, idx, w);\n",
     "\t\tif (pmc_origin_write_get(pc, w->oblock))\n\t\t\treturn PMC_W_AROUND;\n\t\tr = pmc_write_through(pc, m, idx, w);\n"),
    # the heal of a mirror's bad copy (pmc_write_heal()): a look of a
    # while ago must not be committed over what came in between
    ("pmc_write.c", "a heal commits a block's old copy without the re-check of its slot",
     "\tif (idx->slot[slot] != v || pmc_env_through_busy(pc, oblock) ||\n",
     "\tif (pmc_env_through_busy(pc, oblock) ||\n"),
    # ... nor a look at a copy whose writeback is in flight: writeback's
    # bounce copy queues a slot a write or discard made STALE after the
    # claim, and its old copy would be committed over the newer one
    # (crash_model.c: scenario_heal_in_writeback())
    ("pmc_write.c", "a heal commits a block's copy while its writeback is in flight (a STALE copy)",
     "\tif (idx->slot[slot] != v || pmc_env_through_busy(pc, oblock) ||\n"
     "\t    pmc_index_inflight(idx, oblock)) {\n",
     "\tif (idx->slot[slot] != v || pmc_env_through_busy(pc, oblock)) {\n"),
    # st->around of a write through the cache, balanced but dropped too
    # early: writeback may then claim the dirty copy and send it while T1
    # is in flight (a mutant that only unbalances the count would be
    # caught by the model's st->around bookkeeping, not by the data)
    ("pmc_write.c", "a write through the cache drops st->around before its T1 completed",
     ("\t/* T1.  If it fails, a dirty cached copy stays as it was. */\n",
      "\tpmc_env_around_dec(pc, t->oblock);\n"
      "\t/* T1.  If it fails, a dirty cached copy stays as it was. */\n"),
     ("\tpmc_env_through_mark(pc, t, false);\n\tpmc_env_around_dec(pc, t->oblock);\n",
      "\tpmc_env_through_mark(pc, t, false);\n")),
    # the completion of writeback (pmc_wb_complete()): flush, verdict, CLEAN
    ("pmc_wb.c", "CLEAN before the origin flush (C1): the batch's flush after its CLEAN stores",
     ("\tr = pmc_wb_flush_before_clean(pc, any);\n", "\tr = 0;\n"),
     ("\tif (id >= 0)\n\t\tpmc_env_pmem_exit(pc, id);\n",
      "\tpmc_wb_flush_before_clean(pc, any);\n"
      "\tif (id >= 0)\n\t\tpmc_env_pmem_exit(pc, id);\n")),
    ("pmc_wb.c", "a failed origin write's blocks become CLEAN (the verdict sees only the flush)",
     "\t\t\tw->end = w->err ? PMC_WB_FAILED : PMC_WB_CLEAN;\n",
     "\t\t\tw->end = r ? PMC_WB_FAILED : PMC_WB_CLEAN;\n"),
    ("pmc_wb.c", "a failed origin flush does not fail the writes it had to make durable",
     "\t\tif (!w->err && !w->unsent && r)\n\t\t\tw->err = r;\n",
     ""),
    ("pmc_wb.c", "no origin flush unless the batch's last write succeeded",
     "\t\tany |= !w->err && !w->unsent;\n",
     "\t\tany = !w->err && !w->unsent;\n"),
    # reads (pmc_io_read()): what is copied from the cache.  (Copying it
    # after the stripe lock is dropped is no such mutant: the model would
    # call the old data a stale read, which a read racing a write may
    # return; the real danger, a slot reused meanwhile, it rarely hits.)
    ("pmc_io.h", "a read copies sectors the cached copy does not hold",
     "\t\thave = pmc_slot_mask(idx->slot[slot]) & need;\n",
     "\t\thave = need;\n"),
    ("pmc_wb.c", "a claim does not check that the slot still holds what selection saw",
     "\tok = READ_ONCE(idx->slot[c->slot]) == c->v &&\n"
     "\t     !pmc_env_stripe_around(pc, oblock);\n",
     "\tok = !pmc_env_stripe_around(pc, oblock);\n"),
]

# The decisions of the mirror's copy (pmc_resync.c), each turned wrong:
# each must lose an acknowledged write on the copy's target (run with
# --mirror; the same form as POLICY).
MIRROR_POLICY = [
    # found by the model: a slot superseded while its writeback was in
    # flight (STALE) is read by that writeback after the copy ended
    ("pmc_resync.c", "the copy skips a superseded slot whose writeback is in flight (STALE)",
     "\treturn (pmc_slot_flags(v) & (PMC_SF_USED | PMC_SF_BAD)) == PMC_SF_USED;\n",
     "\treturn (pmc_slot_flags(v) & (PMC_SF_USED | PMC_SF_STALE | PMC_SF_BAD)) ==\n"
     "\t       PMC_SF_USED;\n"),
    # found by the model: an eviction's FREE, visible but not yet fenced
    ("pmc_resync.c", "the copy skips a slot out of the index without its stripe lock",
     "\tif (!(pmc_slot_flags(v) & PMC_SF_USED)) {\n"
     "\t\tif (pmc_meta_read_record(m, slot, &rec, &live))\n"
     "\t\t\treturn -EIO;\n"
     "\t\tob = le64_to_cpu(rec.oblock);\n\t}\n",
     "\tif (!(pmc_slot_flags(v) & PMC_SF_USED))\n\t\treturn 0;\n"),
    ("pmc_resync.c", "the record pass copies a record below the mark without its data",
     "\t\tif (live && slot < pos) {\n",
     "\t\tif (0) {\n"),
    ("pmc_resync.c", "an R3 mark counts a slot not yet copied",
     "\t\tpmc_mirror_resync_progress(tgt, next);\t/* R3 */\n",
     "\t\tpmc_mirror_resync_progress(tgt, next + 1);\t/* R3 */\n"),
]

# The data crc of a record (PMC_FEATURE_DATA_CRC), each step turned
# wrong: a block written well must not read as corrupt after a crash (run
# with --data-crc, whose check of every live block's crc reports it).
CRC_POLICY = [
    ("pmc_meta.c", "the data crc covers the written sectors, not those kept from the older copy",
     "pmc_meta_block_crc(m, crcs, mask | keep)", "pmc_meta_block_crc(m, crcs, mask)"),
    ("pmc_meta.c", "the record is written without its data crc",
     "\tif (crcs)\t/* of the bytes stored: the kept sectors' and the fill's */\n"
     "\t\tr.data_crc = cpu_to_le32(pmc_meta_block_crc(m, crcs, mask | keep));\n", ""),
]

# The model's violations that are about the data: a lost, stale or garbage
# sector after a crash or in a running read, a CLEAN block the origin does
# not hold, garbage sent to the origin.
DATA_VIOLATION = re.compile(
    r"^VIOLATION \([^)]*\): (garbage|older value won / write lost|never written|"
    r"running read: |evicted a CLEAN block the origin does not hold|"
    r"CLEAN block over other origin data|writeback of garbage|write-through of garbage|"
    r"data crc mismatch)")

FENCE_RE = re.compile(r"\b(pmc_pmem_fence|pmc_meta_fence)\s*\([^;]*\)")
STORE_RE = re.compile(r"\b(pmc_pmem_write|pmc_meta_store)\s*\(")
WAITPREV_RE = re.compile(r"\w+\s*\|=\s*PMC_SF_WAITPREV\s*;")
ORIGIN_FLUSH_RE = re.compile(r"\borigin_flush\(\)")
LABEL_RE = re.compile(r"\b(F[1-4]|W[1-6]|D1'|D[12]|C[12]|E[12])(?!\w)")
FUNC_RE = re.compile(r"^[a-z].*\b(\w+)\(")


def code_part(line):
    """The line without a trailing // or /* comment (not perfect, enough)."""
    return re.split(r"/\*|//", line, maxsplit=1)[0]


def enclosing_function(lines, i):
    for j in range(i, -1, -1):
        m = FUNC_RE.match(lines[j])
        if m and not lines[j].startswith(("static const", "struct")):
            return m.group(1)
    return "?"


def protocol_label(lines, i):
    """The protocol step (format.md) named in the comments just above."""
    for j in range(i, max(i - 12, -1), -1):
        if "/*" in lines[j] or lines[j].lstrip().startswith("*"):
            found = LABEL_RE.findall(lines[j])
            if found:
                return "/".join(found)
        if j < i and lines[j].startswith("}"):
            break
    return ""


def shared_sites(names=SHARED):
    """(file, line number, kind, description) of every durability site."""
    sites = []
    for name in names:
        lines = open(os.path.join(SRC, name)).read().split("\n")
        for i, line in enumerate(lines):
            code = code_part(line)
            if line.lstrip().startswith(("*", "/*", "//")):
                continue
            kind = None
            if FENCE_RE.search(code):
                kind = "fence"
            elif STORE_RE.search(code):
                kind = "flush"
            elif WAITPREV_RE.search(code):
                kind = "waitprev"
            if not kind:
                continue
            label = protocol_label(lines, i)
            fn = enclosing_function(lines, i)
            what = {"fence": "pmem fence", "flush": "flush of a pmem store",
                    "waitprev": "WAITPREV writeback order"}[kind]
            desc = "%s:%d %s in %s()%s" % (name, i + 1, what, fn,
                                           " [%s]" % label if label else "")
            sites.append((name, i + 1, kind, desc, ""))
    return sites


def model_sites():
    """The model's copies of io.c/writeback.c steps: a "SITE: name" comment
    (optionally "; redundant: why") just above the call it names."""
    lines = open(MODEL).read().split("\n")
    sites = []
    i = 0
    while i < len(lines):
        if not re.match(r"\s*(/\*|\*) SITE:", lines[i]):
            i += 1
            continue
        text = lines[i].split("SITE:", 1)[1]
        while "*/" not in lines[i]:
            i += 1
            text += " " + re.sub(r"^\*(?!/)\s?", "", lines[i].strip())
        text = " ".join(text.split("*/")[0].split())
        name, _, why = text.partition("; redundant: ")
        i += 1
        code = code_part(lines[i])
        if FENCE_RE.search(code):
            kind = "fence"
        elif STORE_RE.search(code):
            kind = "flush"
        elif ORIGIN_FLUSH_RE.search(code):
            kind = "origin-flush"
        else:
            raise ValueError("SITE comment above no call: line %d" % (i + 1))
        sites.append(("crash_model.c", i + 1, kind,
                      "crash_model.c:%d %s" % (i + 1, name), why))
    return sites


def regression_sites():
    return [(f, k, "regression", "%s: %s" % (f, what), "")
            for k, (f, what, _, _) in enumerate(REGRESSIONS)]


def policy_sites(table=POLICY, kind="policy"):
    return [(f, k, kind, "%s: %s" % (f, what), "")
            for k, (f, what, _, _) in enumerate(table)]


def mutate(text, lineno, kind):
    if kind in ("regression", "policy", "mpolicy", "crcpolicy"):
        table = {"regression": REGRESSIONS, "policy": POLICY,
                 "mpolicy": MIRROR_POLICY, "crcpolicy": CRC_POLICY}[kind]
        _, _, fixed, old = table[lineno]
        # one edit (text of the real code, mutated text), or a pair of them
        edits = [(fixed, old)] if isinstance(fixed, str) else [fixed, old]
        for real, mutated in edits:
            # every replacement matches exactly once
            assert text.count(real) == 1, "%s text not found once: %r" % (kind, real)
            text = text.replace(real, mutated)
        return text
    lines = text.split("\n")
    line = lines[lineno - 1]
    code, rest = code_part(line), line[len(code_part(line)):]
    if kind == "fence":
        new = FENCE_RE.sub("(void)0", code, count=1)
    elif kind == "flush":
        new = STORE_RE.sub(lambda m: "pmc_model_store_noflush(" if m.group(1) == "pmc_pmem_write"
                           else "pmc_meta_store_noflush(", code, count=1)
    elif kind == "waitprev":
        new = WAITPREV_RE.sub("(void)0;", code, count=1)
    elif kind == "origin-flush":
        new = ORIGIN_FLUSH_RE.sub("0", code, count=1)
    else:
        raise ValueError(kind)
    assert new != code, (lineno, kind, line)
    lines[lineno - 1] = new + rest
    out = "\n".join(lines)
    if kind == "flush" and "pmc_model_store_noflush(void" not in out:
        # declare it after the first #include
        out = re.sub(r'(#include "[^"]+"\n)', lambda m: m.group(1) + NOFLUSH_DECL,
                     out, count=1)
    return out


def cc(args, cwd, inc=SRC):
    p = subprocess.run(["gcc", *CFLAGS, "-I" + inc, *args], cwd=cwd,
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("compile failed: %s\n%s" % (" ".join(args), p.stderr))


class Builder:
    """Objects of the unmutated sources, built once; one link per mutant."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.objs = {}
        for name, path in self.units(SRC):
            obj = os.path.join(tmp, name[:-2] + ".o")
            cc(["-c", "-o", obj, path], tmp)
            self.objs[name] = obj

    @staticmethod
    def units(src):
        return ([(n, os.path.join(src, n)) for n in SHARED + MIRROR_SHARED] +
                [("pmc_shim_user.c", os.path.join(src, "user", "pmc_shim_user.c")),
                 ("crash_model.c", MODEL)])

    def binary(self, tag, name, text):
        d = os.path.join(self.tmp, tag)
        os.makedirs(d, exist_ok=True)
        if name.endswith(".h"):
            # a header: every unit again, from a copy of the sources
            # that holds the mutated one (an #include "x.h" looks in the
            # including file's folder first)
            tree = os.path.join(d, "src")
            shutil.copytree(SRC, tree)
            with open(os.path.join(tree, name), "w") as f:
                f.write(text)
            objs = []
            for n, path in self.units(tree):
                objs.append(os.path.join(d, n[:-2] + ".o"))
                cc(["-c", "-o", objs[-1], path], d, inc=tree)
            exe = os.path.join(d, "crash_model")
            cc(["-o", exe, *objs], d)
            return exe
        src = os.path.join(d, name)
        with open(src, "w") as f:
            f.write(text)
        obj = os.path.join(d, name[:-2] + ".o")
        cc(["-c", "-o", obj, src], d)
        objs = [obj if n == name else o for n, o in self.objs.items()]
        exe = os.path.join(d, "crash_model")
        cc(["-o", exe, *objs], d)
        return exe


def run_model(exe, args, timeout=600):
    p = subprocess.run([exe, *args, "--stop-at-first", "--data-only"], capture_output=True,
                       text=True, timeout=timeout)
    m = re.search(r"crash_states=(\d+) format_states=(\d+) bad_states=(\d+) "
                  r"violations=(\d+)", p.stdout)
    viol = int(m.group(4)) if m else 0
    first = next((l for l in p.stderr.splitlines() if l.startswith("VIOLATION")), "")
    states = int(m.group(1)) + int(m.group(2)) if m else 0
    # caught: the model ran to its end and reported a violation
    return (p.returncode == 1 and viol > 0 and m is not None), states, first, p


def check_mutant(builder, site, runs, all_runs):
    """(caught, text): caught is True when a run reported a VIOLATION."""
    name, lineno, kind, desc, _ = site
    path = MODEL if name == "crash_model.c" else os.path.join(SRC, name)
    text = mutate(open(path).read(), lineno, kind)
    exe = builder.binary("m%s_%s_%d" % (name[:-2], kind, lineno), name, text)
    caught_by, first, unsound, states = [], "", "", 0
    for args in runs:
        ok, n, viol, p = run_model(exe, args)
        states += n
        if p.returncode not in (0, 1):
            tail = p.stderr.strip().splitlines()[-1:] or [""]
            return False, "model aborted (rc %d): %s" % (p.returncode, tail[0])
        if ok and kind in ("policy", "mpolicy") and not DATA_VIOLATION.match(viol):
            # unsound: caught by a bookkeeping check, not by lost data
            ok, unsound = False, "caught only by a check that is not about the data: %s" % viol[:110]
            if all_runs:
                return False, unsound
        if ok:
            caught_by.append(args[args.index("--seed") + 1])
            first = first or viol
            if not all_runs:
                break
        elif all_runs:
            return False, "not caught with %s" % " ".join(args)
    if not caught_by:
        return False, unsound or "not caught (%d states checked)" % states
    return True, "seed %s: %s" % (",".join(caught_by), first[:110])


def check_control(builder, runs):
    """The negative control: the unmutated sources under the same runs
    and the same verdict; (not caught, text). Every run must end clean."""
    text = open(os.path.join(SRC, SHARED[0])).read()
    exe = builder.binary("control", SHARED[0], text)
    for args in runs:
        ok, _, viol, p = run_model(exe, args)
        if ok or p.returncode:
            return False, "rc %d with %s: %s" % (p.returncode, " ".join(args), viol[:110])
    return True, "%d runs, no violation" % len(runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--long", action="store_true",
                    help="every mutant must be caught by each of 5 longer runs")
    ap.add_argument("--only", default="", help="only sites whose text has this")
    ap.add_argument("--list", action="store_true", help="list the sites and stop")
    ap.add_argument("--no-model-sites", action="store_true",
                    help="skip the model's copies of io.c/writeback.c sites")
    args = ap.parse_args()

    shared = [s for s in shared_sites() if args.only in s[3]]
    regress = [s for s in regression_sites() if args.only in s[3]]
    policy = [s for s in policy_sites() if args.only in s[3]]
    model = [] if args.no_model_sites else [s for s in model_sites() if args.only in s[3]]
    mshared = [s for s in shared_sites(MIRROR_SHARED) if args.only in s[3]]
    mgap = [s for s in mshared if any("in %s()" % f in s[3] for f in MIRROR_NOT_MODELLED)]
    mshared = [s for s in mshared if s not in mgap]
    mpolicy = [s for s in policy_sites(MIRROR_POLICY, "mpolicy") if args.only in s[3]]
    crc = [s for s in policy_sites(CRC_POLICY, "crcpolicy") if args.only in s[3]]
    if args.list:
        for s in shared + policy + regress + model + mshared + mpolicy + crc:
            print(s[3] + ("  (redundant: %s)" % s[4] if s[4] else ""))
        return 0
    runs = LONG_RUNS if args.long else QUICK_RUNS
    mruns = MIRROR_LONG_RUNS if args.long else MIRROR_QUICK_RUNS
    cruns = CRC_LONG_RUNS if args.long else CRC_QUICK_RUNS
    tmp = tempfile.mkdtemp(prefix="pmc-mutants-")
    bad = 0
    try:
        builder = Builder(tmp)
        ok, why = check_control(builder, runs)
        bad += not ok
        print("%-10s unmutated %s -- %s" % ("control" if ok else "CAUGHT", "/".join(SHARED), why),
              flush=True)
        mok, why = check_control(builder, mruns)
        bad += not mok
        print("%-10s unmutated, with --mirror -- %s" % ("control" if mok else "CAUGHT", why),
              flush=True)
        cok, why = check_control(builder, cruns)
        bad += not cok
        print("%-10s unmutated, with --data-crc -- %s" % ("control" if cok else "CAUGHT", why),
              flush=True)
        print("controls 3, not caught %d" % (ok + mok + cok), flush=True)

        def run_group(sites, runs=runs):
            """Check each mutant of @sites, one line each: how many were caught."""
            n = 0
            for site in sites:
                ok, why = check_mutant(builder, site, runs, args.long)
                n += ok
                print("%-10s %s -- %s" % ("caught" if ok else "NOT CAUGHT", site[3], why),
                      flush=True)
            return n

        caught = run_group(shared)
        bad += caught != len(shared)
        pcaught = run_group(policy)
        bad += len(policy) - pcaught
        rcaught = run_group(regress)
        bad += len(regress) - rcaught
        for site in mgap:
            fn = next(f for f in MIRROR_NOT_MODELLED if "in %s()" % f in site[3])
            print("%-10s %s -- %s" % ("not run", site[3], MIRROR_NOT_MODELLED[fn]),
                  flush=True)
        mscaught = run_group(mshared, mruns)
        bad += len(mshared) - mscaught
        mpcaught = run_group(mpolicy, mruns)
        bad += len(mpolicy) - mpcaught
        ccaught = run_group(crc, cruns)
        bad += len(crc) - ccaught
        mcaught = mred = 0
        for site in model:
            if site[4] and not args.long:
                mred += 1
                print("%-10s %s -- not run: %s" % ("redundant", site[3], site[4]),
                      flush=True)
                continue
            ok, why = check_mutant(builder, site, runs[:3] if site[4] else runs,
                                   args.long and not site[4])
            if site[4]:
                mred += 1
                # a documented redundancy that the model refutes is an error
                bad += ok
                print("%-10s %s -- %s" % ("REFUTED" if ok else "redundant", site[3],
                                          why if ok else site[4]), flush=True)
                continue
            mcaught += ok
            bad += not ok
            print("%-10s %s -- %s" % ("caught" if ok else "NOT CAUGHT", site[3], why),
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("durability sites %d, mutants caught %d" % (len(shared), caught))
    if policy:
        print("I/O policy mutants %d, caught %d" % (len(policy), pcaught))
    if regress:
        print("fixed protocol bugs put back %d, caught %d" % (len(regress), rcaught))
    if mshared or mpolicy:
        print("mirror durability sites %d, caught %d, not modelled %d; "
              "mirror copy policy mutants %d, caught %d"
              % (len(mshared), mscaught, len(mgap), len(mpolicy), mpcaught))
    if crc:
        print("data crc mutants %d, caught %d" % (len(crc), ccaught))
    if model:
        print("model copies of io.c/writeback.c sites %d, mutants caught %d, "
              "redundant %d" % (len(model), mcaught, mred))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
