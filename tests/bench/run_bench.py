#!/usr/bin/python3
"""make bench: fio write-back benchmarks side by side (issue 8).

One guest boot per (member model, origin layout); in each boot the same
fio jobs run against every system in turn on the same disks, each set up
from a fresh state (md re-created, pmem metadata zeroed). Results: raw fio
JSON and guest figures in docs/bench/, tables in docs/benchmarks.md, plots
in docs/bench/*.png (tests/bench/report.py).

Every timed job runs BENCH_REPEATS times (3) per system; the report
shows the median and the spread of the repeats.

The drain is timed in the guest (wall, and busy CPU ticks of /proc/stat)
and on the host: the QEMU process's utime+stime between the HOSTMARKs the
guest prints around it (tests/bench/hostcpu.py): under TCG the emulated
CPU and the emulated DMA are QEMU's own work.  dm-pmemcache's status
counters say which route (pfn bios or bounce pages) the drain took.

BENCH_QUICK=1: short runtimes, one repeat and a small drain, for development.
BENCH_MODELS / BENCH_LAYOUTS: restrict (e.g. BENCH_MODELS=hdd).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from vm import VM, BootFiles, KCACHE, KERNEL_REPORTS  # noqa: E402
from hostcpu import span, watch  # noqa: E402

REPO = HERE.parent.parent
OUT = REPO / "docs/bench"

QUICK = os.environ.get("BENCH_QUICK") == "1"
RT = int(os.environ.get("BENCH_RUNTIME", "2" if QUICK else "4"))
DRAIN_MB = int(os.environ.get("BENCH_DRAIN_MB", "32" if QUICK else "128"))
SIZE = os.environ.get("BENCH_SIZE", "256M")
REPEATS = int(os.environ.get("BENCH_REPEATS", "1" if QUICK else "3"))
JOBS = ["drain", "qd1_fsync", "qd32_4jobs", "zipf_rw", "seq128k"]
# HDD-like members: 150 IOPS and 150 MiB/s per disk.
MODELS = {"hdd": "150:157286400", "fast": None}
# bcache last: its allocator thread has oopsed at registration here (a
# NULL journal in bch_journal), which ends the boot.
LAYOUTS = {
    "raid5": ["raw", "journal", "pmc-pfn", "pmc-bounce", "wc-mem", "wc-dev", "bcache"],
    "raid1": ["raw", "pmc-pfn", "pmc-bounce", "wc-mem"],
}


def pick(env, allowed):
    v = os.environ.get(env)
    return [x for x in (v.split() if v else allowed) if x in allowed]


def run_boot(model, layout, systems):
    state = Path(tempfile.mkdtemp(prefix="bench-%s-%s." % (model, layout), dir=KCACHE))
    vm = VM("bench-%s-%s" % (model, layout), state)
    script = ("LAYOUT=%s\nSYSTEMS='%s'\nRT=%d\nSIZE=%s\nDRAIN_MB=%d\nDRAIN_CAP=%d\nJOBS='%s'\n"
              "REPEATS=%d\n" % (layout, " ".join(systems), RT, SIZE, DRAIN_MB, 300,
                                 " ".join(JOBS), REPEATS))
    script += (HERE / "guest_bench.sh").read_text()
    files = [(f, "/test/bench/" + f.name) for f in sorted(HERE.glob("*.fio"))]
    log = vm._log_path()
    cmd = vm.command(script, files=files, timeout=2400 * REPEATS, disks=6, disk_size=1024,
                     pmem_size=1024, throttle=MODELS[model], log=log)
    marks = {}
    rc, output, console = run_guest(cmd, log, model + "/", marks)
    subprocess.run(["rm", "-rf", str(state)])
    if rc != 0:
        print("  guest exited %d (log %s)" % (rc, log), flush=True)
    return output, console, rc, marks


def run_guest(cmd, log, label, marks=None):
    """Run a guest to its end, printing its PROGRESS lines as they come
    (prefixed with the time and @label); returns (exit status, script
    output, kernel console).  The QEMU process's CPU time at the guest's
    HOSTMARK lines goes into the dict MARKS if given (hostcpu.watch)."""
    t0 = time.time()

    def progress(l):
        if l.startswith("PROGRESS "):
            print("  [%4.0fs] %s%s" % (time.time() - t0, label, l[9:]), flush=True)
    boot = BootFiles.of(log)
    rc, m = watch(cmd, boot.out, progress)
    if marks is not None:
        marks.update(m)
    console, output, _ = boot.read()
    return rc, output, console


def parse(output):
    """fio: {system: {"job-rN": fio JSON}}, bench: {system: {key: value}}."""
    fio, bench = {}, {}
    for l in output.splitlines():
        if l.startswith("FIOJSON "):
            _, sys_, job, rep, blob = l.split(" ", 4)
            try:
                fio.setdefault(sys_, {})["%s-r%s" % (job, rep)] = json.loads(blob)
            except ValueError as e:
                print("  bad fio JSON for %s %s: %s" % (sys_, job, e), flush=True)
        elif l.startswith("BENCH "):
            kv = dict(re.findall(r"(\w+)=(\S+)", l))
            key = kv.pop("sys", "_boot")
            bench.setdefault(key, {}).update(kv)
    return fio, bench


def add_marks(bench, marks):
    """The QEMU process's CPU time (host side) into the guest's figures:
    per system qemu_cpu_s and qemu_wall_s between the HOSTMARKs around its
    timed drain (they include the guest's 0.5 s sleep before the drain;
    report.py takes the idle share off), and the boot's idle QEMU CPU per
    second (HOSTMARKs idle0/idle1)."""
    cpu, wall = span(marks, "idle0", "idle1")
    if cpu is not None and wall:
        bench.setdefault("_boot", {})["qemu_idle_cpu_per_s"] = "%.4f" % (cpu / wall)
    for name in marks:
        if name.startswith("drain0-"):
            sys_ = name[len("drain0-"):]
            cpu, wall = span(marks, name, "drain1-" + sys_)
            if cpu is not None:
                bench.setdefault(sys_, {}).update(
                    qemu_cpu_s="%.2f" % cpu, qemu_wall_s="%.3f" % wall)
    return bench


def crash(console):
    """If the guest's kernel reported something: the system being measured
    then (guest_bench.sh logs "pmc-bench: measuring SYS" in the kernel log)
    and the first report line."""
    system = None
    for l in console.splitlines():
        m = re.search(r"pmc-bench: measuring (\S+)", l)
        if m:
            system = m.group(1)
        elif KERNEL_REPORTS.search(l):
            return {"system": system, "report": re.sub(r"^\[[ 0-9.]+\] ", "", l).strip()}
    return None


def slim(j):
    """Keep the raw fio JSON small: drop per-job option echo and the disk_util list."""
    j = dict(j)
    j.pop("disk_util", None)
    return j


def host_info():
    cpu = "?"
    for l in Path("/proc/cpuinfo").read_text().splitlines():
        if l.startswith("model name"):
            cpu = l.split(":", 1)[1].strip()
            break
    return {"cpu": cpu, "nproc": os.cpu_count(),
            "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3])}


def earlier_runs(settings):
    """Boots of the last results.json made with the same settings: a run
    restricted by BENCH_MODELS/BENCH_LAYOUTS keeps the others."""
    try:
        old = json.loads((OUT / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    same = ("quick", "runtime_s", "repeats", "size", "drain_mb", "jobs")
    if any(old["settings"].get(k) != settings[k] for k in same):
        return {}
    return old["runs"]


def commit():
    """The checkout's commit (with -dirty for local changes), for the page."""
    git = ["git", "-C", str(HERE)]
    head = subprocess.run(git + ["rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("-dirty" if head and dirty else "") or None


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    settings = {"quick": QUICK, "runtime_s": RT, "repeats": REPEATS, "size": SIZE,
                "drain_mb": DRAIN_MB, "models": MODELS, "layouts": LAYOUTS, "jobs": JOBS,
                "host": host_info()}
    results = {"settings": settings, "runs": earlier_runs(settings)}
    t_all = time.time()
    for model in pick("BENCH_MODELS", list(MODELS)):
        for layout in pick("BENCH_LAYOUTS", list(LAYOUTS)):
            systems = LAYOUTS[layout]
            print("== boot: members %s, origin md %s: %s" % (model, layout, " ".join(systems)),
                  flush=True)
            start = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "commit": commit(), "loadavg_start": host_info()["loadavg"]}
            t0 = time.time()
            output, console, rc, marks = run_boot(model, layout, systems)
            fio, bench = parse(output)
            add_marks(bench, marks)
            key = "%s-%s" % (model, layout)
            for old in OUT.glob(key + "-*.json"):
                old.unlink()
            for sys_, jobs in fio.items():
                for job, j in jobs.items():
                    (OUT / ("%s-%s-%s.json" % (key, sys_, job))).write_text(
                        json.dumps(slim(j), indent=1))
            results["runs"][key] = dict(start, rc=rc, bench=bench, crash=crash(console),
                                        loadavg_end=host_info()["loadavg"],
                                        minutes=round((time.time() - t0) / 60, 1),
                                        fio_files=sorted("%s-%s-%s.json" % (key, s, j)
                                                         for s in fio for j in fio[s]))
            (OUT / "results.json").write_text(json.dumps(results, indent=1))
            print("== %s done (rc %d), %.0f s so far" % (key, rc, time.time() - t_all), flush=True)
    subprocess.run([sys.executable, str(HERE / "report.py")], check=True)


if __name__ == "__main__":
    main()
