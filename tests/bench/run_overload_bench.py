#!/usr/bin/python3
"""make bench, sustained-overload part (issue 15): one boot, three systems.

HDD-model members (run_bench.MODELS["hdd"]: QEMU-throttled virtio disks),
md raid5 over 4 of them as the origin, a 64 MiB NVDIMM.  In one boot
(tests/bench/guest_overload.sh): bare md's IOPS for 4 KiB random writes
(QD16, no rate limit) is measured first; then 4 KiB random writes offered
at four times that (fio rate_iops, QD16) for 60 s over a 256 MiB working set
(4x the cache) on bare md, dm-pmemcache (default tunables, so full_wait is
the default) and dm-writecache (`p`, 4 KiB, defaults, on the same 64 MiB
NVDIMM in fsdax -M mem mode, as make bench's wc-mem), each from a fresh md
and a fresh cache that first gets 64 MiB of distinct random blocks of the
working set (unthrottled), so that its timed run starts full; the three
runs are repeated in a second round to show the noise.  Completion latency p50/p99/p99.9/max and IOPS from fio's JSON.

Writes docs/bench/overload.json, docs/bench/overload-<sys>-r<R>.json (raw
fio) and docs/bench/overload.md.

BENCH_QUICK=1: 20 s runs (10 s to measure bare md).  BENCH_OVERLOAD_S,
BENCH_OVERLOAD_RAW_S, BENCH_OVERLOAD_REPEATS, BENCH_OVERLOAD_QD,
BENCH_OVERLOAD_WS_MB, BENCH_OVERLOAD_PMEM_MB, BENCH_OVERLOAD_TIMEOUT (s) and
BENCH_OVERLOAD_X (the offered load as a multiple of bare md's IOPS, 4; at 2x
dm-pmemcache's stripe-aware writeback kept up and never waited) override.
--report: only regenerate overload.md from overload.json.
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
from vm import VM, KCACHE, KERNEL_REPORTS  # noqa: E402
from run_bench import MODELS, run_guest  # noqa: E402
from hostcpu import host_load  # noqa: E402

REPO = HERE.parent.parent
OUT = REPO / "docs/bench"
QUICK = os.environ.get("BENCH_QUICK") == "1"
OVER_S = int(os.environ.get("BENCH_OVERLOAD_S", "20" if QUICK else "60"))
RAW_S = int(os.environ.get("BENCH_OVERLOAD_RAW_S", "10" if QUICK else "20"))
REPEATS = int(os.environ.get("BENCH_OVERLOAD_REPEATS", "2"))
QD = int(os.environ.get("BENCH_OVERLOAD_QD", "16"))
WS_MB = int(os.environ.get("BENCH_OVERLOAD_WS_MB", "256"))
PMEM_MB = int(os.environ.get("BENCH_OVERLOAD_PMEM_MB", "64"))
RATE_X = int(os.environ.get("BENCH_OVERLOAD_X", "4"))
SYSTEMS = ["md", "pmc", "wc"]
NAMES = {"md": "bare md raid5", "pmc": "dm-pmemcache", "wc": "dm-writecache"}
HDD = MODELS["hdd"]


def default_full_wait_ms():
    m = re.search(r"#define\s+PMC_DEF_FULL_WAIT_MS\s+(\d+)",
                  (REPO / "dm-pmemcache/pmemcache.h").read_text())
    return int(m.group(1)) if m else None


def boot():
    state = Path(tempfile.mkdtemp(prefix="ovlbench.", dir=KCACHE))
    vm = VM("ovlbench", state)
    script = ("RAW_S=%d\nOVER_S=%d\nWS_MB=%d\nQD=%d\nREPEATS=%d\nSYSTEMS='%s'\nFILL_MB=%d\n"
              "RATE_X=%d\n" % (RAW_S, OVER_S, WS_MB, QD, REPEATS, " ".join(SYSTEMS), PMEM_MB,
                               RATE_X))
    script += (HERE / "guest_overload.sh").read_text()
    log = vm._log_path()
    budget = int(os.environ.get("BENCH_OVERLOAD_TIMEOUT", 0)) or \
        300 + REPEATS * len(SYSTEMS) * (OVER_S + 90) + RAW_S
    cmd = vm.command(script, timeout=budget, disks=4, disk_size=1024, pmem_size=PMEM_MB,
                     throttle=HDD, log=log)
    rc, output, console = run_guest(cmd, log, "overload: ")
    subprocess.run(["rm", "-rf", str(state)])
    if rc != 0:
        print("  overload: guest exited %d (log %s)" % (rc, log), flush=True)
    return rc, output, console


def parse(output):
    ovl, fio = {"sys": {}, "runs": {}}, {}
    for l in output.splitlines():
        if l.startswith("OVL "):
            kv = dict(re.findall(r"(\w+)=(\S+)", l))
            s, r = kv.pop("sys", None), kv.pop("r", None)
            if s and r:
                ovl["runs"].setdefault("%s-r%s" % (s, r), {}).update(kv)
            elif s:
                ovl["sys"].setdefault(s, {}).update(kv)
            else:
                ovl.update(kv)
        elif l.startswith("FIOJSON "):
            _, s, r, blob = l.split(" ", 3)
            try:
                fio["%s-r%s" % (s, r)] = json.loads(blob)
            except ValueError as e:
                print("  bad fio JSON (%s r%s): %s" % (s, r, e), flush=True)
    return ovl, fio


def one(j):
    job = j["jobs"][0]
    w = job["write"]
    pct = w["clat_ns"].get("percentile", {})
    return {"iops": w["iops"], "fio_writes": w["total_ios"], "error": job.get("error", 0),
            "p50_ms": pct.get("50.000000", 0) / 1e6, "p99_ms": pct.get("99.000000", 0) / 1e6,
            "p999_ms": pct.get("99.900000", 0) / 1e6, "max_ms": w["clat_ns"]["max"] / 1e6,
            "mean_ms": w["clat_ns"]["mean"] / 1e6}


FIGS = ("iops", "p50_ms", "p99_ms", "p999_ms", "max_ms")


def summarize(rc, output, console, t0, load0, date):
    ovl, fio = parse(output)
    res = {"settings": {"quick": QUICK, "over_s": OVER_S, "raw_s": RAW_S, "repeats": REPEATS,
                        "qd": QD, "ws_mb": WS_MB, "pmem_mb": PMEM_MB, "members": HDD,
                        "rate_x": RATE_X,
                        "full_wait_ms": default_full_wait_ms()},
           "boot": {"date": date, "rc": rc, "minutes": (time.time() - t0) / 60, "start": load0,
                    "end": host_load(), "done": ovl.get("done") == "1",
                    "report": next((l.strip() for l in console.splitlines()
                                    if KERNEL_REPORTS.search(l)), None)},
           "raw_iops": float(ovl.get("raw_iops", 0)) or None, "rate": int(ovl.get("rate", 0)) or None,
           "setup": ovl["sys"], "runs": {}, "systems": {}}
    for key, j in sorted(fio.items()):
        res["runs"][key] = dict(one(j), **ovl["runs"].get(key, {}))
        (OUT / ("overload-%s.json" % key)).write_text(json.dumps(
            {k: v for k, v in j.items() if k != "disk_util"}, indent=1))
    for s in SYSTEMS:
        runs = [v for k, v in sorted(res["runs"].items()) if k.startswith(s + "-r")]
        if not runs:
            continue
        m = {"n": len(runs)}
        for k in FIGS:
            vals = [r[k] for r in runs]
            m[k] = statistics.median(vals)
            m[k + "_spread"] = max(vals) / min(vals) if min(vals) > 0 else None
        m["max_ms_worst"] = max(r["max_ms"] for r in runs)
        res["systems"][s] = m
    S = res["systems"]
    d = {}

    def ratio(a, b, k):
        if a in S and b in S and S[b][k]:
            d["%s_%s_vs_%s" % (k, a, b)] = S[a][k] / S[b][k]
            per = []
            for r in range(1, REPEATS + 1):
                x, y = res["runs"].get("%s-r%d" % (a, r)), res["runs"].get("%s-r%d" % (b, r))
                if x and y and y[k]:
                    per.append(x[k] / y[k])
            d["%s_%s_vs_%s_rounds" % (k, a, b)] = per
    ratio("pmc", "wc", "p999_ms")
    ratio("pmc", "md", "p999_ms")
    ratio("pmc", "md", "iops")
    ratio("wc", "md", "p999_ms")
    ratio("wc", "md", "iops")
    ratio("pmc", "wc", "iops")
    if "pmc" in S and res["settings"]["full_wait_ms"] is not None:
        d["pmc_max_bound_ms"] = res["settings"]["full_wait_ms"] + 1000
        d["pmc_max_ms_worst"] = S["pmc"]["max_ms_worst"]
    res["derived"] = d
    return res


def f(x, nd=2, unit=""):
    if x is None:
        return "–"
    return ("{:,.%df}" % nd).format(x).replace(",", " ") + unit


def rounds(lst, nd=2):
    return ", ".join(f(x, nd, "x") for x in lst) if lst else "–"


def verdict(ok):
    return "" if ok is None else (" (met)" if ok else " (**not met**)")


STATES = ("dirty", "free", "under_wb", "health", "error")


def counter_text(r):
    """The cache's state after the fill, then what its counters did during the run."""
    skip = set(FIGS) | {"fio_writes", "error", "mean_ms", "fio_rc", "fill_s"}
    start = ["%s=%s" % (k[5:], v) for k, v in r.items() if k.startswith("fill_") and k != "fill_s"]
    run = []
    for k, v in r.items():
        if k in skip or k.startswith("fill_"):
            continue
        if k in STATES or not v.isdigit() or not r.get("fill_" + k, "").isdigit():
            run.append("%s=%s" % (k, v))
        else:
            run.append("%s=+%d" % (k, int(v) - int(r["fill_" + k])))
    text = ""
    if start:
        text = "after the %s s fill: %s; " % (r.get("fill_s", "?"), " ".join(start))
    return text + ("after the run: " if start else "") + " ".join(run)


def write_md(res):
    s, b, S, d = res["settings"], res["boot"], res["systems"], res["derived"]
    iops_pb, bps = s["members"].split(":")
    L = ["# Sustained overload: dm-pmemcache, dm-writecache and bare md (issue 15)", "",
         "Generated by `make bench` (`tests/bench/run_overload_bench.py`, guest side "
         "`tests/bench/guest_overload.sh`)%s, %s, one VM boot (QEMU TCG, 2 vCPUs), %.1f min; "
         "host load average %s at the start and %s at the end, %d other QEMU guest(s) running "
         "at the start and %d at the end%s. Raw fio JSON: `docs/bench/overload-*.json`; all "
         "figures: [overload.json](overload.json)." % (
             " with `BENCH_QUICK=1` (a quick run)" if s["quick"] else "", b["date"], b["minutes"],
             b["start"]["loadavg"], b["end"]["loadavg"], b["start"]["qemu_processes"],
             b["end"]["qemu_processes"],
             "" if b["rc"] == 0 and b["done"] and not b["report"] else
             "; **the boot ended badly**: rc %s%s" % (b["rc"], ", kernel report: " + b["report"]
                                                    if b["report"] else "")), "",
         ] + (["**A loaded machine:** other QEMU guests were running on the host's %d CPUs "
               "during this boot (counts above): the systems' CPU work competed with them, "
               "the members' throttling did not." % os.cpu_count(), ""]
              if b["start"]["qemu_processes"] or b["end"]["qemu_processes"] else []) + [
         "Origin: md raid5 over 4 HDD-model members (QEMU throttling per disk: %s IOPS, %s "
         "bytes/s), 64 KiB chunks. Cache: a %d MiB NVDIMM: dm-pmemcache on the raw namespace "
         "(%s blocks of 4 KiB after its metadata; default tunables, full_wait %s ms), "
         "dm-writecache `p` with 4 KiB blocks and default settings on the same NVDIMM in fsdax "
         "-M mem mode (%s blocks). Each run starts from a fresh md array (--assume-clean) and a "
         "fresh cache; before its timed run each cache gets %d MiB of distinct random 4 KiB blocks of the working set, unthrottled (another random sequence than the timed run's), so that it starts full; bare md gets no fill." % (
             iops_pb, bps, s["pmem_mb"], res["setup"].get("pmc", {}).get("blocks", "–"),
             s["full_wait_ms"], res["setup"].get("wc", {}).get("blocks", "–"), s["pmem_mb"]), "",
         "Load: bare md took **%s IOPS** of 4 KiB random writes (QD%d, no rate limit, %d s) in "
         "this boot; every system then got %dx that offered (`rate_iops=%s`, QD%d, O_DIRECT, "
         "libaio) for %d s over a %d MiB working set (%.1fx the NVDIMM). When a system cannot "
         "keep up, fio keeps %d writes queued: latencies are those of a closed loop at that "
         "depth. %d round(s), each running the three systems one after another." % (
             f(res["raw_iops"], 0), s["qd"], s["raw_s"], s.get("rate_x", 2), res["rate"], s["qd"],
             s["over_s"],
             s["ws_mb"], s["ws_mb"] / s["pmem_mb"], s["qd"], s["repeats"]), "",
         "| system | IOPS | p50 ms | p99 ms | p99.9 ms | max ms | spread IOPS / p99.9 / max |",
         "|---|---:|---:|---:|---:|---:|---|"]
    for k in SYSTEMS:
        if k in S:
            m = S[k]
            L.append("| %s | %s | %s | %s | %s | %s | %s / %s / %s |" % (
                NAMES[k], f(m["iops"], 0), f(m["p50_ms"], 2), f(m["p99_ms"], 1),
                f(m["p999_ms"], 1), f(m["max_ms"], 1), f(m["iops_spread"], 2, "x"),
                f(m["p999_ms_spread"], 2, "x"), f(m["max_ms_spread"], 2, "x")))
    L += ["", "Median of the rounds (with two rounds, their mean); *spread* is the higher / lower "
          "of the rounds. Each run (the caches' counters: the state after the fill that starts it "
          "full, then the state after the timed run, and what each counter added during it):", "",
          "| system | round | IOPS | p50 ms | p99 ms | p99.9 ms | max ms | writes | fio error | counters |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for key, r in sorted(res["runs"].items(), key=lambda kv: (kv[0].split("-r")[1], SYSTEMS.index(kv[0].split("-r")[0]))):
        sys_, rnd = key.split("-r")
        counters = counter_text(r)
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            NAMES[sys_], rnd, f(r["iops"], 0), f(r["p50_ms"], 2), f(r["p99_ms"], 1),
            f(r["p999_ms"], 1), f(r["max_ms"], 1), f(r["fio_writes"], 0),
            "%s (rc %s)" % (r["error"], r.get("fio_rc", "?")),
            counters))
    g = d.get
    L += ["", "## Against issue 15", "",
          "Ratios of the medians, then of each round on its own (the noise):", "",
          "| measure | goal | measured | per round |", "|---|---|---:|---|"]
    if g("p999_ms_pmc_vs_wc") is not None:
        L.append("| dm-pmemcache p99.9 / dm-writecache p99.9 | ≤ 1.0x | %s%s | %s |" % (
            f(g("p999_ms_pmc_vs_wc"), 2, "x"), verdict(g("p999_ms_pmc_vs_wc") <= 1.0),
            rounds(g("p999_ms_pmc_vs_wc_rounds"))))
    if g("p999_ms_pmc_vs_md") is not None:
        L.append("| dm-pmemcache p99.9 / bare md p99.9 | ≤ 2.0x | %s%s | %s |" % (
            f(g("p999_ms_pmc_vs_md"), 2, "x"), verdict(g("p999_ms_pmc_vs_md") <= 2.0),
            rounds(g("p999_ms_pmc_vs_md_rounds"))))
    if g("pmc_max_bound_ms") is not None:
        L.append("| dm-pmemcache max write latency (worst round) | ≤ full_wait + 1 s = %s ms | %s ms%s | %s |" % (
            f(g("pmc_max_bound_ms"), 0), f(g("pmc_max_ms_worst"), 0),
            verdict(g("pmc_max_ms_worst") <= g("pmc_max_bound_ms")),
            ", ".join(f(r["max_ms"], 0, " ms") for k, r in sorted(res["runs"].items())
                      if k.startswith("pmc-"))))
    if g("iops_pmc_vs_md") is not None:
        L.append("| dm-pmemcache IOPS / bare md IOPS | ≥ 0.9x | %s%s | %s |" % (
            f(g("iops_pmc_vs_md"), 2, "x"), verdict(g("iops_pmc_vs_md") >= 0.9),
            rounds(g("iops_pmc_vs_md_rounds"))))
    for k, name in (("iops_pmc_vs_wc", "dm-pmemcache IOPS / dm-writecache IOPS"),
                    ("p999_ms_wc_vs_md", "dm-writecache p99.9 / bare md p99.9"),
                    ("iops_wc_vs_md", "dm-writecache IOPS / bare md IOPS")):
        if g(k) is not None:
            L.append("| %s | (context) | %s | %s |" % (name, f(g(k), 2, "x"), rounds(g(k + "_rounds"))))
    waits = [int(r["full_waits"]) - int(r.get("fill_full_waits", 0))
             for k, r in res["runs"].items() if k.startswith("pmc-") and str(r.get("full_waits", "")).isdigit()]
    wb = [(int(r["wb_blocks"]) - int(r.get("fill_wb_blocks", 0))) / s["over_s"]
          for k, r in res["runs"].items() if k.startswith("pmc-") and str(r.get("wb_blocks", "")).isdigit()]
    if waits and not any(waits):
        L += ["", "**Read the dm-pmemcache figures with this:** in these runs it never waited for a "
              "free block (full_waits +0 in every round): its writeback (%s blocks per second, "
              "stripe-aware, against bare md's %s random-write IOPS) kept up with the offered "
              "load, so the cache stayed nearly full of dirty blocks but always had a free one. "
              "The full_wait path, and the bound on the max latency, were not exercised here; the "
              "full-cache run of [writeback.md](writeback.md) (a 32 MiB cache, a 1 GiB working "
              "set) is where writes wait for a free block and go around." % (
                  ", ".join("%.0f" % x for x in wb), f(res["raw_iops"], 0))]
    elif waits:
        L += ["", "dm-pmemcache waited for a free block %s time(s) in the timed runs (per round), "
              "writing back %s blocks per second." % (", ".join(map(str, waits)),
                                                      ", ".join("%.0f" % x for x in wb))]
    L += ["", "A ratio whose rounds straddle the goal is within the noise of this run. "
          "These are ratios within one boot under TCG on a shared 2-CPU host: the members' "
          "throttling is real time, the CPU work is emulated.", ""]
    (OUT / "overload.md").write_text("\n".join(L))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    if "--report" in sys.argv:
        write_md(json.loads((OUT / "overload.json").read_text()))
        return
    print("== overload bench: md raid5 over 4 HDD-model members, %d MiB pmem, %d s per run"
          % (PMEM_MB, OVER_S), flush=True)
    for old in OUT.glob("overload-*-r*.json"):
        old.unlink()
    load0, t0 = host_load(), time.time()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rc, output, console = boot()
    res = summarize(rc, output, console, t0, load0, date)
    (OUT / "overload.json").write_text(json.dumps(res, indent=1))
    write_md(res)
    S, d = res["systems"], res["derived"]
    print("bare md %s IOPS; " % f(res["raw_iops"], 0) +
          "; ".join("%s %s IOPS p99.9 %s ms max %s ms" % (k, f(m["iops"], 0), f(m["p999_ms"], 1),
                                                          f(m["max_ms"], 0)) for k, m in S.items()),
          flush=True)
    print("pmc/wc p99.9 %s, pmc/md p99.9 %s, pmc/md IOPS %s" % (
        f(d.get("p999_ms_pmc_vs_wc")), f(d.get("p999_ms_pmc_vs_md")), f(d.get("iops_pmc_vs_md"))),
        flush=True)


if __name__ == "__main__":
    main()
