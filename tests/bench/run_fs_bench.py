#!/usr/bin/python3
"""make bench-fs: ext4 and XFS on the cache, against dm-writecache and the
bare array, side by side in one boot (issue 32).

The guest side is tests/bench/guest_fs.sh: md raid5 over four virtio
disks, one NVDIMM; per round each system in turn (md, dm-pmemcache,
dm-writecache, the order rotating), on each ext4 and XFS made afresh, and
fio's small-file fsync load (a mail server's: JOBS jobs, each NFILES files
of FSIZE_K KiB, random 4 KiB writes with an fsync after each).  The
figures: IOPS, the write's completion latency and the fsync's latency
(p50, p99), per system and file system the median of the rounds with the
spread (highest / lowest), and the ratios dm-pmemcache / md and
dm-pmemcache / dm-writecache within each round.

Writes docs/bench/fs.json and docs/bench/fs.md with the date and commit.
BENCH_FS_RT (s per run, 15), BENCH_FS_REPEATS (3), BENCH_FS_NFILES (256),
BENCH_FS_FSIZE_K (64), BENCH_FS_JOBS (4), BENCH_FS_PMEM_MB (1024).
--report: only the page again.

--pressure (make bench-fs-pressure): the working set twice the cache
(BENCH_FS_NFILES 512 over an NVDIMM of 64 MiB), so that both caches write
back and make room during the timed runs; docs/bench/fs-pressure.json and
.md. The caches' status before and after each timed run shows it: a run
in which a cache cached fewer new blocks than it had free at the start
made no room, and the bench then fails with PRESSURE_NOT_MET (its
precondition), writing nothing.
"""
import json
import os
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
from run_mirror_bench import fio_figures  # noqa: E402

REPO = HERE.parent.parent
OUT = REPO / "docs/bench"
PRESSURE = "--pressure" in sys.argv[1:]
FS_JSON, FS_MD = ((OUT / "fs-pressure.json", OUT / "fs-pressure.md") if PRESSURE
                  else (OUT / "fs.json", OUT / "fs.md"))
RT = int(os.environ.get("BENCH_FS_RT", "15"))
REPEATS = int(os.environ.get("BENCH_FS_REPEATS", "3"))
NFILES = int(os.environ.get("BENCH_FS_NFILES", "512" if PRESSURE else "256"))
PMEM_MB = int(os.environ.get("BENCH_FS_PMEM_MB", "64" if PRESSURE else "1024"))
PRESSURE_TOKEN = "PRESSURE_NOT_MET"
# dmsetup status words after "<start> <len> <target>": pmemcache's
# (tests/test_target.py STATUS_FIELDS) and writecache's (6.1)
PMC_WORDS = {"free": 2, "write_new": 8, "wb_pfn_blocks": 12, "wb_bounce_blocks": 14}
WC_WORDS = {"blocks": 1, "free": 2, "writes_allocate": 10, "blocked_on_freelist": 11}
FSIZE_K = int(os.environ.get("BENCH_FS_FSIZE_K", "64"))
JOBS = int(os.environ.get("BENCH_FS_JOBS", "4"))
SYSTEMS = ["md", "pmc", "wc"]
NAMES = {"md": "md raid5 alone", "pmc": "dm-pmemcache", "wc": "dm-writecache (pmem mode)"}
FILESYSTEMS = ["ext4", "xfs"]
FIGS = ["iops", "p50_us", "p99_us", "sync_p50_us", "sync_p99_us"]
FIG_NAMES = {"iops": "IOPS", "p50_us": "write p50 µs", "p99_us": "write p99 µs",
             "sync_p50_us": "fsync p50 µs", "sync_p99_us": "fsync p99 µs"}


def boot():
    state = Path(tempfile.mkdtemp(prefix="fsbench.", dir=KCACHE))
    vm = VM("fsbench", state)
    script = "RT=%d\nREPEATS=%d\nNFILES=%d\nFSIZE_K=%d\nJOBS=%d\n" % (
        RT, REPEATS, NFILES, FSIZE_K, JOBS) + (HERE / "guest_fs.sh").read_text()
    log = vm._log_path()
    budget = 900 + REPEATS * len(SYSTEMS) * len(FILESYSTEMS) * (RT + 120)
    cmd = vm.command(script, timeout=budget, disks=4, disk_size=512, pmem_size=PMEM_MB,
                     memory=2048, log=log)
    try:
        rc, output, console = run_guest(cmd, log, "fs: ")
    finally:
        subprocess.run(["rm", "-rf", str(state)])
    return rc, output, console, log


def parse(output):
    """{"SYS-FS": {round: fio figures}} of the script's FIOJSON lines, each
    cache's run with "cache": what it did during the timed run (cache_work)."""
    runs, cst = {}, {}
    for l in output.splitlines():
        if l.startswith("CST "):
            _, key, r, when, st = l.split(" ", 4)
            cst.setdefault((key, r), {})[when] = st.split()
        if not l.startswith("FIOJSON "):
            continue
        _, key, _, r, blob = l.split(" ", 4)
        try:
            runs.setdefault(key, {})[r] = fio_figures(json.loads(blob))
        except (ValueError, KeyError, IndexError) as e:
            print("  bad fio JSON for %s round %s: %s" % (key, r, e), flush=True)
    for (key, r), st in cst.items():
        if key in runs and r in runs[key] and "before" in st and "after" in st:
            runs[key][r]["cache"] = cache_work(st["before"], st["after"])
    return runs


def cache_work(before, after):
    """From the dmsetup status words before and after a timed run: the free
    blocks at its start, the blocks newly cached during it, and (pmemcache)
    the blocks written back / (writecache) the writes that waited for a
    free block."""
    if before[2] == "pmemcache":
        b, a = ([int(x) for x in w[3:3 + 15]] for w in (before, after))
        wb = lambda w: w[PMC_WORDS["wb_pfn_blocks"]] + w[PMC_WORDS["wb_bounce_blocks"]]
        return {"free_at_start": b[PMC_WORDS["free"]],
                "new_blocks": a[PMC_WORDS["write_new"]] - b[PMC_WORDS["write_new"]],
                "written_back": wb(a) - wb(b)}
    b, a = ([int(x) for x in w[3:3 + 14]] for w in (before, after))
    return {"free_at_start": b[WC_WORDS["free"]],
            "new_blocks": a[WC_WORDS["writes_allocate"]] - b[WC_WORDS["writes_allocate"]],
            "blocked_on_freelist": a[WC_WORDS["blocked_on_freelist"]] -
            b[WC_WORDS["blocked_on_freelist"]]}


def pressure_missing(runs):
    """The cache runs that made no room (cached fewer new blocks than were
    free at their start): empty when the pressure bench means something."""
    return ["%s round %s: %d new blocks, %d free at the start" % (
                key, r, f["cache"]["new_blocks"], f["cache"]["free_at_start"])
            for key, rounds in sorted(runs.items()) if not key.startswith("md-")
            for r, f in sorted(rounds.items())
            if "cache" not in f or f["cache"]["new_blocks"] <= f["cache"]["free_at_start"]]


def derive(runs):
    """Per SYS-FS and figure: the median of the rounds and its spread; per
    FS and figure: dm-pmemcache / md and / dm-writecache, round by round."""
    med, ratios = {}, {}
    for key, rounds in runs.items():
        for fig in FIGS:
            vals = [f.get(fig) for f in rounds.values() if f.get(fig) is not None]
            if vals:
                med.setdefault(key, {})[fig] = {
                    "median": statistics.median(vals),
                    "spread": max(vals) / min(vals) if min(vals) > 0 else None}
    for fs in FILESYSTEMS:
        for other in ("md", "wc"):
            a, b = runs.get("pmc-" + fs, {}), runs.get("%s-%s" % (other, fs), {})
            for fig in FIGS:
                rr = [a[r][fig] / b[r][fig] for r in sorted(a) if r in b and
                      a[r].get(fig) and b[r].get(fig)]
                if rr:
                    ratios.setdefault(fs, {}).setdefault(other, {})[fig] = {
                        "median": statistics.median(rr), "rounds": rr}
    return med, ratios


def fmt(x, nd=1):
    if x is None:
        return "–"
    return "{:,.{}f}".format(x, nd).replace(",", " ")


def write_md(res):
    s, med, ratios = res["settings"], res["median"], res["ratios"]
    pressure = s.get("pressure", False)
    L = ["# File systems on the cache%s (issue 32)" % (
             ", working set twice the cache" if pressure else ""), "",
         "Generated by `make bench-fs%s` (`tests/bench/run_fs_bench.py%s`, guest side "
         "`tests/bench/guest_fs.sh`), %s, commit %s, one VM boot of %.1f min; host load "
         "average %s at the start and %s at the end. All figures: [%s](%s). "
         "Regenerate this page from it: `/usr/bin/python3 tests/bench/run_fs_bench.py "
         "--report%s`." % ("-pressure" if pressure else "", " --pressure" if pressure else "",
                         s["date"], s["commit"], s["boot_s"] / 60, s["load0"], s["load1"],
                         FS_JSON.name, FS_JSON.name, " --pressure" if pressure else ""), "",
         "**Read the figures as ratios within this boot.** The guest runs under QEMU TCG: "
         "the CPU and the NVDIMM are emulated, and the disks are files of the host; "
         "absolute figures are those of this emulated machine, not of real hardware. "
         "Every figure is the median of %d rounds, each system and file system once per "
         "round (the order of the systems rotating round by round); *spread* is the "
         "highest / lowest of the rounds, and each ratio is given round by round too: "
         "that is its noise." % s["repeats"], "",
         "Setup: md raid5 (64 KiB chunks) over four virtio disks of 512 MiB; one NVDIMM "
         "of %s. dm-pmemcache on the raw namespace (`4096 1 format`: its defaults, "
         "writeback above 50 %% dirty), dm-writecache in pmem mode on the fsdax namespace "
         "(`writecache p ... 4096 0`, its defaults), each formatted afresh for each run; "
         "the file system made afresh on the whole device (ext4: `mke2fs -t ext4` with "
         "nodiscard and the inode tables and journal written at mkfs; XFS: `mkfs.xfs -K`), "
         "mounted with the defaults. The load: fio, %d jobs, each %d files of %d KiB "
         "laid out first (not timed), then random 4 KiB writes over them with an fsync "
         "after each (`fsync=1`, psync), %d s per run: a mail server's small-file pattern, "
         "where every fsync is a journal commit (REQ_PREFLUSH and FUA writes) the cache "
         "answers from pmem." % ("1 GiB" if s.get("pmem_mb", 1024) == 1024
                                 else "%d MiB" % s["pmem_mb"], s["jobs"], s["nfiles"], s["fsize_k"],
                                 s["rt"]), ""]
    if pressure:
        L += ["The working set, %d MiB of files, is twice the NVDIMM: during every timed run "
              "each cache must write back and make room, which the caches' status before "
              "and after each run shows (the bench fails with `%s`, writing nothing, if a "
              "cache run cached fewer new blocks than it had free at its start). Medians "
              "of the rounds:" % (s["jobs"] * s["nfiles"] * s["fsize_k"] // 1024,
                                  PRESSURE_TOKEN), "",
              "| system, file system | free blocks at the start | new blocks cached | "
              "written back (dm-pmemcache) / writes that waited for a free block "
              "(dm-writecache) |", "|---|---:|---:|---:|"]
        for fs in FILESYSTEMS:
            for sys_ in ("pmc", "wc"):
                cw = [f["cache"] for f in res["runs"].get("%s-%s" % (sys_, fs), {}).values()
                      if "cache" in f]
                if not cw:
                    continue
                third = "written_back" if sys_ == "pmc" else "blocked_on_freelist"
                L.append("| %s, %s | %s | %s | %s |" % (
                    NAMES[sys_], fs, *(fmt(statistics.median(c[k] for c in cw), 0)
                                       for k in ("free_at_start", "new_blocks", third))))
        L.append("")
    for fs in FILESYSTEMS:
        L += ["## %s" % ("ext4" if fs == "ext4" else "XFS"), "",
              "| system | %s | spread IOPS / fsync p50 |" % " | ".join(
                  FIG_NAMES[f] for f in FIGS),
              "|---|%s---|" % ("---:|" * len(FIGS))]
        for sys_ in SYSTEMS:
            m = med.get("%s-%s" % (sys_, fs), {})
            L.append("| %s | %s | %s / %s |" % (
                NAMES[sys_], " | ".join(fmt(m.get(f, {}).get("median"),
                                            0 if f == "iops" else 1) for f in FIGS),
                fmt(m.get("iops", {}).get("spread"), 2) + "x",
                fmt(m.get("sync_p50_us", {}).get("spread"), 2) + "x"))
        for other in ("md", "wc"):
            r = ratios.get(fs, {}).get(other, {})
            L += ["", "dm-pmemcache / %s: %s." % (NAMES[other], "; ".join(
                "%s **%sx** (rounds %s)" % (FIG_NAMES[f], fmt(r[f]["median"], 2),
                                             ", ".join(fmt(x, 2) + "x" for x in r[f]["rounds"]))
                for f in FIGS if f in r) or "no figures")]
        L.append("")
    L += ["The kernel of the boot reported %s." % (
        "nothing" if not res["kernel_reports"] else "; ".join(res["kernel_reports"])), ""]
    FS_MD.write_text("\n".join(L))


def main():
    if "--report" in sys.argv[1:]:
        write_md(json.loads(FS_JSON.read_text()))
        return
    load0 = host_info()["loadavg"]
    t0 = time.time()
    rc, output, console, log = boot()
    if rc != 0 or "FSDONE=1" not in output:
        sys.exit("fs bench: the guest exited %d before the end (log %s)" % (rc, log))
    runs = parse(output)
    missing = pressure_missing(runs) if PRESSURE else []
    if missing:
        sys.exit("fs bench: %s: a cache made no room during a timed run (log %s):\n%s"
                 % (PRESSURE_TOKEN, log, "\n".join(missing)))
    med, ratios = derive(runs)
    res = {"settings": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "commit": commit(), "boot_s": round(time.time() - t0),
                        "load0": load0, "load1": host_info()["loadavg"], "rt": RT,
                        "repeats": REPEATS, "nfiles": NFILES, "fsize_k": FSIZE_K,
                        "jobs": JOBS, "pmem_mb": PMEM_MB, "pressure": PRESSURE},
           "runs": runs, "median": med, "ratios": ratios,
           "kernel_reports": [l for l in console.splitlines() if KERNEL_REPORTS.search(l)]}
    OUT.mkdir(parents=True, exist_ok=True)
    FS_JSON.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    write_md(res)
    print("fs bench: %s and %s written" % (FS_JSON.relative_to(REPO), FS_MD.relative_to(REPO)))


if __name__ == "__main__":
    main()
