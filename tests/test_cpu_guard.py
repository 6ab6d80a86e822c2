"""make test's guard on the CPU cost of the hot path (issue 33).

One short boot under QEMU -icount (qemu/run-vm.sh --icount: one guest
instruction per virtual nanosecond, so the times are instruction counts
and the same on any host load) runs the guard set of
tests/bench/run_cpu_bench.py: 4 KiB new-block writes, overwrites and read
hits, QD1 O_DIRECT, on the bare raw /dev/pmem0 (the floor) and on
dm-pmemcache.  Our overhead above the floor per op must stay within 10 %
of the value kept in tests/cpu_guard.json, which `make bench-cpu` writes
from the same set run first in its own boot (never by hand).  A failing
guard's message starts with run_cpu_bench.TOKEN; nothing else prints it.

The same boot then loads a mutant of the module that does extra work in
the write path (a loop of MUTANT_LOOPS iterations at the top of
pmc_map_write(), a few thousand instructions per write) in place of the
real one and runs the same set: the guard must fail on its figures.

By hand: PMC_CPU_GUARD_KO=path/to/dm-pmemcache.ko guards that module
instead of this tree's (the test then fails with the token if it costs
more); `python3 tests/test_cpu_guard.py LOOPS` builds a mutant with LOOPS
iterations and prints the path of its .ko.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))
import run_cpu_bench as cb  # noqa: E402
from vm import VM, BZIMAGE, KASAN_KERNEL, KBUILD, KCACHE, KSRC, LOGDIR, REPO, build  # noqa: E402

MUTANT_LOOPS = int(os.environ.get("PMC_CPU_MUTANT_LOOPS", "1000"))
GUARD_KO = os.environ.get("PMC_CPU_GUARD_KO")


def mutant_edit(loops):
    """The edit of io.c: a loop the compiler must keep (barrier()) before
    the first statement of pmc_map_write()."""
    old = "\t/* cleaner: no new blocks; seq_bypass: not for long sequential runs. */\n"
    new = ("\t{\n\t\tunsigned int pmc_mutant_i;\n\n"
           "\t\tfor (pmc_mutant_i = 0; pmc_mutant_i < %d; pmc_mutant_i++)\n"
           "\t\t\tbarrier();\n\t}\n" % loops) + old
    return old, new


def build_mutant(loops):
    """dm-pmemcache with the loop, built in a folder of this checkout's
    under KCACHE (the same path each time: ccache hits for the files the
    edit leaves alone). A build of the same sources against the same
    kernel build is reused. Returns the .ko."""
    import hashlib
    import vm_mutants
    dst = KCACHE / ("cpu-guard-mutant-%s-%d" % (LOGDIR.name, loops))
    key = hashlib.sha1(repr(mutant_edit(loops)).encode())
    for f in sorted((REPO / "dm-pmemcache").rglob("*")):
        if f.is_file() and (f.suffix in (".c", ".h") or f.name in ("Kbuild", "Makefile")):
            key.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    key.update((KBUILD / "Module.symvers").read_bytes())
    ko, stamp = dst / "dm-pmemcache/dm-pmemcache.ko", dst / "sources.sha1"
    if ko.exists() and stamp.exists() and stamp.read_text() == key.hexdigest():
        return ko
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    src = vm_mutants.copy_module(dst)
    io = src / "io.c"
    io.write_text(vm_mutants.apply_edits(io.read_text(), [mutant_edit(loops)]))
    p = subprocess.run(["flock", str(KCACHE / "kernel-build.lock"), "make", "-s", "-C", str(KSRC),
                        "O=%s" % KBUILD, "CC=ccache gcc", "M=%s" % src, "modules"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    stamp.write_text(key.hexdigest())
    return ko


@pytest.fixture(scope="module")
def guard_run(tmp_path_factory):
    """One icount boot: the guard set on the floor, dm-pmemcache (or
    PMC_CPU_GUARD_KO) and the mutant. Returns the parsed figures."""
    if not BZIMAGE.exists() or not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel at %s: run make kernel" % BZIMAGE)
    if KASAN_KERNEL:
        # KASAN's checks run in every instruction counted: the kept
        # figures are the product kernel's, and nothing else compares
        pytest.skip("a debug (KASAN) kernel: the guard's figures are the product kernel's")
    p = build(["make", "-s", "-C", str(KSRC), "O=%s" % KBUILD, "CC=ccache gcc",
               "M=%s" % (REPO / "dm-pmemcache"), "W=1", "modules"])
    assert p.returncode == 0, p.stderr
    files = cb.build_tool() + [(build_mutant(MUTANT_LOOPS), "/test/mutant.ko")]
    if GUARD_KO:
        files.append((GUARD_KO, "/lib/modules/extra/dm-pmemcache.ko"))
    guard = cb.sets_line("guard", cb.GUARD_SYSTEMS + ["pmc-mutant"], cb.GUARD_OPS,
                         cb.GUARD_COUNT, 1)
    vm = VM("cpu_guard", tmp_path_factory.mktemp("cpu_guard") / "state")
    res = vm.run(cb.script([guard]), files=files, disks=0, pmem_size=1024, timeout=300,
                 icount=True)
    assert "CPUDONE=1" in res.output, res.tail()
    return cb.parse(res.output)["results"]


def show(name, fig, kept):
    for op in fig["overhead"]:
        print("cpu guard %s %s: floor %.1f, ours %.1f, overhead %.1f (kept %.1f: %+.1f %%)" % (
            name, op, fig["floor"][op], fig["pmc"][op], fig["overhead"][op],
            kept["overhead"][op], 100.0 * (fig["overhead"][op] / kept["overhead"][op] - 1)))


def kept():
    return json.loads((REPO / "tests/cpu_guard.json").read_text())


def test_cpu_cost_of_the_hot_ops_stays_within_10_percent(guard_run):
    k = kept()
    now = cb.guard_figures(guard_run)
    show(GUARD_KO or "dm-pmemcache", now, k)
    bad = cb.guard_check(k, now)
    assert not bad, cb.TOKEN + " (kept: tests/cpu_guard.json, %s)\n%s" % (
        k.get("source"), "\n".join(bad))


def test_the_guard_fails_on_a_mutant_with_extra_work_per_write(guard_run):
    k = kept()
    mut = cb.guard_figures(guard_run, mutant=True)
    show("mutant (%d loops per write)" % MUTANT_LOOPS, mut, k)
    bad = cb.guard_check(k, mut)
    assert any(re.match(r"(new|overwrite): ", b) for b in bad), \
        "the guard passed a module with %d extra loops per write" % MUTANT_LOOPS
    assert not any(b.startswith("read: ") for b in bad), bad


def test_the_guard_check_on_made_up_figures():
    k = {"count": 8, "overhead": {"new": 1000.0, "read": 500.0}}
    assert cb.guard_check(k, {"count": 8, "overhead": {"new": 1100.0, "read": 400.0}}) == []
    bad = cb.guard_check(k, {"count": 8, "overhead": {"new": 1100.2, "read": None}})
    assert [b.split(":")[0] for b in bad] == ["new", "read"]
    assert "limit +10 %" in bad[0]
    assert "run make bench-cpu" in cb.guard_check(k, {"count": 9, "overhead": {}})[0]


if __name__ == "__main__":
    print(build_mutant(int(sys.argv[1]) if len(sys.argv) > 1 else MUTANT_LOOPS))
