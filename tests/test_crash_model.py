"""Host crash-consistency model of the dm-pmemcache commit protocol.

Builds tests/host/crash_model (the module's shared metadata code compiled
in userspace over a model of pmem where each simulated CPU's stores stay
volatile until flushed and fenced by that CPU, run by several CPUs under a
seeded scheduler), runs it, and checks what it prints.  No VM, no kernel.

The model runs the module's write, write-through, eviction, read,
writeback claim, send and completion (origin flush, then CLEAN) decisions
(pmc_write.c, pmc_io.c, pmc_wb.c), not copies of them.  tests/host/mutants.py removes every fence and flush of the real
pmc_meta.c / pmc_index.c / pmc_wb.c / pmc_io.c / pmc_write.c and turns
each decision of those policy units wrong, one at a time, and requires
the model to catch each mutant.

The long forms (>= 1,000,000 crash states; every mutant caught by each of
5 long runs) are enabled with PMC_LONG=1 (or LONG=1), as `make test-long`
does.
"""
import os
import re
import subprocess
import sys

import pytest

from vm import add_figure, build

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = os.path.join(HERE, "host")
BIN = os.path.join(HOST, "crash_model")

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")

# Each of these removes one fence or flush of the protocol (see
# docs/format.md); the checker has to notice every one of them.
BROKEN_STEPS = ["data-fence", "record-fence", "free-fence", "data-flush",
                "record-flush", "format-order"]


@pytest.fixture(scope="module")
def crash_model():
    p = build(["make", "-s", "-C", HOST, "crash_model"])
    assert p.returncode == 0, p.stdout + p.stderr
    return BIN


def run_model(binary, *args, timeout=900):
    p = subprocess.run([binary, *args], capture_output=True, text=True,
                       timeout=timeout)
    res = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    for k, v in re.findall(r"\b(\w+)=(\d+)\b", p.stdout):
        res[k] = int(v)
    assert "violations" in res, f"no summary line:\n{p.stdout}\n{p.stderr}"
    print(p.stdout.strip())
    return res


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_acknowledged_write_survives_crashes(crash_model, seed):
    r = run_model(crash_model, "--ops", "1000", "--seed", str(seed))
    assert r["writers"] >= 2 and r["cpus"] >= 4
    assert r["crash_states"] > 5000
    assert r["format_states"] > 0
    # the interleavings the model is there for did happen
    assert r["restarts"] > 0 and r["writebacks"] > 0 and r["evictions"] > 0
    # ... and the paths past the cache: around it, through it, from a
    # full cache, and origin writes of ours that failed
    assert r["arounds"] > 0 and r["throughs"] > 0 and r["full_cache"] > 0
    assert r["origin_write_failures"] > 0
    # writeback's own paths: merged runs, sends without memory (claims
    # given back), writes not sent after all, failed writes or flushes;
    # and partly cached reads
    assert r["wb_merged_writes"] > 0 and r["wb_no_memory"] > 0
    assert r["wb_unsent"] > 0 and r["wb_failed_writes"] > 0
    assert r["partial_reads"] > 0
    # the mirror's heal: heals committed, heals queued by writeback's
    # bounce copy (a look at a claimed, maybe STALE slot)
    assert r["heals"] > 0 and r["wb_heals_queued"] > 0
    assert r["violations"] == 0, r["stderr"][-2000:]
    assert r["bad_states"] == 0
    assert r["rc"] == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_a_mirrored_cache_keeps_every_write_with_a_half_lost(crash_model, seed, figures):
    """--mirror: both halves in one model of pmem, the copy to a half
    (pmc_resync.c) running online beside the writers, crash images started
    with both halves or either one lost, cuts inside those starts and
    copies; once a copy ends the half copied to must hold everything."""
    r = run_model(crash_model, "--mirror", "--ops", "3000", "--seed", str(seed))
    # what the runs are there for did happen: copies online and at a
    # start, resumed at an R3 mark, ended; starts with a half lost, a
    # half left out of the running cache, replaced by a blank one
    assert r["copies"] > 100 and r["copies_done"] > 100
    assert r["resumed_at_mark"] > 100
    assert r["halves_lost"] > 1000 and r["alone_checked"] > 1000
    assert r["ran_alone"] > 0 and r["replaced"] > 0 and r["restarts"] > 0
    assert r["crash_states"] > 20000
    add_figure(figures, "mirror crash states checked (violations)", "%d (%d)",
               r["crash_states"], r["violations"])
    assert r["violations"] == 0, r["stderr"][-2000:]
    assert r["bad_states"] == 0 and r["rc"] == 0


@pytest.mark.parametrize("mode", ["single", "mirror"])
def test_data_crcs_match_their_data_after_every_crash(crash_model, mode, figures):
    """--data-crc: every cache formatted with data crcs; after every
    recovery and at every running read, each live block's data matches its
    record's crc (a block written well that read as corrupt would be lost
    to its reader). The crc mutants of tests/host/mutants.py are the
    failing side of this check."""
    r = run_model(crash_model, "--data-crc", *(["--mirror"] if mode == "mirror" else []),
                  "--ops", "3000", "--seed", "1")
    # crcs were checked (those of blocks with sectors kept from an older
    # copy among them: the mutant without them is caught)
    assert r["data_crcs_checked"] > 100000
    assert r["crash_states"] > 20000
    add_figure(figures, "data crc crash states checked (violations)", "%d (%d)",
               r["crash_states"], r["violations"])
    assert r["violations"] == 0, r["stderr"][-2000:]
    assert r["bad_states"] == 0 and r["rc"] == 0


@pytest.mark.parametrize("step", BROKEN_STEPS)
def test_checker_catches_a_missing_flush_or_fence(crash_model, step, figures):
    r = run_model(crash_model, "--ops", "1000", "--seed", "1", "--break", step)
    caught = r["violations"] > 0 and r["rc"] == 1
    # summed over the modes (and pytest -n workers)
    add_figure(figures, "`--break` modes the checker must catch / caught", "%d / %d",
               1, int(caught))
    assert r["crash_states"] + r["format_states"] > 0
    assert r["violations"] > 0, f"--break {step} was not caught"
    assert r["rc"] == 1


def test_every_durability_site_mutant_is_caught(crash_model, figures):
    """One mutant per fence, per flushed store and per WAITPREV of the
    shared metadata code, each compiled into its own model; all caught.
    The protocol bugs the model found, put back one at a time, too."""
    cmd = [sys.executable, os.path.join(HOST, "mutants.py")]
    if LONG:
        cmd.append("--long")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    print(p.stdout)
    m = re.search(r"durability sites (\d+), mutants caught (\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    sites, caught = int(m.group(1)), int(m.group(2))
    figures["durability sites / mutants caught (shared code)"] = \
        "%d / %d%s" % (sites, caught, " (5 long runs each)" if LONG else "")
    pm = re.search(r"I/O policy mutants (\d+), caught (\d+)", p.stdout)
    assert pm, p.stdout
    figures["I/O policy mutants (pmc_wb.c, pmc_io.c, pmc_write.c) / caught"] = \
        "%s / %s" % pm.groups()
    rg = re.search(r"fixed protocol bugs put back (\d+), caught (\d+)", p.stdout)
    assert rg, p.stdout
    figures["fixed protocol bugs put back / caught"] = "%s / %s" % rg.groups()
    mm = re.search(r"model copies of io.c/writeback.c sites (\d+), mutants "
                   r"caught (\d+), redundant (\d+)", p.stdout)
    if mm:
        figures["model's io.c/writeback.c sites / caught / redundant"] = \
            "%s / %s / %s" % mm.groups()
    mr = re.search(r"mirror durability sites (\d+), caught (\d+), not modelled (\d+); "
                   r"mirror copy policy mutants (\d+), caught (\d+)", p.stdout)
    assert mr, p.stdout
    figures["mirror durability sites / caught / not modelled"] = \
        "%s / %s / %s" % mr.groups()[:3]
    figures["mirror copy policy mutants / caught"] = "%s / %s" % mr.groups()[3:]
    # the copy's fences and flushes, pmc_mirror_store()'s; the four
    # decisions of the copy (two found by the model)
    assert int(mr.group(1)) >= 8 and mr.group(1) == mr.group(2), p.stdout
    assert int(mr.group(4)) >= 4 and mr.group(4) == mr.group(5), p.stdout
    cr = re.search(r"data crc mutants (\d+), caught (\d+)", p.stdout)
    assert cr, p.stdout
    figures["data crc mutants / caught"] = "%s / %s" % cr.groups()
    # the crc over the kept sectors too, the crc in the record at all
    assert int(cr.group(1)) >= 2 and cr.group(1) == cr.group(2), p.stdout
    hc = re.search(r"controls (\d+), not caught (\d+)", p.stdout)
    assert hc and int(hc.group(1)) >= 1 and hc.group(1) == hc.group(2), p.stdout
    # the mutants that must be caught: shared code, bugs put back, the
    # model's sites that are not documented as redundant
    n = sites + int(pm.group(1)) + int(rg.group(1))
    c = caught + int(pm.group(2)) + int(rg.group(2))
    n += int(mr.group(1)) + int(mr.group(4)) + int(cr.group(1))
    c += int(mr.group(2)) + int(mr.group(5)) + int(cr.group(2))
    if mm:
        n, c = n + int(mm.group(1)) - int(mm.group(3)), c + int(mm.group(2))
    figures["host mutants"] = "%d, caught %d" % (n, c)
    figures["host mutant controls"] = "%s, not caught %s" % hc.groups()
    # pmc_meta.c has 8 fences, 9 flushed stores and 1 WAITPREV today
    assert sites >= 18
    assert caught == sites, p.stdout
    assert rg.group(1) == rg.group(2), p.stdout
    # st->around in the claim, the origin flush before CLEAN, its error,
    # a failed write's blocks; st->around of a write-around, around a
    # cached block or one in writeback, eviction's re-check; a write that
    # does not wait for a write-through, one through the cache during
    # writeback, a failed T1 acknowledged, T2 after a failed T1, a full
    # cache sending a cached block around, st->around of a write-through
    # dropped before T1; the completion: CLEAN before the flush, a failed
    # write or flush CLEAN, no flush when the last write failed; a claim
    # without the re-check; a read of sectors the copy does not hold.
    # Each caught by lost, stale or garbage data (mutants.py)
    assert int(pm.group(1)) >= 20 and pm.group(1) == pm.group(2), p.stdout
    assert "REFUTED" not in p.stdout and "NOT CAUGHT" not in p.stdout
    assert p.returncode == 0


@pytest.mark.skipif(not LONG, reason="long crash model run: set PMC_LONG=1")
def test_long_crash_model_at_least_1000000_states(crash_model, figures):
    # 100,000 operations: about 1.5 million crash states (62 s here), a
    # margin over the 1,000,000 asserted; 70,000 gave 1,027,273 and
    # then 1,054,668 as the model grew
    r = run_model(crash_model, "--ops", "100000", "--seed", "7",
                  "--images", "4", timeout=3600)
    r3 = run_model(crash_model, "--ops", "20000", "--seed", "8",
                   "--writers", "3", timeout=3600)
    figures["crash states checked (violations)"] = "%d (%d)" % (
        r["crash_states"] + r3["crash_states"],
        r["violations"] + r3["violations"])
    figures["crash states of the 2-writer run (asserted >= 1,000,000)"] = r["crash_states"]
    figures["crash model CPUs (writers)"] = "%d (%d) and %d (%d)" % (
        r["cpus"], r["writers"], r3["cpus"], r3["writers"])
    figures["crash model restarts from a crash image"] = r["restarts"] + r3["restarts"]
    figures["interrupted formats checked"] = r["format_states"] + r3["format_states"]
    assert r["crash_states"] >= 1000000
    assert r["writers"] >= 2 and r3["writers"] >= 3
    for x in (r, r3):
        assert x["violations"] == 0, x["stderr"][-2000:]
        assert x["rc"] == 0


@pytest.mark.skipif(not LONG, reason="long crash model run: set PMC_LONG=1")
def test_long_mirror_crash_model_at_least_1000000_states(crash_model, figures):
    # 80,000 operations gave 1,031,912 states (85 s here); 100,000 for a
    # margin over the 1,000,000 asserted
    r = run_model(crash_model, "--mirror", "--ops", "100000", "--seed", "7",
                  timeout=3600)
    figures["mirror crash states of the long run (asserted >= 1,000,000)"] = \
        "%d (%d violations)" % (r["crash_states"], r["violations"])
    figures["mirror long run: starts / copies ended / resumed at a mark / "
            "starts with a half lost / the copied half checked alone"] = \
        "%d / %d / %d / %d / %d" % (r["mirror_starts"], r["copies_done"],
                                   r["resumed_at_mark"], r["halves_lost"],
                                   r["alone_checked"])
    assert r["crash_states"] >= 1000000
    assert r["violations"] == 0, r["stderr"][-2000:]
    assert r["rc"] == 0
