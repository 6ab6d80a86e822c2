#!/usr/bin/python3
"""make bench-mirror: a mirrored cache against a single-device one (issue 31).

One boot with two NVDIMMs (/dev/pmem0 and /dev/pmem1, each its own NFIT
region), md raid1 over two unthrottled virtio disks as the origin
(tests/bench/guest_mirror.sh).  Both NVDIMMs are written once before
anything is timed (the first store to a page of the sparse share=on file
costs the host a fault).

Part 1, alternating rounds (single first in odd rounds, mirrored first in
even ones): each system formatted afresh on the same origin with writeback
off (high_watermark 100 low_watermark 100; the working set stays far
inside the cache, so the figures are the cache's own cost), MemFree, Slab,
VmallocUsed and Percpu before and after the create (page cache dropped),
a sequential prefill of the working set, then 4 KiB random writes at QD1
with an fsync after each (fio fsync=1: the write's clat and the fsync's
latency; a cycle is one of each) and at QD32 x 4 jobs, every write a
rewrite of a dirty cached block.

Part 2, resync rounds: pmem1 blanked (every byte), a single-device cache
on pmem0 filled with dirty blocks (all but 1 MiB, below the watermark),
its recovery load timed, then its first load with `mirror /dev/pmem1`,
which copies it to the blank half (the records at the resume, the data
online: kernel lines "mirror: copying the half on X to Y online" and
"mirror: copy done"); the copy's time is the kernel log from a line the
script writes before the create to "copy done", less the single-device
recovery load of the same cache.  Against it, dd copies the same number
of bytes pmem0 -> pmem1 with O_DIRECT (1 MiB blocks; 4 KiB blocks too),
before the resync in odd rounds and after it in even ones.

Writes docs/bench/mirror.json, docs/bench/mirror-<sys>-<job>-r<R>.json (raw
fio) and docs/bench/mirror.md, with the date and the commit.

Defaults: two 2 GiB NVDIMMs (their files on /dev/shm when it has room, see
state_parent()), a 256 MiB working set, four rounds of 20 s runs, three
resync rounds: about 10 minutes.  BENCH_QUICK=1: 256 MiB NVDIMMs, 64 MiB
working set, 5 s runs, the same rounds (about 4 minutes).  BENCH_MIRROR_RT (s per fio run), BENCH_MIRROR_REPEATS,
BENCH_MIRROR_RESYNC_REPEATS, BENCH_MIRROR_WS_MB, BENCH_MIRROR_PMEM_MB (each
NVDIMM), BENCH_MIRROR_DD4K (0: no 4 KiB dd), BENCH_MIRROR_TIMEOUT (s).
--report: only regenerate mirror.md from mirror.json.
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
from run_bench import commit, host_info, run_guest  # noqa: E402
from hostcpu import host_load, span  # noqa: E402

REPO = HERE.parent.parent
OUT = REPO / "docs/bench"
QUICK = os.environ.get("BENCH_QUICK") == "1"
RT = int(os.environ.get("BENCH_MIRROR_RT", "5" if QUICK else "20"))
REPEATS = int(os.environ.get("BENCH_MIRROR_REPEATS", "4"))
RESYNC_REPEATS = int(os.environ.get("BENCH_MIRROR_RESYNC_REPEATS", "3"))
WS_MB = int(os.environ.get("BENCH_MIRROR_WS_MB", "64" if QUICK else "256"))
PMEM_MB = int(os.environ.get("BENCH_MIRROR_PMEM_MB", "256" if QUICK else "2048"))
DD4K = int(os.environ.get("BENCH_MIRROR_DD4K", "1"))
MEMORY_MB = 2048
SYSTEMS = ["single", "mirror"]
NAMES = {"single": "single-device", "mirror": "mirrored (`mirror /dev/pmem1`)"}
JOBS = ["qd1_fsync", "qd32_4jobs"]
# issue 31, "Must show"
GOALS = {"qd1_p50": 1.3, "qd32_iops": 0.7, "ram_b_per_block": 16.0, "resync": 0.8}


def state_parent():
    """/dev/shm when it has room for both NVDIMMs (and 1 GiB more): a
    share=on file on a disk file system gets its dirty pages written back
    by the host, and a guest store to a page under writeback waits for a
    write fault, which lands on whichever system runs; tmpfs never writes
    back.  BENCH_MIRROR_STATE_DIR overrides, else $KCACHE."""
    want = os.environ.get("BENCH_MIRROR_STATE_DIR")
    if want:
        return Path(want)
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= (2 * PMEM_MB + 1024) << 20:
            return Path("/dev/shm")
    except OSError:
        pass
    return KCACHE


def fs_type(path):
    """The file system type of PATH (from /proc/mounts: longest mount point)."""
    best, kind = "", "?"
    for l in Path("/proc/mounts").read_text().splitlines():
        dev, mnt, typ = l.split()[:3]
        if str(path).startswith(mnt) and len(mnt) > len(best):
            best, kind = mnt, typ
    return kind


def boot(marks):
    parent = state_parent()
    state = Path(tempfile.mkdtemp(prefix="mirrorbench.", dir=parent))
    vm = VM("mirrorbench", state)
    script = "RT=%d\nWS_MB=%d\nREPEATS=%d\nRESYNC_REPEATS=%d\nDD4K=%d\n" % (
        RT, WS_MB, REPEATS, RESYNC_REPEATS, DD4K)
    script += (HERE / "guest_mirror.sh").read_text()
    log = vm._log_path()
    budget = int(os.environ.get("BENCH_MIRROR_TIMEOUT", 0)) or \
        600 + REPEATS * 2 * (2 * RT + 60) + RESYNC_REPEATS * PMEM_MB // 4
    cmd = vm.command(script, timeout=budget, disks=2, disk_size=PMEM_MB + 512,
                     pmem_size=PMEM_MB, pmem2_size=PMEM_MB, memory=MEMORY_MB, log=log)
    try:
        rc, output, console = run_guest(cmd, log, "mirror: ", marks)
    finally:
        subprocess.run(["rm", "-rf", str(state)])
    if rc != 0:
        print("  mirror: guest exited %d (log %s)" % (rc, log), flush=True)
    return rc, output, console, "%s (%s)" % (parent, fs_type(parent))


def parse(output):
    """guest: {key: value} of the boot; setup: {SYS-rR: {..}} (create,
    counters of each fio run as JOB_key); resync: {R: {..}}; mem: {at:
    {field: kB}}; fio: {SYS-JOB-rR: fio JSON}; log: the kernel's copy lines."""
    guest, setup, resync, mem, fio, log = {}, {}, {}, {}, {}, []
    for l in output.splitlines():
        if l.startswith("MB "):
            kv = dict(re.findall(r"(\w+)=(\S*)", l))
            s, r, job = kv.pop("sys", None), kv.pop("r", None), kv.pop("job", None)
            if s == "resync":
                resync.setdefault(r, {}).update(kv)
            elif s:
                d = setup.setdefault("%s-r%s" % (s, r), {})
                d.update({("%s_%s" % (job, k) if job else k): v for k, v in kv.items()})
            else:
                guest.update(kv)
        elif l.startswith("MB_LOG "):
            log.append(l[7:].strip())
        elif l.startswith("MEM "):
            kv = dict(re.findall(r"(\w+)=(\S+)", l))
            at = l.split()[1][3:]
            kv.pop("at", None)
            mem[at] = {k: int(v) for k, v in kv.items()}
        elif l.startswith("FIOJSON "):
            _, s, job, r, blob = l.split(" ", 4)
            try:
                fio["%s-%s-r%s" % (s, job, r)] = json.loads(blob)
            except ValueError as e:
                print("  bad fio JSON (%s %s r%s): %s" % (s, job, r, e), flush=True)
    return guest, setup, resync, mem, fio, log


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def pct(side, key, p):
    return (side.get(key, {}).get("percentile") or {}).get(p)


def fio_figures(j):
    """The figures of one fio run (µs): write clat percentiles; for
    fsync=1 also the fsync latency and the cycle (one write and one fsync:
    the sum of the two percentiles, an estimate, and the mean from IOPS)."""
    job = j["jobs"][0]
    w, s = job["write"], job.get("sync") or {}
    us = lambda v: v / 1e3 if v is not None else None  # noqa: E731
    f = {"iops": w["iops"], "writes": w["total_ios"], "error": job.get("error", 0),
         "p50_us": us(pct(w, "clat_ns", "50.000000")), "p99_us": us(pct(w, "clat_ns", "99.000000")),
         "p999_us": us(pct(w, "clat_ns", "99.900000")), "mean_us": us(w["clat_ns"]["mean"])}
    if s.get("total_ios"):
        f["fsyncs"] = s["total_ios"]
        f["sync_p50_us"] = us(pct(s, "lat_ns", "50.000000"))
        f["sync_p99_us"] = us(pct(s, "lat_ns", "99.000000"))
        f["sync_mean_us"] = us(s["lat_ns"]["mean"])
        if f["p50_us"] is not None and f["sync_p50_us"] is not None:
            f["cycle_p50_us"] = f["p50_us"] + f["sync_p50_us"]
        if f["p99_us"] is not None and f["sync_p99_us"] is not None:
            f["cycle_p99_us"] = f["p99_us"] + f["sync_p99_us"]
        if w["iops"]:
            f["cycle_mean_us"] = 1e6 / w["iops"]
    return f


FIGS = {"qd1_fsync": ("iops", "p50_us", "p99_us", "p999_us", "sync_p50_us", "sync_p99_us",
                      "cycle_p50_us", "cycle_p99_us", "cycle_mean_us", "host_cpu_us_per_write"),
        "qd32_4jobs": ("iops", "p50_us", "p99_us", "p999_us", "host_cpu_us_per_write")}


def spread(vals):
    vals = [v for v in vals if v is not None]
    return max(vals) / min(vals) if vals and min(vals) > 0 else None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def mem_delta(mem, before, after):
    """What the create took: MemFree's drop, the others' growth (kB)."""
    if before not in mem or after not in mem:
        return None
    b, a = mem[before], mem[after]
    return {k: (b[k] - a[k] if k == "MemFree" else a[k] - b[k]) for k in b if k in a}


def summarize(rc, output, console, t0, load0, date, marks=None, state="?", head=None):
    guest, setup, resync, mem, fio, log = parse(output)
    res = {"settings": {"quick": QUICK, "rt": RT, "repeats": REPEATS,
                        "resync_repeats": RESYNC_REPEATS, "ws_mb": WS_MB, "pmem_mb": PMEM_MB,
                        "memory_mib": MEMORY_MB, "disk_mb": PMEM_MB + 512, "dd4k": DD4K,
                        "state": state},
           "boot": {"date": date, "commit": head or commit(), "host": host_info(), "rc": rc,
                    "minutes": (time.time() - t0) / 60, "start": load0, "end": host_load(),
                    "done": guest.get("done") == "1",
                    "report": next((l.strip() for l in console.splitlines()
                                    if KERNEL_REPORTS.search(l)), None)},
           "guest": guest, "copy_lines": log}
    runs = {}
    for key, j in sorted(fio.items()):
        s, job, r = key.rsplit("-", 2)
        f = fio_figures(j)
        st = setup.get("%s-%s" % (s, r), {})
        f.update({k[len(job) + 1:]: v for k, v in st.items() if k.startswith(job + "_")})
        cpu, wall = span(marks or {}, "run0-" + key, "run1-" + key)
        if cpu is not None and wall:
            f["qemu_cpu_s"], f["qemu_wall_s"] = cpu, wall
            f["qemu_cpu_per_s"] = cpu / wall
            if f["writes"]:
                f["host_cpu_us_per_write"] = cpu * 1e6 / f["writes"]
        runs[key] = f
        (OUT / ("mirror-%s.json" % key)).write_text(json.dumps(
            {k: v for k, v in j.items() if k != "disk_util"}, indent=1))
    res["runs"] = runs
    # the creates and what they took in DRAM
    creates = {}
    for key, st in sorted(setup.items()):
        s, r = key.rsplit("-r", 1)
        c = {"create_s": num(st.get("create_s")), "blocks": num(st.get("blocks")),
             "ram_bytes_per_block": num(st.get("ram_bytes_per_block")),
             "health": st.get("health"), "table": (st.get("table") or "").replace(",", " ")}
        d = mem_delta(mem, "before_%s-%s" % (s, r), "after_%s-%s" % (s, r))
        dp = mem_delta(mem, "before_%s-%s" % (s, r), "prefilled_%s-%s" % (s, r))
        if d and c["blocks"]:
            c["mem_delta_kb"] = d
            c["memfree_b_per_block"] = d["MemFree"] * 1024 / c["blocks"]
            c["accounted_b_per_block"] = sum(d.get(k, 0) for k in ("Slab", "VmallocUsed", "Percpu")) \
                * 1024 / c["blocks"]
        if dp and c["blocks"]:
            c["memfree_prefilled_b_per_block"] = dp["MemFree"] * 1024 / c["blocks"]
        creates[key] = c
    res["creates"] = creates
    res["systems"] = systems(runs, creates)
    res["resync"] = resync_rounds(resync, num(guest.get("pmem1_bytes")), marks or {})
    res["derived"] = derive(res)
    return res


def systems(runs, creates):
    """Per system: per job the median of the rounds and the spread (highest
    / lowest); the DRAM figures likewise."""
    out = {}
    for s in SYSTEMS:
        m = {}
        for job in JOBS:
            rs = [v for k, v in sorted(runs.items()) if k.startswith("%s-%s-r" % (s, job))]
            if not rs:
                continue
            jm = {"n": len(rs)}
            for k in FIGS[job]:
                vals = [r.get(k) for r in rs]
                jm[k] = med(vals)
                jm[k + "_spread"] = spread(vals)
            m[job] = jm
        cs = [c for k, c in sorted(creates.items()) if k.startswith(s + "-r")]
        for k in ("memfree_b_per_block", "accounted_b_per_block", "memfree_prefilled_b_per_block",
                  "create_s", "blocks", "ram_bytes_per_block"):
            vals = [c.get(k) for c in cs if c.get(k) is not None]
            m[k] = med(vals)
            if vals:
                m[k + "_min"], m[k + "_max"] = min(vals), max(vals)
        if m:
            out[s] = m
    return out


def resync_rounds(resync, pmem1_bytes=None, marks=None):
    """Per round: the copy's time (the first mirrored load less the
    single-device recovery load of the same cache) and speed, the raw
    copy's, and their ratio; and the speed of blanking all of pmem1."""
    out = {}
    for r, v in sorted(resync.items(), key=lambda kv: int(kv[0])):
        x = {k: num(v.get(k)) for k in ("blocks", "live", "copy_bytes", "fill_mb", "fill_s",
                                        "blank_s", "single_load_s", "mirror_first_s",
                                        "mirror_again_s", "raw_s", "raw4k_s", "copy_t",
                                        "loaded_t", "single_load_dirty", "mirror_dirty",
                                        "mirror_again_dirty")}
        x["mirror_health"] = v.get("mirror_health")
        x["wb_blocks_filled"] = num(v.get("wb_blocks_filled"))
        b = x["copy_bytes"]
        if x["copy_t"] is not None and x["loaded_t"] is not None:
            x["log_s"] = x["loaded_t"] - x["copy_t"]
        if x.get("log_s") is not None and x["single_load_s"] is not None:
            x["copy_s"] = x["log_s"] - x["single_load_s"]
        for k in ("copy_s", "log_s", "mirror_first_s", "raw_s", "raw4k_s"):
            if b and x.get(k):
                x[k.replace("_s", "") + "_mb_s"] = b / 1048576 / x[k]
        # the same in QEMU CPU seconds (host side): robust to a host that
        # starves the guest, as the copy and dd are CPU work under TCG
        m = marks or {}
        load, _ = span(m, "load0-r" + r, "load1-r" + r)
        cpu, _ = span(m, "resync0-r" + r, "resync1-r" + r)
        raw, _ = span(m, "raw0-r" + r, "raw1-r" + r)
        if cpu is not None and load is not None:
            x["copy_cpu_s"] = cpu - load
        x["raw_cpu_s"] = raw
        if raw and x.get("copy_cpu_s"):
            x["ratio_cpu"] = raw / x["copy_cpu_s"]
        if pmem1_bytes and x.get("blank_s"):
            x["blank_mb_s"] = pmem1_bytes / 1048576 / x["blank_s"]
        if x.get("raw_s") and x.get("copy_s"):
            x["ratio"] = x["raw_s"] / x["copy_s"]
        if x.get("raw_s") and x.get("log_s"):
            x["ratio_log"] = x["raw_s"] / x["log_s"]
        if x.get("raw_s") and x.get("mirror_first_s"):
            x["ratio_create"] = x["raw_s"] / x["mirror_first_s"]
        out[r] = x
    return out


def derive(res):
    S, runs, creates, rs = res["systems"], res["runs"], res["creates"], res["resync"]
    d = {}

    def ratio(name, job, k):
        a, b = S.get("mirror", {}).get(job, {}), S.get("single", {}).get(job, {})
        if a.get(k) is not None and b.get(k):
            d[name] = a[k] / b[k]
        per = []
        for r in range(1, res["settings"]["repeats"] + 1):
            x = runs.get("mirror-%s-r%d" % (job, r), {}).get(k)
            y = runs.get("single-%s-r%d" % (job, r), {}).get(k)
            if x is not None and y:
                per.append(x / y)
        d[name + "_rounds"] = per
    ratio("qd1_cycle_p50", "qd1_fsync", "cycle_p50_us")
    ratio("qd1_cycle_p99", "qd1_fsync", "cycle_p99_us")
    ratio("qd1_write_p50", "qd1_fsync", "p50_us")
    ratio("qd1_write_p99", "qd1_fsync", "p99_us")
    ratio("qd1_sync_p50", "qd1_fsync", "sync_p50_us")
    ratio("qd1_cycle_mean", "qd1_fsync", "cycle_mean_us")
    ratio("qd32_iops", "qd32_4jobs", "iops")
    ratio("qd1_cpu_per_write", "qd1_fsync", "host_cpu_us_per_write")
    ratio("qd1_qemu_cpu_per_s", "qd1_fsync", "qemu_cpu_per_s")
    ratio("qd32_qemu_cpu_per_s", "qd32_4jobs", "qemu_cpu_per_s")
    ratio("qd32_cpu_per_write", "qd32_4jobs", "host_cpu_us_per_write")
    ratio("qd32_p99", "qd32_4jobs", "p99_us")
    # DRAM: mirrored less single, per block, per round and of the medians
    ms, ss = S.get("mirror", {}), S.get("single", {})
    for k in ("memfree_b_per_block", "accounted_b_per_block"):
        if ms.get(k) is not None and ss.get(k) is not None:
            d["ram_" + k + "_diff"] = ms[k] - ss[k]
            per = []
            for r in range(1, res["settings"]["repeats"] + 1):
                x = creates.get("mirror-r%d" % r, {}).get(k)
                y = creates.get("single-r%d" % r, {}).get(k)
                if x is not None and y is not None:
                    per.append(x - y)
            d["ram_" + k + "_diff_rounds"] = per
            # the noise: how far one system's rounds are apart
            d["ram_" + k + "_noise"] = max(ms[k + "_max"] - ms[k + "_min"],
                                           ss[k + "_max"] - ss[k + "_min"])
    rounds = list(rs.values())
    for k in ("ratio", "ratio_log", "ratio_create", "ratio_cpu", "copy_cpu_s", "raw_cpu_s",
              "copy_mb_s", "raw_mb_s", "raw4k_mb_s",
              "log_mb_s", "copy_s", "raw_s", "single_load_s", "mirror_first_s",
              "mirror_again_s", "blank_mb_s"):
        vals = [x.get(k) for x in rounds]
        if any(v is not None for v in vals):
            d["resync_" + k] = med(vals)
            d["resync_" + k + "_rounds"] = vals
            d["resync_" + k + "_spread"] = spread(vals)
    return d


def f(x, nd=2, unit=""):
    if x is None:
        return "–"
    return ("{:,.%df}" % nd).format(x).replace(",", " ") + unit


def rounds_text(lst, nd=2, unit="x"):
    return ", ".join(f(x, nd, unit) for x in lst) if lst else "–"


def verdict(ok):
    return "" if ok is None else (" (met)" if ok else " (**not met**)")


def crc_row():
    """The data_crc row of the goals table, from make bench-cpu's kept run."""
    import run_cpu_bench
    cpu = run_cpu_bench.CPU_JSON
    r = json.loads(cpu.read_text()) if cpu.exists() else {}
    cost = run_cpu_bench.crc_cost(r) if r.get("results") else {}
    if not cost:
        return "| cost of `data_crc` | (stated, no goal) | not measured: run `make bench-cpu` | – |"
    s = r["settings"]
    return ("| cost of `data_crc`, guest instructions per op (`make bench-cpu`, %s, commit %s) "
            "| (stated, no goal) | %s | spread of the repeats ≤ %.2f %% |" % (
                s["date"], s["commit"][:12],
                ", ".join("%s %+d (%d → %d)" % (run_cpu_bench.OP_NAMES[op], round(d), round(a),
                                                 round(b))
                          for op, (a, b, d, sp) in cost.items() if op in ("new", "read")),
                max(sp for a, b, d, sp in cost.values())))


def straddles(vals, goal):
    vals = [v for v in vals or [] if v is not None]
    return len(vals) > 1 and min(vals) <= goal <= max(vals)


def write_md(res):
    s, b, S, d, R = res["settings"], res["boot"], res["systems"], res["derived"], res["resync"]
    g = res["guest"]
    bad = not (b["rc"] == 0 and b["done"] and not b["report"])
    L = ["# Mirrored cache against single-device (issue 31)", "",
         "Generated by `make bench-mirror` (`tests/bench/run_mirror_bench.py`, guest side "
         "`tests/bench/guest_mirror.sh`)%s, %s, commit %s, one VM boot of %.1f min; host load "
         "average %s at the start and %s at the end, %d other QEMU guest(s) running at the "
         "start and %d at the end%s. Raw fio JSON: `docs/bench/mirror-*-r*.json`; all figures: "
         "[mirror.json](mirror.json). Regenerate this page from it: "
         "`/usr/bin/python3 tests/bench/run_mirror_bench.py --report`." % (
             " with `BENCH_QUICK=1` (a quick run)" if s["quick"] else "", b["date"],
             b["commit"] or "?", b["minutes"], b["start"]["loadavg"], b["end"]["loadavg"],
             b["start"]["qemu_processes"], b["end"]["qemu_processes"],
             "; **the boot ended badly**: rc %s%s%s" % (
                 b["rc"], "" if b["done"] else ", the guest script did not finish",
                 ", kernel report: " + b["report"] if b["report"] else "") if bad else ""), ""]
    L += ["**Read the figures as ratios within this boot.** The guest runs under QEMU TCG on "
          "a %s-CPU host (%s): the CPU is emulated, and so is pmem: an NVDIMM here is a "
          "file-backed memory range, and every store to it is an emulated memcpy. A real "
          "NVDIMM's stores are slower than DRAM's and its write bandwidth is limited, which this "
          "machine does not show: the ratios are what the emulated machine shows, the absolute "
          "figures are not those of any real hardware. The noise is stated with each figure: "
          "the spread of the repeats (highest / lowest) and each round's own ratio." % (
              b["host"]["nproc"], b["host"]["cpu"]), ""]
    if b["start"]["qemu_processes"] or b["end"]["qemu_processes"]:
        L += ["**A loaded machine:** other QEMU guests were running on the host during this "
              "boot (counts above): the two systems alternated round by round, so both met "
              "the same load on average, but the spread of the repeats is wider than on an "
              "idle host. The QEMU process's CPU seconds per second of each run (the table of "
              "each run below; about 2 when both vCPUs had a host CPU all along) show which "
              "runs the host starved.", ""]
    L += ["Setup: two NVDIMMs of %d MiB (`/dev/pmem0` on %s, `/dev/pmem1` on %s: two NFIT "
          "regions), raw namespaces; the origin is md raid1 over two unthrottled virtio disks of "
          "%d MiB (a fast origin: nothing is written back during the timed runs anyway). Both "
          "caches: 4 KiB blocks, `high_watermark 100 low_watermark 100` (writeback off while "
          "the cache is below 100%% dirty). Single-device: `/dev/pmem0`; mirrored: `/dev/pmem0` "
          "with `mirror /dev/pmem1`. Every page of both NVDIMM files was written once before "
          "anything was timed (a first store to a page of the sparse file costs the host a "
          "page fault). The NVDIMM and disk files were in %s (on tmpfs, the host never "
          "writes the NVDIMM files back, so no guest store waits for a host write fault). "
          "Guest: 2 vCPUs, %d MiB RAM." % (
              s["pmem_mb"], g.get("region0", "?"), g.get("region1", "?"), s["disk_mb"],
              s.get("state", "?"), s["memory_mib"]), ""]

    # ---- the headline ----
    L += ["## Against issue 31", "",
          "Mirrored / single: the ratio of the medians of the rounds, then each round's own "
          "ratio (the noise).", "",
          "| measure | goal | measured | per round |", "|---|---|---:|---|"]
    G = GOALS
    if d.get("qd1_cycle_p50") is not None:
        L.append("| QD1 4 KiB random write + fsync, p50 of the cycle (write clat p50 + fsync "
                 "p50) | ≤ %.1fx | %s%s | %s |" % (
                     G["qd1_p50"], f(d["qd1_cycle_p50"], 2, "x"),
                     verdict(d["qd1_cycle_p50"] <= G["qd1_p50"]),
                     rounds_text(d["qd1_cycle_p50_rounds"])))
    if d.get("qd32_iops") is not None:
        L.append("| QD32 x 4 jobs 4 KiB random write IOPS | ≥ %.1fx | %s%s | %s |" % (
            G["qd32_iops"], f(d["qd32_iops"], 2, "x"), verdict(d["qd32_iops"] >= G["qd32_iops"]),
            rounds_text(d["qd32_iops_rounds"])))
    ms, ss = S.get("mirror", {}), S.get("single", {})
    if ms.get("memfree_b_per_block") is not None:
        worst = max(ms["memfree_b_per_block"], ms.get("accounted_b_per_block") or 0)
        L.append("| DRAM per cached block, mirrored: the MemFree drop at create / blocks; the "
                 "accounted allocators' growth (Slab + VmallocUsed + Percpu) / blocks | "
                 "unchanged, ≤ %d B | %s B MemFree, %s B accounted (single: %s B, %s B; mirrored "
                 "less single: %s B, %s B)%s | mirrored less single, MemFree %s; accounted %s |" % (
                     G["ram_b_per_block"], f(ms["memfree_b_per_block"], 1),
                     f(ms.get("accounted_b_per_block"), 1), f(ss.get("memfree_b_per_block"), 1),
                     f(ss.get("accounted_b_per_block"), 1),
                     f(d.get("ram_memfree_b_per_block_diff"), 1),
                     f(d.get("ram_accounted_b_per_block_diff"), 1),
                     verdict(worst <= G["ram_b_per_block"]),
                     rounds_text(d.get("ram_memfree_b_per_block_diff_rounds"), 1, " B"),
                     rounds_text(d.get("ram_accounted_b_per_block_diff_rounds"), 1, " B")))
    if d.get("resync_ratio") is not None:
        L.append("| resync speed / raw copy (dd, 1 MiB blocks, O_DIRECT) of the same bytes | "
                 "≥ %.1fx | %s%s | %s |" % (
                     G["resync"], f(d["resync_ratio"], 2, "x"),
                     verdict(d["resync_ratio"] >= G["resync"]),
                     rounds_text(d["resync_ratio_rounds"])))
    L.append(crc_row())
    near = [name for name, k, goal in (("the QD1 p50", "qd1_cycle_p50", G["qd1_p50"]),
                                       ("the QD32 IOPS", "qd32_iops", G["qd32_iops"]),
                                       ("the resync", "resync_ratio", G["resync"]))
            if straddles(d.get(k + "_rounds"), goal)]
    if d.get("qd1_cpu_per_write") is not None or d.get("resync_ratio_cpu") is not None:
        L += ["", "The same in host CPU, which a host that starves the guest does not move "
              "(under TCG a write, and a copy, is emulated CPU work: the QEMU process's "
              "utime+stime over a run, read on the host, divided by the writes): host CPU per "
              "write, mirrored / single, QD1+fsync **%s** (rounds %s), QD32 x 4 **%s** (rounds "
              "%s); resync / raw copy in QEMU CPU seconds for the same bytes **%s** (rounds %s)."
              % (f(d.get("qd1_cpu_per_write"), 2, "x"),
                 rounds_text(d.get("qd1_cpu_per_write_rounds")),
                 f(d.get("qd32_cpu_per_write"), 2, "x"),
                 rounds_text(d.get("qd32_cpu_per_write_rounds")),
                 f(d.get("resync_ratio_cpu"), 2, "x"),
                 rounds_text(d.get("resync_ratio_cpu_rounds")))]
    if near:
        L += ["", "The rounds of %s straddle the goal: that verdict is within the noise of "
              "this run." % " and ".join(near)]
    L += ["", "The cost of `data_crc` (a crc32c of each block's data in its record, issue 31 "
          "step 3) is CPU work, the same on one device and on a mirror (a write takes the "
          "crcs once, whatever the halves; a read checks the half it reads): it is measured "
          "in guest instructions, side by side in one boot of `make bench-cpu` "
          "(dm-pmemcache formatted without and with `data_crc`; the table in "
          "[cpu.md](cpu.md), \"The cost of `data_crc`\"), deterministic, rather than in this "
          "boot's wall clock (its repeats spread as stated above)."]

    # ---- QD1 ----
    L += ["", "## QD1 4 KiB random write + fsync", "",
          "fio `psync`, O_DIRECT, `fsync=1` (an fsync after each write: a REQ_PREFLUSH bio, "
          "which the cache answers at pmem speed), %d s per run, over a %d MiB working set "
          "written once sequentially before, so every timed write rewrites a dirty cached "
          "block. fio reports the write's completion latency and the fsync's latency apart; "
          "the *cycle* p50 and p99 are the sums of the two percentiles (an estimate: fio does "
          "not give a percentile of the sum), the mean cycle is 1 / IOPS. Median of the "
          "rounds; *spread* is the highest / lowest of the rounds." % (s["rt"], s["ws_mb"]), "",
          "| system | IOPS | write p50 µs | write p99 µs | fsync p50 µs | fsync p99 µs | "
          "cycle p50 µs | cycle p99 µs | mean cycle µs | host CPU µs/write | spread IOPS / "
          "cycle p50 / cycle p99 / host CPU |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for k in SYSTEMS:
        m = S.get(k, {}).get("qd1_fsync")
        if m:
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s |" % (
                NAMES[k], f(m["iops"], 0), f(m["p50_us"], 1), f(m["p99_us"], 1),
                f(m["sync_p50_us"], 1), f(m["sync_p99_us"], 1), f(m["cycle_p50_us"], 1),
                f(m["cycle_p99_us"], 1), f(m["cycle_mean_us"], 1),
                f(m.get("host_cpu_us_per_write"), 1), f(m["iops_spread"], 2, "x"),
                f(m["cycle_p50_us_spread"], 2, "x"), f(m["cycle_p99_us_spread"], 2, "x"),
                f(m.get("host_cpu_us_per_write_spread"), 2, "x")))
    L += ["", "Mirrored / single: cycle p50 %s (rounds %s), cycle p99 %s (rounds %s), write "
          "clat p50 %s, write clat p99 %s, fsync p50 %s, mean cycle %s (rounds %s)." % (
              f(d.get("qd1_cycle_p50"), 2, "x"), rounds_text(d.get("qd1_cycle_p50_rounds")),
              f(d.get("qd1_cycle_p99"), 2, "x"), rounds_text(d.get("qd1_cycle_p99_rounds")),
              f(d.get("qd1_write_p50"), 2, "x"), f(d.get("qd1_write_p99"), 2, "x"),
              f(d.get("qd1_sync_p50"), 2, "x"), f(d.get("qd1_cycle_mean"), 2, "x"),
              rounds_text(d.get("qd1_cycle_mean_rounds")))]

    # ---- QD32 ----
    L += ["", "## QD32 x 4 jobs 4 KiB random write", "",
          "fio `libaio`, O_DIRECT, iodepth 32, 4 jobs over the same %d MiB working set "
          "(rewrites of dirty cached blocks), %d s per run, no fsync." % (s["ws_mb"], s["rt"]), "",
          "| system | IOPS | clat p50 µs | clat p99 µs | clat p99.9 µs | host CPU µs/write | "
          "spread IOPS / p99 / host CPU |",
          "|---|---:|---:|---:|---:|---:|---|"]
    for k in SYSTEMS:
        m = S.get(k, {}).get("qd32_4jobs")
        if m:
            L.append("| %s | %s | %s | %s | %s | %s | %s / %s / %s |" % (
                NAMES[k], f(m["iops"], 0), f(m["p50_us"], 1), f(m["p99_us"], 1),
                f(m["p999_us"], 1), f(m.get("host_cpu_us_per_write"), 1),
                f(m["iops_spread"], 2, "x"), f(m["p99_us_spread"], 2, "x"),
                f(m.get("host_cpu_us_per_write_spread"), 2, "x")))
    L += ["", "Mirrored / single: IOPS %s (rounds %s), clat p99 %s (rounds %s)." % (
        f(d.get("qd32_iops"), 2, "x"), rounds_text(d.get("qd32_iops_rounds")),
        f(d.get("qd32_p99"), 2, "x"), rounds_text(d.get("qd32_p99_rounds")))]
    starved = []
    for job in JOBS:
        per = d.get("qd%s_qemu_cpu_per_s_rounds" % ("1" if job == "qd1_fsync" else "32"))
        if per:
            starved.append("%s %s (the mirrored run got less in %d of %d rounds)" % (
                job, rounds_text(per), sum(1 for v in per if v < 1), len(per)))
    if starved:
        L += ["", "The host CPU each run got (QEMU CPU s per s), mirrored / single, round by "
              "round: %s. Where the mirrored run got less, its wall-clock figures carry whatever "
              "kept QEMU off the host's CPUs (the other guests and builds on this host) as "
              "well as the cache's cost; the host CPU per write (under *Against issue 31*) "
              "does not." % "; ".join(starved)]

    # ---- each run ----
    L += ["", "Each run, in the order of the boot (round by round; single first in odd rounds, "
          "mirrored first in even ones). *guest CPU* is the busy share of both vCPUs "
          "(/proc/stat) over the run; *QEMU CPU s per s* is the QEMU process's utime+stime "
          "over the run divided by its wall time, read on the host (about 2 when both vCPUs "
          "ran all along; lower when the host starved the guest); the counters are the "
          "cache's status during the run "
          "(writeback must be 0: the figure is the cache's own cost).", "",
          "| round | system | job | IOPS | p50 µs | p99 µs | cycle p50 µs | guest CPU | "
          "QEMU CPU s per s | write hits | new | around | flushes | written back | health |",
          "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]

    def delta(r, k):
        a, b0 = num(r.get(k)), num(r.get(k + "_before"))
        return a - b0 if a is not None and b0 is not None else None

    for r in range(1, s["repeats"] + 1):
        order = SYSTEMS if r % 2 else SYSTEMS[::-1]
        for k in order:
            for job in JOBS:
                x = res["runs"].get("%s-%s-r%d" % (k, job, r))
                if not x:
                    continue
                busy, tot = num(x.get("busy_ticks")), num(x.get("total_ticks"))
                L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    r, k, job, f(x["iops"], 0), f(x["p50_us"], 1), f(x["p99_us"], 1),
                    f(x.get("cycle_p50_us"), 1),
                    f(100.0 * busy / tot if busy is not None and tot else None, 0, " %"),
                    f(x.get("qemu_cpu_per_s"), 2),
                    f(delta(x, "write_hits"), 0), f(delta(x, "write_new"), 0),
                    f(delta(x, "write_around"), 0), f(delta(x, "flushes"), 0),
                    f(delta(x, "wb_blocks"), 0), x.get("health", "–")))

    # ---- DRAM ----
    L += ["", "## DRAM per cached block", "",
          "From /proc/meminfo in the guest, after `sync` and dropping the page cache, just "
          "before and just after the `dmsetup create ... format` of each round: the MemFree "
          "drop is everything the table load allocated (slab, vmalloc, per-cpu, page tables and "
          "pages straight from the page allocator, the fixed cost of a table too, so the per-block "
          "figure is an upper bound); *accounted* is Slab + VmallocUsed + Percpu. *after "
          "prefill* is the MemFree drop from before the create to after the %d MiB prefill. "
          "*self-reported* is the module's status field ram_bytes_per_block." % s["ws_mb"], "",
          "| round | system | blocks | MemFree drop, KiB | Slab | VmallocUsed | Percpu | "
          "PageTables | B per block (MemFree) | B per block (accounted) | after prefill, B per "
          "block | self-reported | create s |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in range(1, s["repeats"] + 1):
        for k in (SYSTEMS if r % 2 else SYSTEMS[::-1]):
            c = res["creates"].get("%s-r%d" % (k, r))
            if not c:
                continue
            md = c.get("mem_delta_kb") or {}
            L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r, k, f(c.get("blocks"), 0), f(md.get("MemFree"), 0), f(md.get("Slab"), 0),
                f(md.get("VmallocUsed"), 0), f(md.get("Percpu"), 0), f(md.get("PageTables"), 0),
                f(c.get("memfree_b_per_block"), 2), f(c.get("accounted_b_per_block"), 2),
                f(c.get("memfree_prefilled_b_per_block"), 2),
                f(c.get("ram_bytes_per_block"), 1), f(c.get("create_s"), 2)))
    if ms.get("memfree_b_per_block") is not None and ss.get("memfree_b_per_block") is not None:
        L += ["", "Median of the rounds: single-device %s B per block (rounds %s to %s), "
              "mirrored %s B (%s to %s); mirrored less single **%s B per block** (rounds %s); "
              "from the accounted allocators alone %s B (single) and %s B (mirrored), "
              "difference %s B. The noise: one system's rounds are up to %s B per block apart "
              "(MemFree). Self-reported: %s B (single), %s B (mirrored)." % (
                  f(ss["memfree_b_per_block"], 2), f(ss["memfree_b_per_block_min"], 2),
                  f(ss["memfree_b_per_block_max"], 2), f(ms["memfree_b_per_block"], 2),
                  f(ms["memfree_b_per_block_min"], 2), f(ms["memfree_b_per_block_max"], 2),
                  f(d.get("ram_memfree_b_per_block_diff"), 2),
                  rounds_text(d.get("ram_memfree_b_per_block_diff_rounds"), 2, " B"),
                  f(ss.get("accounted_b_per_block"), 2), f(ms.get("accounted_b_per_block"), 2),
                  f(d.get("ram_accounted_b_per_block_diff"), 2),
                  f(d.get("ram_memfree_b_per_block_noise"), 2),
                  f(ss.get("ram_bytes_per_block"), 1), f(ms.get("ram_bytes_per_block"), 1))]

    # ---- resync ----
    L += ["", "## Resync: a full single-device cache copied to a blank half", "",
          "Each round: `/dev/pmem1` blanked (every byte: a half left from an earlier round "
          "would make the copy skip the records that are equal), a single-device cache formatted "
          "on `/dev/pmem0` and filled with dirty blocks by sequential 1 MiB writes (all of it but "
          "the last MiB, so that it stays below high_watermark 100 and nothing is written back), "
          "removed, loaded again without `mirror` (the *recovery load*, timed), removed, and "
          "loaded with `mirror /dev/pmem1`: its first resume copies the superblock area and "
          "every slot's 32-byte record to the blank half and recovers as the single one did, "
          "then the device takes I/O while the module copies the 4 KiB of data of every live "
          "slot online (kernel lines \"mirror: copying the half on X to Y online\" and "
          "\"mirror: copy done\"). The copy's time is the kernel log from a line the script "
          "writes just before the create to \"copy done\", less the recovery load; that "
          "interval (copy and recovery) and the whole create (the script polls the status "
          "once a second for the end of the copy) are upper bounds. Against it: `dd if=/dev/pmem0 of=/dev/pmem1 "
          "bs=1M iflag=direct,count_bytes oflag=direct` of the same number of bytes (what the "
          "copy writes, rounded up to 4 KiB)%s, before the resync in odd rounds, after it in "
          "even ones. Then the pair is loaded once more (*pair reload*: both halves in sync, "
          "compared, nothing copied)." % (
              ", and the same with 4 KiB blocks (the kernel copies 4 KiB at a time)"
              if s.get("dd4k") else ""), "",
          "| round | live blocks | bytes copied | recovery load s | first mirrored load s | "
          "copy s | copy MiB/s | log interval s | raw dd s | raw dd MiB/s | raw dd 4 KiB MiB/s | "
          "resync / raw | copy, QEMU CPU s | raw dd, QEMU CPU s | resync / raw in CPU | "
          "pair reload s | health |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r, x in sorted(R.items(), key=lambda kv: int(kv[0])):
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                 "| %s | %s |" % (
                     r, f(x.get("live"), 0), f(x.get("copy_bytes"), 0),
                     f(x.get("single_load_s"), 2), f(x.get("mirror_first_s"), 2),
                     f(x.get("copy_s"), 2), f(x.get("copy_mb_s"), 0), f(x.get("log_s"), 2),
                     f(x.get("raw_s"), 2), f(x.get("raw_mb_s"), 0), f(x.get("raw4k_mb_s"), 0),
                     f(x.get("ratio"), 2, "x"), f(x.get("copy_cpu_s"), 2),
                     f(x.get("raw_cpu_s"), 2), f(x.get("ratio_cpu"), 2, "x"),
                     f(x.get("mirror_again_s"), 2), x.get("mirror_health") or "–"))
    if d.get("resync_ratio") is not None:
        L += ["", "Median of the rounds: the copy ran at **%s MiB/s** (rounds %s), the raw copy "
              "at %s MiB/s (rounds %s), with 4 KiB blocks %s MiB/s: resync / raw **%s** "
              "(rounds %s; spread of the copy's speed %s, of the raw copy's %s). Upper bounds "
              "on the copy's time give lower bounds on the ratio: %s from the kernel log "
              "(copy and recovery), %s from the whole create. Blanking `/dev/pmem1` with dd "
              "(writes only, 1 MiB blocks): %s MiB/s. A single-device recovery load of the full "
              "cache took %s s, the pair's reload (in sync) %s s." % (
                  f(d.get("resync_copy_mb_s"), 0), rounds_text(d.get("resync_copy_mb_s_rounds"), 0, ""),
                  f(d.get("resync_raw_mb_s"), 0), rounds_text(d.get("resync_raw_mb_s_rounds"), 0, ""),
                  f(d.get("resync_raw4k_mb_s"), 0), f(d["resync_ratio"], 2, "x"),
                  rounds_text(d.get("resync_ratio_rounds")), f(d.get("resync_copy_mb_s_spread"), 2, "x"),
                  f(d.get("resync_raw_mb_s_spread"), 2, "x"), f(d.get("resync_ratio_log"), 2, "x"),
                  f(d.get("resync_ratio_create"), 2, "x"), f(d.get("resync_blank_mb_s"), 0),
                  f(d.get("resync_single_load_s"), 2), f(d.get("resync_mirror_again_s"), 2))]
    if res.get("copy_lines"):
        L += ["", "The kernel's line (last round): `%s`" % res["copy_lines"][-1]]
    L.append("")
    (OUT / "mirror.md").write_text("\n".join(L))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    if "--report" in sys.argv:
        write_md(json.loads((OUT / "mirror.json").read_text()))
        return
    print("== mirror bench: two %d MiB NVDIMMs, %d rounds of %d s runs, %d resync rounds"
          % (PMEM_MB, REPEATS, RT, RESYNC_REPEATS), flush=True)
    head = commit()         # the checkout as the run starts, before its old files go
    for old in OUT.glob("mirror-*-r*.json"):
        old.unlink()
    load0, t0 = host_load(), time.time()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    marks = {}
    rc, output, console, state = boot(marks)
    res = summarize(rc, output, console, t0, load0, date, marks, state, head)
    (OUT / "mirror.json").write_text(json.dumps(res, indent=1))
    write_md(res)
    d = res["derived"]
    print("mirrored / single: QD1 cycle p50 %s (goal <= %.1f), QD32x4 IOPS %s (>= %.1f), "
          "DRAM %s B/block more; resync / raw copy %s (>= %.1f)" % (
              f(d.get("qd1_cycle_p50")), GOALS["qd1_p50"], f(d.get("qd32_iops")),
              GOALS["qd32_iops"], f(d.get("ram_memfree_b_per_block_diff")),
              f(d.get("resync_ratio")), GOALS["resync"]), flush=True)
    if rc != 0 or not res["boot"]["done"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
