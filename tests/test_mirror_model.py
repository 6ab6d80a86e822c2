"""The mirror info protocol of issue 31 (dm-pmemcache/pmc_mirror.c) on the
host: tests/host/mirror_check runs the module's own code.

--torn: every subset of the 8-byte words of an info update that a cut may
keep reads back as the old info or the new one, and an unreadable slot is
never skipped.  --cases: named situations get the decision docs/format.md
gives them.  --steps: a cut after every store of each protocol step
(M1, R1..R5) leaves a pair that starts, from the half holding every
write, with no override.  --model: three devices, random runs with
acknowledged writes, a half lost while running, power cuts inside any
store (any subset of its words kept), wiped devices, any table of two
devices or one and "-", with and without the degraded override; a start
from a device that misses an acknowledged write, without the override,
is a violation.

Each check prints a line starting "VIOLATION" when it fails and exits 1:
the mutants below, copies of pmc_mirror.c with one guard removed, must
be caught by that token and that exit status, and the unmutated code (the
same runs) must not be.
"""
import os
import re
import subprocess

import pytest

from vm import add_figure, build, host_mutant

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = os.path.join(HERE, "host")
BIN = os.path.join(HOST, "mirror_check")
MODEL_SEEDS = (1, 2, 3)
MODEL_RUNS = 300000

CHECKS = [["--torn"], ["--cases"], ["--steps"]] + \
    [["--model", "--runs", str(MODEL_RUNS), "--seed", str(s)] for s in MODEL_SEEDS]

# what, text of pmc_mirror.c, text of the mutant
MUTANTS = [
    ("S1: no scrub of a slot that holds no valid info",
     "\t\tif (!memcmp(buf, zero, sizeof(buf)))\n\t\t\tcontinue;\n",
     "\t\tcontinue;\n"),
    ("an unreadable slot skipped, the other one taken",
     "\t\t\t\t  sizeof(mi[slot])))\n\t\t\treturn -EIO;\n",
     "\t\t\t\t  sizeof(mi[slot])))\n\t\t\tmemset(&mi[slot], 0, sizeof(mi[slot]));\n"),
    ("the lower seq taken",
     "\t\tif (h->has_info && seq <= h->info.seq)\n",
     "\t\tif (h->has_info && seq > h->info.seq)\n"),
    ("an update written over the current slot",
     "\tu32 slot = h->has_info ? h->slot ^ 1 : 0;\n",
     "\tu32 slot = h->has_info ? h->slot : 0;\n"),
    ("split brain started",
     "\tif (a->flags & b->flags & PMC_MIRROR_PARTNER_STALE)\n",
     "\tif (0)\n"),
    ("a half that ran alone taken over a partner it does not know",
     "\t\tif (!pmc_uuid_eq(t->partner_uuid, c->half_uuid) ||\n"
     "\t\t    t->generation >= c->generation)\n",
     "\t\tif (0)\n"),
    ("a half that cannot tell whether its partner ran alone started alone",
     "\t\tif (!alone && !degraded_ok)\n\t\t\treturn PMC_MIRROR_WHY_CANNOT_TELL;\n",
     "\t\tif (0)\n\t\t\treturn PMC_MIRROR_WHY_CANNOT_TELL;\n"),
    ("a half under resync started alone",
     "\tif (c->flags & PMC_MIRROR_RESYNCING)\n\t\treturn PMC_MIRROR_WHY_ONLY_RESYNCING;\n",
     "\tif (0)\n\t\treturn PMC_MIRROR_WHY_ONLY_RESYNCING;\n"),
    ("M1 raises no generation",
     "\tst.generation++;\n\tst.flags |= PMC_MIRROR_PARTNER_STALE;\n",
     "\tst.flags |= PMC_MIRROR_PARTNER_STALE;\n"),
    ("R4 keeps the current half stale",
     "\tst.generation++;\n\tst.flags = 0;\n\tmemcpy(st.partner_uuid, tgt->info.half_uuid, 16);\n",
     "\tst.generation++;\n\tmemcpy(st.partner_uuid, tgt->info.half_uuid, 16);\n"),
    ("R5 before R4",
     "\tpmc_mirror_store(cur, &st);\n\n\t/* R5: the target is current. */\n"
     "\tst = tgt->info;\n\tst.generation = cur->info.generation;\n"
     "\tst.flags = 0;\n\tst.resync_pos = 0;\n\tpmc_mirror_store(tgt, &st);\n",
     "\t{\n\t\tstruct pmc_mirror_state ts = tgt->info;\n\n"
     "\t\tts.generation = st.generation;\n\t\tts.flags = 0;\n"
     "\t\tts.resync_pos = 0;\n\t\tpmc_mirror_store(tgt, &ts);\n\t}\n"
     "\tpmc_mirror_store(cur, &st);\n"),
    ("a device holding another cache copied over",
     "\t    !h[plan->holder ^ 1].has_info && h[plan->holder ^ 1].holds_cache)\n",
     "\t    !h[plan->holder ^ 1].has_info && 0)\n"),
    ("S1's zeroes stored without a flush",
     "\t\tpmc_pmem_write(pmc_mirror_slot(h, slot), zero, sizeof(zero),\n",
     "\t\tpmc_model_store_noflush(pmc_mirror_slot(h, slot), zero, sizeof(zero),\n"),
    ("S1's zeroes not fenced before the next update",
     "\tif (!wrote)\n\t\treturn err;\n\tpmc_pmem_fence(PMC_P_MIRROR);\n",
     "\tif (!wrote)\n\t\treturn err;\n"),
    ("an info update not fenced",
     "\tpmc_pmem_fence(PMC_P_MIRROR);\n\n\th->info = *st;\n",
     "\th->info = *st;\n"),
]


def run_checks(binary, checks=CHECKS):
    """(exit status of the first check that failed or 0, its output)."""
    out = []
    for args in checks:
        p = subprocess.run([binary] + args, capture_output=True, text=True,
                           timeout=300)
        bad = [l for l in p.stdout.splitlines() if l.startswith("VIOLATION")]
        out.append(" ".join(args) + ": " + "\n".join(bad[:8] + [p.stdout[-800:]])
                   + p.stderr[-500:])
        if p.returncode:
            return p.returncode, "\n".join(out)
    return 0, "\n".join(out)


@pytest.fixture(scope="module")
def mirror_check():
    p = build(["make", "-s", "-C", HOST, "mirror_check"])
    assert p.returncode == 0, p.stdout + p.stderr
    return BIN


def test_mirror_info_protocol_holds_under_cuts(mirror_check, figures):
    """The unmutated code: every check passes (the negative control of
    the mutants below)."""
    rc, out = run_checks(mirror_check)
    print(out)
    assert rc == 0 and "VIOLATION" not in out, out
    assert re.search(r"torn info images (\d+), wrong 0", out)
    assert re.search(r"cases (\d+), wrong 0", out)
    assert re.search(r"step cuts (\d+), wrong 0", out)
    models = re.findall(r"mirror model runs (\d+), starts (\d+) \(both (\d+), "
                        r"resync (\d+), degraded (\d+), refused (\d+)\), "
                        r"overrides (\d+), cuts (\d+), acknowledged writes "
                        r"(\d+), lost (\d+)", out)
    assert len(models) == len(MODEL_SEEDS), out
    tot = [sum(int(m[i]) for m in models) for i in range(10)]
    # every kind of start happened, power cuts fell, nothing was lost
    assert all(tot[i] > 1000 for i in (2, 3, 4, 5, 6, 7)), tot
    assert tot[9] == 0, out
    figures["mirror model starts / cuts / acked writes / lost"] = \
        "%d / %d / %d / %d" % (tot[1], tot[7], tot[8], tot[9])


@pytest.mark.parametrize("what,fixed,broken", MUTANTS,
                         ids=[m[0].replace(" ", "-") for m in MUTANTS])
def test_mirror_mutant_is_caught(what, fixed, broken, figures, tmp_path):
    binary = host_mutant(tmp_path, "pmc_mirror.c", fixed, broken,
                         ["mirror_check.c"], ["pmc_mirror.c"])
    rc, out = run_checks(binary)
    caught = rc == 1 and "VIOLATION" in out
    print("mirror mutant %s: %s" % (what, "caught" if caught else "NOT caught"))
    print("\n".join(l for l in out.splitlines() if "VIOLATION" in l)[:600])
    add_figure(figures, "mirror protocol mutants", "%d, caught %d", 1, int(caught))
    assert caught, out
