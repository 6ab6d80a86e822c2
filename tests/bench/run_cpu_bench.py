#!/usr/bin/python3
"""make bench-cpu: the instruction-counted benchmark (issue 33).

One boot under QEMU's -icount shift=0,sleep=off on one vCPU
(qemu/run-vm.sh --icount): the guest's clock advances one nanosecond per
guest instruction, so the time of an operation that only the guest's CPU
does (pmem is memory; the origin is md raid1 over loop devices on tmpfs)
is its instruction count, the same on a loaded host as on an idle one.

In that boot tests/guest/cpubench.c times, QD1, psync, O_DIRECT, one
operation at a time, 4 KiB new-block writes, overwrites of cached
blocks, read hits, 512 B reads, write + fdatasync (FLUSH), O_DSYNC writes
(FUA) and discards on the bare pmem device (the floor, in the raw and in
the fsdax namespace mode), dm-pmemcache (raw namespace) and dm-writecache
(pmem mode, fsdax namespace, as make bench sets it up), each measurement
twice (the repeats' spread is the noise).  First of all it runs the
guard set of tests/test_cpu_guard.py (the same set, the same way, at the
same point of a fresh boot), whose figures become tests/cpu_guard.json:
the values the make-test guard compares with.

Writes docs/bench/cpu.json (every figure, with date, commit and kernel),
docs/bench/cpu.md (rendered from it) and tests/cpu_guard.json.
--report: render docs/bench/cpu.md from the kept JSON only.

Then, on the host, tests/host/scale_bench (the module's shared write path
on 1 and 2 threads over DRAM, with the free slots taken per thread in
batches as io.c does, and the old way: one shared spinlock per slot)
writes docs/bench/cpu_scale.json and its figure cpu_scale.png.
--scale: only that, and the page rendered again.
BENCH_CPU_COUNT: blocks per measurement (default 4096).
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

REPO = HERE.parent.parent
OUT = REPO / "docs/bench"
CPU_JSON = OUT / "cpu.json"
CPU_MD = OUT / "cpu.md"
GUARD_JSON = REPO / "tests/cpu_guard.json"
TOOL = REPO / "tests/guest/cpubench"
SCALE_JSON = OUT / "cpu_scale.json"
SCALE_PNG = OUT / "cpu_scale.png"
SCALE_BIN = REPO / "tests/host/scale_bench"
SCALE_THREADS = [1, 2]

# The make-test guard: the three hot ops on the raw floor and on
# dm-pmemcache, 2048 blocks each, once.
GUARD_COUNT = 2048
GUARD_OPS = ["null", "new", "overwrite", "read"]
GUARD_SYSTEMS = ["floor-raw", "pmc"]
GUARD_TOLERANCE = 0.10
# Printed by a failing guard only (tests/test_cpu_guard.py's assertion).
TOKEN = "CPU-GUARD-FAILURE: " + "overhead above the floor grew"

OPS = ["null", "new", "overwrite", "read", "read512", "flush", "fua", "discard"]
SYSTEMS = ["floor-raw", "pmc", "floor-fsdax", "wc"]
REPEATS = 2
COUNT = int(os.environ.get("BENCH_CPU_COUNT", "4096"))
# the cost of data_crc (issue 31): dm-pmemcache with and without it
CRC_SYSTEMS = ["floor-raw", "pmc", "pmc-crc"]
CRC_OPS = ["null", "new", "overwrite", "read", "read512", "fua"]
# dm core's share: dm-zero (a target that completes every bio in its map,
# doing nothing) and dm-linear on the raw namespace, beside the raw floor
DM_SYSTEMS = ["floor-raw", "zero", "linear"]
DM_OPS = ["null", "new", "read"]
# writeback: dm-pmemcache's two routes and dm-writecache, to md raid1 over
# virtio disks
WB_SYSTEMS = ["wb-pfn", "wb-bounce", "wb-wc", "wbx-pfn", "wbx-bounce", "wbx-wc"]
WB_COUNT = int(os.environ.get("BENCH_CPU_WB_COUNT", "4096"))

OP_NAMES = {
    "new": "4 KiB write, new block",
    "overwrite": "4 KiB overwrite of a cached block",
    "read": "4 KiB read hit",
    "read512": "512 B read of a cached block",
    "flush": "4 KiB overwrite + fdatasync (FLUSH)",
    "fua": "4 KiB overwrite, O_DSYNC (FUA)",
    "discard": "4 KiB discard of a cached block",
}
# the floor each system's overhead is taken above
FLOOR = {"pmc": "floor-raw", "pmc-mutant": "floor-raw", "pmc-crc": "floor-raw",
         "wc": "floor-fsdax"}
# issue 33's goals: our overhead / dm-writecache's, and for write+FLUSH
# the total per op
GOALS = {"new": ("overhead", 0.8), "read": ("overhead", 0.8),
         "overwrite": ("overhead", 1.0), "flush": ("total", 0.6)}


def sets_line(name, systems, ops, count, repeats):
    return "%s %s %s %d %d" % (name, ",".join(systems), ",".join(ops), count, repeats)


GUARD_SET = sets_line("guard", GUARD_SYSTEMS, GUARD_OPS, GUARD_COUNT, 1)


def build_tool():
    """The static guest program (tests/guest/cpubench.c)."""
    from vm import build
    p = build(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror",
               "-o", str(TOOL), str(TOOL) + ".c"])
    if p.returncode:
        raise RuntimeError("cpubench did not build:\n" + p.stderr)
    return [(TOOL, "/usr/bin/cpubench")]


def script(sets):
    return "SETS='%s'\n" % "\n".join(sets) + (HERE / "guest_cpu.sh").read_text()


def parse(output):
    """{"results": {set: {system: {op: [per repeat: {mean, median, min,
    max, n} or {err}]}}}, "status": {tag: dmsetup status}, "info": {..}}"""
    res, status, info = {}, {}, {}
    for l in output.splitlines():
        if l.startswith("CPU "):
            kv = dict(re.findall(r"(\w+)=(\S+)", l))
            set_, sys_, rep = kv.pop("tag").split(":")
            op = kv.pop("op")
            rec = {k: (float(v) if k == "mean" else int(v)) for k, v in kv.items()}
            reps = res.setdefault(set_, {}).setdefault(sys_, {}).setdefault(op, [])
            while len(reps) < int(rep) - 1:
                reps.append(None)
            reps.append(rec)
        elif l.startswith("STATUS "):
            tag, st = l[7:].split(" ", 1)
            status[tag[4:]] = st.replace(",", " ")
        elif l.startswith("WB "):
            kv = dict(re.findall(r"(\w+)=(\S+)", l))
            set_, sys_, rep = kv.pop("tag").split(":")
            res.setdefault("writeback", {}).setdefault(sys_, []).append(
                {k: int(v) for k, v in kv.items()})
        elif l.startswith("CPUINFO "):
            info.update(re.findall(r"(\w+)=(\S+)", l))
    return {"results": res, "status": status, "info": info}


def mean_of(reps, key="mean"):
    vals = [r[key] for r in reps or [] if r and key in r]
    return statistics.mean(vals) if vals else None


def guard_figures(results, mutant=False):
    """{"floor": {op: ns}, "pmc": {op: ns}, "overhead": {op: ns}} of a
    guard set (the mean per op; pmc-mutant's in place of pmc with
    mutant)."""
    g = results["guard"]
    ours = g["pmc-mutant" if mutant else "pmc"]
    out = {"count": GUARD_COUNT, "floor": {}, "pmc": {}, "overhead": {}}
    for op in GUARD_OPS:
        if op == "null":
            continue
        f, o = mean_of(g["floor-raw"].get(op)), mean_of(ours.get(op))
        out["floor"][op], out["pmc"][op] = f, o
        out["overhead"][op] = None if f is None or o is None else round(o - f, 1)
    return out


def guard_check(kept, now, tolerance=GUARD_TOLERANCE):
    """The ops whose overhead above the floor grew more than @tolerance
    over the kept value: a list of lines, empty if none did."""
    bad = []
    if kept.get("count") != now.get("count"):
        return ["the kept figures are for %s blocks, this run %s: run make bench-cpu"
                % (kept.get("count"), now.get("count"))]
    for op, k in kept["overhead"].items():
        n = now["overhead"].get(op)
        if n is None:
            bad.append("%s: no figure this run" % op)
        elif n > k * (1 + tolerance):
            bad.append("%s: %.1f ns (instructions) above the floor, kept %.1f: +%.1f %% "
                       "(limit +%d %%)" % (op, n, k, 100.0 * (n - k) / k, round(100 * tolerance)))
    return bad


def compare(old, new):
    """The largest difference between the means of the bench set in the
    kept run and in this one (another boot): what one boot's figures say
    about the next one's."""
    worst, where = 0.0, None
    a, b = old.get("results", {}).get("bench", {}), new["results"]["bench"]
    for sys_ in b:
        for op in b[sys_]:
            if op == "null":
                continue
            for x, y in zip(a.get(sys_, {}).get(op) or [], b[sys_][op]):
                if x and y and "mean" in x and "mean" in y:
                    d = 100.0 * abs(y["mean"] - x["mean"]) / x["mean"]
                    if d >= worst:
                        worst, where = d, "%s %s" % (sys_, op)
    s = old.get("settings", {})
    return {"date": s.get("date"), "commit": s.get("commit"), "dirty": s.get("dirty"),
            "count": s.get("count"), "worst_pct": round(worst, 3), "where": where}


def git(*args):
    return subprocess.run(["git", "-C", str(REPO)] + list(args), capture_output=True,
                          text=True).stdout.strip()


def boot(name, sets, files):
    """One icount boot running @sets; returns (script output, host s)."""
    from vm import VM, KCACHE
    from run_bench import run_guest
    state = Path(tempfile.mkdtemp(prefix="%s." % name, dir=KCACHE))
    vm = VM(name, state)
    log = vm._log_path()
    cmd = vm.command(script(sets), files=files, timeout=3600, disks=2, pmem_size=1024,
                     log=log, icount=True)
    t0 = time.time()
    rc, output, _ = run_guest(cmd, log, "")
    wall = time.time() - t0
    subprocess.run(["rm", "-rf", str(state)])
    if rc != 0 or "CPUDONE=1" not in output:
        sys.exit("cpu bench: the guest exited %d (log %s)" % (rc, log))
    return output, wall


def profile(files):
    """The second boot: the profiling copy (cpu_profile.py) in place of
    the module, the hot ops once; {"kinds": .., "results": ..} or
    {"error": why} if the copy could not be made."""
    import cpu_profile
    import vm_mutants
    with tempfile.TemporaryDirectory(prefix="pmc-prof-") as tmp:
        try:
            ko = cpu_profile.build(Path(tmp))
        except (vm_mutants.MutantError, RuntimeError) as e:
            print("cpu bench: no profile: %s" % e)
            return {"error": str(e).splitlines()[0]}
        print("== profiling copy", flush=True)
        output, _ = boot("cpuprof", [sets_line("prof", GUARD_SYSTEMS, GUARD_OPS, COUNT, 1)],
                         files + [(ko, "/lib/modules/extra/dm-pmemcache.ko")])
    return {"kinds": cpu_profile.parse(output), "results": parse(output)["results"]["prof"]}


def run():
    files = build_tool()
    sets = [GUARD_SET, sets_line("bench", SYSTEMS, OPS, COUNT, REPEATS),
            sets_line("wb", WB_SYSTEMS, ["new"], WB_COUNT, REPEATS),
            sets_line("crc", CRC_SYSTEMS, CRC_OPS, COUNT, REPEATS),
            sets_line("dm", DM_SYSTEMS, DM_OPS, COUNT, 1)]
    output, wall = boot("cpubench", sets, files)
    r = parse(output)
    r["profile"] = profile(files)
    r["settings"] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "kernel": r["info"].get("kernel"),
        "clocksource": r["info"].get("clocksource"),
        "count": COUNT, "guard_count": GUARD_COUNT, "repeats": REPEATS, "wb_count": WB_COUNT,
        "boot_s": round(wall),
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }
    del r["info"]
    if CPU_JSON.exists():
        r["vs_previous"] = compare(json.loads(CPU_JSON.read_text()), r)
    OUT.mkdir(parents=True, exist_ok=True)
    CPU_JSON.write_text(json.dumps(r, indent=1, sort_keys=True) + "\n")
    g = guard_figures(r["results"])
    g["source"] = "tests/bench/run_cpu_bench.py (make bench-cpu), %s, commit %s%s" % (
        r["settings"]["date"], r["settings"]["commit"][:12],
        " (dirty tree)" if r["settings"]["dirty"] else "")
    GUARD_JSON.write_text(json.dumps(g, indent=1, sort_keys=True) + "\n")
    scale(r["settings"])
    CPU_MD.write_text(render(r))
    print("cpu bench: %d s; %s, %s and %s written" % (
        wall, CPU_JSON.relative_to(REPO), CPU_MD.relative_to(REPO), GUARD_JSON.relative_to(REPO)))


def scale(tree=None):
    """tests/host/scale_bench, both ways of taking free slots: its JSON
    kept with the host's load and the commit (@tree: the commit and
    dirtiness of the guest run, which has just written the pages), and
    the figure."""
    subprocess.run(["make", "-s", "-C", str(SCALE_BIN.parent), SCALE_BIN.name], check=True)
    r = {"runs": {}}
    for mode in ("shared", "per-thread"):
        args = [str(SCALE_BIN), "--threads", ",".join(map(str, SCALE_THREADS)),
                "--repeat", "5"] + (["--shared"] if mode == "shared" else [])
        r["runs"][mode] = json.loads(subprocess.run(args, check=True, capture_output=True,
                                                    text=True).stdout)
    r["settings"] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": tree["commit"] if tree else git("rev-parse", "HEAD"),
        "dirty": tree["dirty"] if tree else
        bool(git("status", "--porcelain", "--untracked-files=no")),
        "cpus": os.cpu_count(),
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    SCALE_JSON.write_text(json.dumps(r, indent=1, sort_keys=True) + "\n")
    scale_figure(r)


def scale_figure(r):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for mode, style in (("shared", "o--"), ("per-thread", "s-")):
        t = r["runs"][mode]["threads"]
        n = sorted(int(k) for k in t)
        ax.plot(n, [t[str(k)] / 1e6 for k in n], style,
                label={"shared": "one shared free list lock per slot",
                       "per-thread": "per-thread batches (io.c)"}[mode])
    ax.set_xticks(SCALE_THREADS)
    ax.set_xlabel("threads")
    ax.set_ylabel("4 KiB writes, million ops/s")
    ax.set_ylim(bottom=0)
    ax.set_title("pmc_write() over DRAM (tests/host/scale_bench)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(SCALE_PNG, dpi=100)
    plt.close(fig)


def scale_section():
    if not SCALE_JSON.exists():
        return []
    r = json.loads(SCALE_JSON.read_text())
    s = r["settings"]
    lines = ["## Host scaling: the shared write path on threads", "",
             "`tests/host/scale_bench` (%s, commit %s%s, %d host CPUs, load %s while it ran) "
             "links the module's shared units, the crash model's (`pmc_write.c`, `pmc_meta.c`, "
             "`pmc_index.c`, `pmc_io.c`, `pmc_wb.c`), and commits 4 KiB writes of random blocks "
             "(new blocks and overwrites) with `pmc_write()` from each thread into a cache in "
             "DRAM (a store is durable at once, a fence is a compiler barrier): the CPU path "
             "and what the threads share, not pmem. Its `pmc_env_*()` are those of `io.c`: a "
             "rw lock per index stripe, the W3 seq one atomic on a line of its own, the dirty "
             "counts atomics all threads write, free slots per thread in batches of 16 from "
             "the shared list (or, `shared`, the shared list's spinlock for every slot, as "
             "before issue 33). Best of 5 runs of %s writes per thread, %s blocks written at "
             "random. Wall-clock figures: they move with whatever else the host runs."
             % (s["date"], s["commit"][:12], " (dirty tree)" if s["dirty"] else "", s["cpus"],
                s["loadavg"], fmt(r["runs"]["shared"]["ops_per_thread"]),
                fmt(r["runs"]["shared"]["blocks"])), "",
             "| free slots | %s | 2 threads / 1 |" % " | ".join(
                 "%d thread%s, ops/s" % (n, "" if n == 1 else "s") for n in SCALE_THREADS),
             "|---|%s---:|" % ("---:|" * len(SCALE_THREADS))]
    for mode in ("shared", "per-thread"):
        t = r["runs"][mode]["threads"]
        lines.append("| %s | %s | %.2f |" % (mode, " | ".join(fmt(t[str(n)]) for n in SCALE_THREADS),
                                             t["2"] / t["1"]))
    lines += ["", "![ops/s at 1 and 2 threads](cpu_scale.png)", ""]
    return lines


# ---- the page ------------------------------------------------------------

def fmt(x, nd=0):
    if x is None:
        return "–"
    return "{:,.{}f}".format(x, nd)


def spread(reps, key="mean"):
    """(max - min) / min of the repeats, in %."""
    vals = [r[key] for r in reps or [] if r and key in r]
    if len(vals) < 2 or min(vals) <= 0:
        return None
    return 100.0 * (max(vals) - min(vals)) / min(vals)


def cell(reps, key="mean"):
    if reps and any(r and "err" in r for r in reps):
        return "n/a (errno %d)" % next(r["err"] for r in reps if r and "err" in r)
    return fmt(mean_of(reps, key))


def rows(b, key):
    """Per op: (op, floor-raw, pmc, floor-fsdax, wc, our overhead, theirs,
    ratio) of the bench set, by the mean or the median of the repeats."""
    out = []
    for op in OPS[1:]:
        v = {s: mean_of(b.get(s, {}).get(op), key) for s in SYSTEMS}
        ours = None if v["pmc"] is None or v["floor-raw"] is None else v["pmc"] - v["floor-raw"]
        theirs = None if v["wc"] is None or v["floor-fsdax"] is None else v["wc"] - v["floor-fsdax"]
        if v["floor-raw"] is None and v["pmc"] is not None:     # no floor (discard)
            ours, theirs = v["pmc"], v["wc"]
        out.append((op, v, ours, theirs,
                    ours / theirs if ours is not None and theirs else None))
    return out


PMC_FIELDS = {"dirty": 4, "wb_pfn_blocks": 15, "wb_bounce_blocks": 17, "wb_notsupp": 20}
WB_NAMES = {"wb-pfn": "dm-pmemcache, `writeback pfn` (page-less bios)",
            "wb-bounce": "dm-pmemcache, `writeback bounce` (DRAM pages)",
            "wb-wc": "dm-writecache (pmem mode, fsdax)"}
WB_NAMES.update({"wbx-" + k[3:]: v + ", every other block" for k, v in WB_NAMES.items()})


def per_block(rec):
    return (rec["drain_busy_ns"] - rec["clean_busy_ns"]) / rec["blocks"]


def writeback_section(r):
    wbr = r["results"].get("writeback")
    if not wbr:
        return []
    s = r["settings"]
    lines = ["## Writeback per block", "",
             "%s new blocks written to the cache (4 KiB, QD1), then a `flush` message "
             "writes them back to md raid1 over two virtio disks (loop devices take no "
             "page-less bios), followed by a second of sleep for the last completions. The "
             "origin's I/O is QEMU's host-side work, so the virtual time of a drain includes "
             "idle time: the figure is the guest's busy time (virtual ns since boot minus "
             "idle and iowait time, `/proc/timer_list`) over that span, minus the same span "
             "on the then clean cache (the `dmsetup` process, the sleep, an empty flush), "
             "per block. It counts everything the guest's CPU did meanwhile: the cache's "
             "writeback, md raid1 (two member writes per block), virtio and the completion "
             "interrupts, whose batching follows the host's timing; so these rows are less "
             "deterministic than the others (see the spread). The blocks are 0 to %s of "
             "the origin, or every other block of twice that range: dm-writecache writes "
             "adjacent dirty blocks back in one bio, so the contiguous rows favour it; no "
             "two blocks of the second set are adjacent." % (fmt(s.get("wb_count")),
                                                          fmt(s.get("wb_count", 1) - 1)), "",
             "| system | blocks written back as pfn / bounce (pfn refused) | repeat 1 | "
             "repeat 2 | mean | spread |", "|---|---|---:|---:|---:|---:|"]
    for sys_ in WB_SYSTEMS:
        reps = wbr.get(sys_) or []
        per = [per_block(x) for x in reps]
        route = "–"
        st = r["status"].get("wb:%s:1" % sys_, "").split()
        if not sys_.endswith("-wc") and len(st) > max(PMC_FIELDS.values()):
            route = "%s / %s (%s)" % tuple(st[PMC_FIELDS[k]] for k in (
                "wb_pfn_blocks", "wb_bounce_blocks", "wb_notsupp"))
        sp = (100.0 * (max(per) - min(per)) / min(per)) if len(per) > 1 and min(per) > 0 else None
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            WB_NAMES[sys_], route, *(fmt(x) for x in (per + [None, None])[:2]),
            fmt(statistics.mean(per)) if per else "–", "–" if sp is None else "%.1f %%" % sp))
    return lines + [""]


def profile_section(r):
    import cpu_profile
    prof = r.get("profile")
    if not prof:
        return []
    lines = ["## Where our instructions go", ""]
    if "error" in prof:
        return lines + ["No profile this run: %s" % prof["error"], ""]
    b, p = r["results"]["bench"], prof["results"]
    lines += ["A second boot loads a profiling copy of the module "
              "(`tests/bench/cpu_profile.py`: the same code with `rdtsc()` stamps at the "
              "phase boundaries of `pmc_map()`; under `-icount` the TSC counts "
              "instructions) and runs the hot ops once on %s blocks. Mean instructions per "
              "operation in each phase, from `pmc_map()`'s entry to its return:"
              % fmt(r["settings"]["count"]), ""]
    for kind, phases in (("new", cpu_profile.WRITE_PHASES),
                         ("overwrite", cpu_profile.WRITE_PHASES),
                         ("read", cpu_profile.READ_PHASES)):
        k = prof["kinds"].get(kind)
        if not k:
            continue
        copy = k["phases"][cpu_profile.COPY_PHASE["read" if kind == "read" else "write"] - 1]
        total = sum(k["phases"])
        plain = mean_of(b["pmc"].get(kind))
        stamped = mean_of(p["pmc"].get(kind))
        floor = mean_of(b["floor-raw"].get(kind))
        over = plain - floor
        ours = total - copy
        lines += ["### %s (%s ops)" % (OP_NAMES[kind], fmt(k["n"])), "",
                  "| phase | instructions |", "|---|---:|"]
        for name, v in zip(phases, k["phases"]):
            lines.append("| %s | %s |" % (name, fmt(v)))
        lines += ["| **inside `pmc_map()`** | **%s** |" % fmt(total), "",
                  "With the stamps the operation cost %s instructions, %s without: the "
                  "stamps and the sums cost %s, a few of them inside each phase. Above the "
                  "floor (%s) the plain module costs **%s**: about **%s** of it inside "
                  "`pmc_map()` other than the data copy (the floor copies as well; stamps "
                  "included), and about **%s** outside `pmc_map()`: dm core's clone of the "
                  "bio, its submission and its completion, and whatever differs between our "
                  "copy and pmem's."
                  % (fmt(stamped), fmt(plain), fmt(stamped - plain), fmt(floor), fmt(over),
                     fmt(ours), fmt(over - ours)), ""]
        ci = cpu_profile.COPY_PHASE["read" if kind == "read" else "write"] - 1
        top = sorted(((v, name) for i, (name, v) in enumerate(zip(phases, k["phases"]))
                      if i != ci), reverse=True)[:3]
        lines += ["Largest phases other than the copy: %s." % "; ".join(
            "%s (%s)" % (name, fmt(v)) for v, name in top), ""]
    return lines


def dm_section(r):
    """dm core's share of an overhead above the floor, from dm-zero and
    dm-linear, and each cache's own work: its total minus dm-zero's (the
    syscall, the block layer and dm core) minus the 4 KiB copy (the
    profile's phase: memcpy_flushcache for a write, copy_mc for a read,
    which dm-writecache calls as well)."""
    d, b = r["results"].get("dm"), r["results"].get("bench", {})
    if not d:
        return []
    f_new, z_new, l_new = (mean_of(d.get(s_, {}).get("new")) for s_ in DM_SYSTEMS)
    lines = ["## dm core's share", "",
             "Every dm target pays dm core's bio clone, its map call and its completion "
             "chain. The `dm` set of the same boot (%s blocks, once) measures it: "
             "**dm-zero** completes every bio in its map and does nothing else (a read "
             "zero-fills the bio, so only its write is used below); **dm-linear** on the "
             "raw namespace sends the clone on to `/dev/pmem0`, so it pays dm core and "
             "pmem's own submission once more. Mean instructions per operation:"
             % fmt(r["settings"]["count"]), "",
             "| op | floor (raw) | dm-zero | dm-linear | dm-linear above the floor |",
             "|---|---:|---:|---:|---:|"]
    for op in DM_OPS[1:]:
        f, z, li = (mean_of(d.get(s_, {}).get(op)) for s_ in DM_SYSTEMS)
        lines.append("| %s | %s | %s | %s | %s |" % (
            OP_NAMES[op], fmt(f), fmt(z), fmt(li),
            fmt(li - f) if li is not None and f is not None else "–"))
    prof = (r.get("profile") or {}).get("kinds") or {}
    if "error" in (r.get("profile") or {}) or not prof.get("new") or not prof.get("read"):
        return lines + ["", "No profile this run: the copies' cost, and so the targets' own "
                        "work, is not known.", ""]
    import cpu_profile
    copy = {"write": prof["new"]["phases"][cpu_profile.COPY_PHASE["write"] - 1],
            "read": prof["read"]["phases"][cpu_profile.COPY_PHASE["read"] - 1]}
    core = z_new - (f_new - copy["write"])
    lines += ["", "dm-zero's write does no data work; the floor's write copies 4 KiB (the "
              "profile's W1 phase below: %s instructions). So dm core costs a dm target at "
              "least **%s** instructions per 4 KiB write above a bio-based device "
              "(dm-zero − (floor − copy)), before the target does anything. Each cache's "
              "own work is then its total minus dm-zero's write (the syscall, the block "
              "layer and dm core) minus the 4 KiB copy (%s instructions for a write, %s "
              "for a machine-check-safe read: the same functions in both caches):"
              % (fmt(copy["write"]), fmt(core), fmt(copy["write"]), fmt(copy["read"])), "",
              "| op | dm-pmemcache's own work | dm-writecache's own work | ours / theirs |",
              "|---|---:|---:|---:|"]
    for op in ("new", "overwrite", "read"):
        ours, theirs = mean_of(b.get("pmc", {}).get(op)), mean_of(b.get("wc", {}).get(op))
        if None in (ours, theirs):
            continue
        c = copy["read" if op == "read" else "write"]
        o, t = ours - z_new - c, theirs - z_new - c
        lines.append("| %s | %s | %s | %s |" % (OP_NAMES[op], fmt(o), fmt(t),
                                                 fmt(o / t, 2) if t > 0 else "–"))
    wc_over = mean_of(b.get("wc", {}).get("new")) - mean_of(b.get("floor-fsdax", {}).get("new"))
    lines += ["", "Issue 33's goal for a new write, an overhead above the floor of at most "
              "0.8 × dm-writecache's (%s), leaves **%s** instructions for our own work once "
              "dm core took its %s: less than a third of dm-writecache's own work, for a "
              "write that must also commit a checksummed record with its own fence. The "
              "goals above are kept as the issue set them; this is what they imply."
              % (fmt(0.8 * wc_over), fmt(0.8 * wc_over - core), fmt(core)), ""]
    return lines


def crc_cost(r):
    """{op: (ours, with data_crc, the difference, its spread)} per op of
    the "crc" set, in guest instructions (means over the repeats); the
    spread is the larger of the two systems' (max - min) / min, in %."""
    c = r["results"].get("crc", {})
    out = {}
    for op in CRC_OPS[1:]:
        plain, crc = c.get("pmc", {}).get(op), c.get("pmc-crc", {}).get(op)
        a, b = mean_of(plain), mean_of(crc)
        if a is None or b is None:
            continue
        out[op] = (a, b, b - a, max(spread(plain) or 0, spread(crc) or 0))
    return out


def crc_section(r):
    cost = crc_cost(r)
    if not cost:
        return []
    floor = r["results"]["crc"].get("floor-raw", {})
    lines = ["## The cost of `data_crc` (issue 31)", "",
             "The set `crc` of the same boot: dm-pmemcache formatted without and with "
             "`data_crc` (`4096 2 format data_crc`), on the raw floor, the operations as "
             "above. With it, a write stores its data a sector at a time through a copy "
             "whose crc32c is taken (`pmc_meta_store_sector()`), and a read checks the "
             "block's valid sectors against the record's crc (`pmc_meta_check_data()`: the "
             "whole block, even for a 512 B read).", "",
             "| op | floor (raw) | dm-pmemcache | with `data_crc` | difference | overhead "
             "above the floor, with / without | spread of the repeats |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for op, (a, b, d, sp) in cost.items():
        f = mean_of(floor.get(op))
        ratio = (b - f) / (a - f) if f is not None and a - f > 0 else None
        lines.append("| %s | %s | %s | %s | %+d | %s | %.2f %% |" % (
            OP_NAMES[op], fmt(f), fmt(a), fmt(b), round(d), fmt(ratio, 2), sp))
    return lines + [""]


def render(r):
    s, res = r["settings"], r["results"]
    b = res.get("bench", {})
    lines = [
        "# Instruction-counted CPU cost per operation (issue 33)", "",
        "Generated by `make bench-cpu` (`tests/bench/run_cpu_bench.py`) on %s from "
        "`docs/bench/cpu.json`; commit %s%s, kernel %s, guest clocksource %s; the boot took "
        "%s s of host time (host load %s)."
        % (s["date"], s["commit"][:12], " (dirty tree)" if s["dirty"] else "", s["kernel"],
           s["clocksource"], s["boot_s"], s["loadavg"]), "",
        "One boot under QEMU `-icount shift=0,sleep=off` on one vCPU (`qemu/run-vm.sh "
        "--icount`): the guest clock advances 1 ns per guest instruction, so a "
        "`clock_gettime()` delta is an instruction count, whatever the host's load. "
        "`tests/guest/cpubench.c` times each operation alone: QD1, psync, `O_DIRECT`, on "
        "%s blocks of 4 KiB visited in one fixed random order, the operations in the order "
        "of the table (so an overwrite, a read, a flush, a FUA write and a discard find the "
        "block cached). dm-pmemcache runs on the raw namespace (`4096 1 format`), "
        "dm-writecache in pmem mode on the fsdax namespace (`writecache p ... 4096 0`, as "
        "`make bench`), both over md raid1 of two loop devices on tmpfs (an operation that "
        "reaches the origin stays guest CPU work). The floor is bare `/dev/pmem0` in the "
        "same namespace mode: ours is taken above the raw floor, theirs above the fsdax "
        "floor. Each figure is the mean over the %d repeats of the per-operation mean, in "
        "guest instructions (virtual ns), including the syscall and the two clock reads "
        "(the `null` row)."
        % (fmt(s["count"]), s["repeats"]), "",
        "Instruction counts, not cycles: cache misses, shared cache lines and lock "
        "contention cost nothing here. They measure the CPU path, which is what issue 33 "
        "is about.", "",
        "| op | floor (raw) | dm-pmemcache | floor (fsdax) | dm-writecache | overhead above "
        "floor: ours | theirs | ours / theirs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    null = mean_of(b.get("floor-raw", {}).get("null"))
    for op, v, ours, theirs, ratio in rows(b, "mean"):
        c = {sys_: cell(b.get(sys_, {}).get(op)) for sys_ in SYSTEMS}
        if op == "discard":
            lines.append("| %s | %s | %s | %s | %s | (no floor) %s | %s | %s |" % (
                OP_NAMES[op], c["floor-raw"], c["pmc"], c["floor-fsdax"], c["wc"],
                fmt(ours), fmt(theirs), fmt(ratio, 2)))
            continue
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            OP_NAMES[op], c["floor-raw"], c["pmc"], c["floor-fsdax"], c["wc"],
            fmt(ours), fmt(theirs), "**%s**" % fmt(ratio, 2) if ratio else "–"))
    lines += ["", "The two clock reads around an operation (`null`): %s instructions, in "
              "every figure above (and gone from the overheads). n/a: errno 95 "
              "(`EOPNOTSUPP`), bare pmem has no discard; errno 22 (`EINVAL`), dm-writecache "
              "sets its logical block size to its block size (4 KiB), so a 512 B `O_DIRECT` "
              "read is refused. The discards reach the origin (md raid1 over loop devices "
              "on tmpfs: a hole punched in a tmpfs file) in both caches; their figures "
              "include that work." % fmt(null, 1), ""]
    # the goals
    by = {op: (v, ours, theirs, ratio) for op, v, ours, theirs, ratio in rows(b, "mean")}
    lines += ["## Issue 33's goals, this tree", "",
              "| op | measure | ours / theirs | goal | met |", "|---|---|---:|---:|---|"]
    for op, (what, goal) in GOALS.items():
        v, ours, theirs, ratio = by[op]
        if what == "total":
            ratio = v["pmc"] / v["wc"] if v["pmc"] and v["wc"] else None
        lines.append("| %s | %s | %s | ≤ %.1f | %s |" % (
            OP_NAMES[op], "overhead above the floor" if what == "overhead" else "total per op",
            fmt(ratio, 2), goal, "–" if ratio is None else ("yes" if ratio <= goal else "**no**")))
    # medians
    lines += ["", "## Medians", "",
              "The same, by the median of each measurement (mean of the repeats' medians): "
              "the mean carries the rare expensive operation (an autocommit, a timer tick "
              "taken inside the operation), the median the common path.", "",
              "| op | floor (raw) | dm-pmemcache | floor (fsdax) | dm-writecache | ours | "
              "theirs | ours / theirs |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for op, v, ours, theirs, ratio in rows(b, "median"):
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            OP_NAMES[op], *(cell(b.get(sys_, {}).get(op), "median") for sys_ in SYSTEMS),
            fmt(ours), fmt(theirs), fmt(ratio, 2)))
    # the noise
    lines += ["", "## Noise: the two repeats", "",
              "Each system was set up afresh for each repeat, in one boot (repeat 2 after "
              "the namespace went raw → fsdax → raw). Per op, each repeat's mean and the "
              "spread (max − min) / min:", "",
              "| op | system | repeat 1 | repeat 2 | spread |", "|---|---|---:|---:|---:|"]
    worst = {True: 0.0, False: 0.0}
    for op in OPS:
        for sys_ in SYSTEMS:
            reps = b.get(sys_, {}).get(op)
            if not reps or any(r is None or "err" in r for r in reps):
                continue
            sp = spread(reps)
            worst[op == "null"] = max(worst[op == "null"], sp or 0)
            lines.append("| %s | %s | %s | %s | %s |" % (
                op, sys_, *(fmt(x["mean"], 1) for x in reps[:2]),
                "–" if sp is None else "%.2f %%" % sp))
    lines += ["", "Largest spread of an operation: **%.2f %%**; of the `null` row %.2f %% "
              "(its span is so short that the few timer interrupts that land in one of "
              "its %s spans move its mean by a few instructions)."
              % (worst[False], worst[True], fmt(s["count"])), ""]
    prev = r.get("vs_previous")
    if prev and prev.get("where") and prev.get("count") == s["count"]:
        lines += ["Against the previous run of `make bench-cpu` (%s, commit %s%s, another "
                  "boot), the largest difference of an operation's mean is **%.2f %%** (%s)."
                  % (prev["date"], (prev["commit"] or "?")[:12],
                     " (dirty tree)" if prev.get("dirty") else "", prev["worst_pct"],
                     prev["where"]), ""]
    lines += writeback_section(r)
    lines += crc_section(r)
    lines += dm_section(r)
    lines += profile_section(r)
    lines += scale_section()
    # the guard's set
    g = res.get("guard")
    if g:
        gf = guard_figures(res)
        lines += ["## The make-test guard's figures", "",
                  "The first set of this boot is the one `tests/test_cpu_guard.py` runs in its "
                  "own short boot: %s blocks, the raw floor and dm-pmemcache, once. Its "
                  "overheads are kept in `tests/cpu_guard.json`; the test fails when one "
                  "grows more than %d %% over them." % (fmt(GUARD_COUNT), 100 * GUARD_TOLERANCE),
                  "", "| op | floor (raw) | dm-pmemcache | overhead |", "|---|---:|---:|---:|"]
        for op in GUARD_OPS[1:]:
            lines.append("| %s | %s | %s | %s |" % (OP_NAMES[op], fmt(gf["floor"][op]),
                                                    fmt(gf["pmc"][op]), fmt(gf["overhead"][op])))
        lines.append("")
    extra = r.get("notes")
    if extra:
        lines += [extra.rstrip(), ""]
    return "\n".join(lines)


def main():
    if "--report" in sys.argv[1:]:
        CPU_MD.write_text(render(json.loads(CPU_JSON.read_text())))
        return
    if "--scale" in sys.argv[1:]:
        scale()
        CPU_MD.write_text(render(json.loads(CPU_JSON.read_text())))
        return
    run()


if __name__ == "__main__":
    main()
