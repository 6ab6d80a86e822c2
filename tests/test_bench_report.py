"""Host tests of the bench report (tests/bench/report.py, run_bench.py):
the figures of docs/benchmarks.md come from these functions, so they are
checked on made-up guest output with known answers."""
import json
import re
import sys

import pytest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))
import report  # noqa: E402
import run_bench  # noqa: E402


def fio_json(write_iops, read_iops=0.0, p99_us=100.0):
    clat = {"percentile": {"50.000000": 50_000.0, "99.000000": p99_us * 1000}}
    side = {"iops": write_iops, "bw_bytes": write_iops * 4096, "clat_ns": clat}
    return {"jobs": [{"write": side,
                      "read": {"iops": read_iops, "bw_bytes": read_iops * 4096,
                               "clat_ns": clat}}]}


def test_split_name_with_and_without_repeat():
    assert report.split_name("hdd-raid5-pmc-bounce-qd1_fsync-r2.json", "hdd-raid5") == \
        ("pmc-bounce", "qd1_fsync")
    assert report.split_name("fast-raid1-raw-zipf_rw-r1.json", "fast-raid1") == \
        ("raw", "zipf_rw")
    # files of runs made before repeats existed
    assert report.split_name("fast-raid1-wc-mem-drain_fill.json", "fast-raid1") == \
        ("wc-mem", "drain_fill")


def test_metrics_take_the_median_and_the_spread_of_the_repeats():
    m = report.metrics([fio_json(100, p99_us=900), fio_json(400, p99_us=100),
                        fio_json(200, p99_us=300)], "qd32_4jobs")
    assert m["iops"] == 200 and m["p99"] == 300
    assert m["spread"] == 4.0 and m["n"] == 3
    assert (m["iops_min"], m["iops_max"]) == (100, 400)
    # zipf_rw counts reads and writes
    assert report.metrics([fio_json(30, read_iops=70)], "zipf_rw")["iops"] == 100


def test_ram_rows_subtract_the_bare_array_and_add_the_memmap():
    runs = {"hdd-raid5": {"bench": {
        "raw": {"setup_kern_kb": "600", "setup_used_kb": "5000"},
        # 4 MiB over the bare array for 1 GiB of pmem = 16 bytes per block
        "pmc-bounce": {"setup_kern_kb": str(600 + 4096), "setup_used_kb": "9000",
                       "fill_kern_kb": "512", "ram_bytes_per_block": "15.1"},
        "wc-mem": {"setup_kern_kb": str(600 + 8192), "setup_used_kb": "13000",
                   "memmap_kb": str(16 * 1024)},
        "_boot": {"done": "1"}}}}
    rows = {sys_: (per_block, row) for _, sys_, per_block, row in report.ram_rows(runs)}
    assert set(rows) == {"pmc-bounce", "wc-mem"}
    assert rows["pmc-bounce"][0] == 16.0
    assert rows["pmc-bounce"][1]["fill"] == 0.5 and rows["pmc-bounce"][1]["self"] == "15.1"
    assert rows["wc-mem"][0] == (8 + 16) * 4.0


def test_crash_names_the_system_being_measured():
    console = "\n".join([
        "[  100.000001] pmc-bench: measuring raw",
        "[  120.000002] pmc-bench: measuring bcache",
        "[  131.235163] BUG: kernel NULL pointer dereference, address: 0000000000000000",
        "[  131.235532] Oops: 0000 [#1] PREEMPT SMP NOPTI"])
    assert run_bench.crash(console) == {
        "system": "bcache", "report": "BUG: kernel NULL pointer dereference, address: 0000000000000000"}
    assert run_bench.crash(console.split("\n[")[0]) is None


def test_parse_keeps_each_repeat():
    console = "\n".join([
        'FIOJSON pmc-pfn qd1_fsync 1 {"jobs": []}',
        'FIOJSON pmc-pfn qd1_fsync 2 {"jobs": [1]}',
        "BENCH sys=pmc-pfn drain_s=1.5 drain_cpu_ticks=40",
        "BENCH done=1 cpus=2"])
    fio, bench = run_bench.parse(console)
    assert fio == {"pmc-pfn": {"qd1_fsync-r1": {"jobs": []}, "qd1_fsync-r2": {"jobs": [1]}}}
    assert bench["pmc-pfn"] == {"drain_s": "1.5", "drain_cpu_ticks": "40"}
    assert bench["_boot"]["done"] == "1"


def drain_run(pfn_route="pfn", pfn_bounce_blocks=0, notsupp=0):
    """A raid5 boot's guest figures with both routes' drains (16 MiB, a
    64th of a GiB) and the QEMU marks already added."""
    def pmc(route, pfn, bounce, ticks, drain_s, qemu_cpu_s, qemu_wall_s, ns=0):
        return {"route": route, "wb_pfn_blocks": "0", "wb_bounce_blocks": "0",
                "wb_notsupp": "0", "drain_s": str(drain_s), "drain_cpu_ticks": str(ticks),
                "route_after": route, "wb_pfn_blocks_after": str(pfn),
                "wb_bounce_blocks_after": str(bounce), "wb_notsupp_after": str(ns),
                "qemu_cpu_s": str(qemu_cpu_s), "qemu_wall_s": str(qemu_wall_s)}
    return {"hdd-raid5": {"bench": {
        "_boot": {"qemu_idle_cpu_per_s": "0.1000"},
        # 0.5 s of the 1.5 s between the marks idle: 0.05 s of QEMU CPU off
        "pmc-pfn": pmc(pfn_route, 4096 - pfn_bounce_blocks, pfn_bounce_blocks, 50, 1.0, 1.05,
                       1.5, notsupp),
        "pmc-bounce": pmc("bounce", 0, 4096, 100, 2.0, 4.05, 2.5),
        "wc-mem": {"drain_s": "4.0", "drain_cpu_ticks": "80"}}}}


def test_run_bench_adds_the_qemu_cpu_between_the_marks():
    bench = {"pmc-pfn": {"drain_s": "1.0"}}
    marks = {"idle0": (100.0, 10.0), "idle1": (103.0, 10.3),
             "drain0-pmc-pfn": (110.0, 20.0), "drain1-pmc-pfn": (111.5, 21.25),
             "drain0-wc-mem": (120.0, None), "drain1-wc-mem": (121.0, 30.0)}
    run_bench.add_marks(bench, marks)
    assert bench["_boot"] == {"qemu_idle_cpu_per_s": "0.1000"}
    assert bench["pmc-pfn"] == {"drain_s": "1.0", "qemu_cpu_s": "1.25", "qemu_wall_s": "1.500"}
    assert "wc-mem" not in bench		# no CPU reading at a mark: no figure


def test_drain_figures_per_gib_with_the_idle_share_off():
    d = report.drain_figures(drain_run(), {"drain_mb": 16})["hdd-raid5"]
    p, b = d["pmc-pfn"], d["pmc-bounce"]
    assert p["drain_s_per_gib"] == 64.0 and b["drain_s_per_gib"] == 128.0
    assert p["guest_cpu_per_gib"] == 32.0 and b["guest_cpu_per_gib"] == 64.0
    assert abs(p["qemu_cpu_per_gib"] - 64.0) < 1e-9 and abs(b["qemu_cpu_per_gib"] - 256.0) < 1e-9
    assert p["route"] == {"pfn": 4096, "bounce": 0, "notsupp": 0, "route": "pfn", "ok": True}
    assert b["route"]["ok"] and d["wc-mem"]["route"] is None
    assert d["wc-mem"]["qemu_cpu_per_gib"] is None


def test_pfn_vs_bounce_rows_for_raid5():
    d = report.drain_figures(drain_run(), {"drain_mb": 16})
    rows = report.pfn_vs_bounce_rows("hdd-raid5", d["hdd-raid5"])
    assert rows == [
        "| hdd-raid5 | pfn vs bounce | guest CPU s per GiB written back | <= 0.7x | 0.50x |",
        "| hdd-raid5 | pfn vs bounce | QEMU CPU s per GiB written back (host) | <= 1.0x | 0.25x |",
        "| hdd-raid5 | pfn vs bounce | drain s per GiB | <= 1.0x | 0.50x |"]
    # a boot without both routes has no such row
    assert report.pfn_vs_bounce_rows("hdd-raid5", {"pmc-bounce": d["hdd-raid5"]["pmc-bounce"]}) == []


def test_a_pfn_drain_that_bounced_gives_no_ratio():
    d = report.drain_figures(drain_run("bounce", pfn_bounce_blocks=4000, notsupp=1),
                             {"drain_mb": 16})["hdd-raid5"]
    r = d["pmc-pfn"]["route"]
    assert r == {"pfn": 96, "bounce": 4000, "notsupp": 1, "route": "bounce", "ok": False}
    assert report.pfn_vs_bounce(d) == []
    rows = report.pfn_vs_bounce_rows("hdd-raid5", d)
    assert len(rows) == 1 and "no ratio" in rows[0] and "96 / 4000, 1 pfn refused" in rows[0]
    # silently bounced, route field still pfn: the counters catch it
    d = report.drain_figures(drain_run("pfn", pfn_bounce_blocks=1), {"drain_mb": 16})["hdd-raid5"]
    assert not d["pmc-pfn"]["route"]["ok"] and report.pfn_vs_bounce(d) == []


def test_route_check_of_runs_without_counters():
    assert report.route_check("pmc-pfn", {"route_after": "pfn"}) == {
        "pfn": None, "bounce": None, "notsupp": None, "route": "pfn", "ok": True}
    assert not report.route_check("pmc-pfn", {"route_after": "bounce"})["ok"]
    assert report.route_check("wc-mem", {"drain_s": "1"}) is None


def test_benchmarks_md_has_the_raid5_pfn_vs_bounce_rows(tmp_path, monkeypatch):
    import json
    runs = drain_run()
    runs["hdd-raid5"].update(rc=0, fio_files=[], date="d", minutes=1, commit="04cb5155f28e")
    settings = {"quick": True, "runtime_s": 2, "repeats": 1, "size": "256M", "drain_mb": 16,
                "models": run_bench.MODELS, "layouts": run_bench.LAYOUTS, "jobs": run_bench.JOBS}
    (tmp_path / "results.json").write_text(json.dumps({"settings": settings, "runs": runs}))
    monkeypatch.setattr(report, "OUT", tmp_path)
    monkeypatch.setattr(report, "DOC", tmp_path / "benchmarks.md")
    report.main()
    md = (tmp_path / "benchmarks.md").read_text()
    assert "| hdd-raid5 | pfn vs bounce | QEMU CPU s per GiB written back (host) | <= 1.0x | 0.25x |" in md
    assert "| hdd-raid5 | dm-pmemcache pfn | 1.00 | 64.00 | 16.0 | 32.00 | 64.00 | 4096 / 0 | 0.25x |" in md
    assert "The boots' idle QEMU CPU: hdd-raid5 0.1000 s per s." in md
    assert "| boot hdd-raid5 | d, commit 04cb5155f28e, 1 min, " in md


# The generated pages and what regenerates each one from the kept JSON.
# report.py's figures must never be typed into docs/benchmarks.md by hand:
# `make bench` would silently overwrite the edit (issue 30).
# In this order: report.py links the pages that exist.
PAGES = {
    "docs/bench/route.md": ["tests/bench/run_route_bench.py", "--report"],
    "docs/bench/overload.md": ["tests/bench/run_overload_bench.py", "--report"],
    "docs/bench/scale.md": ["tests/bench/run_scale_bench.py", "--report"],
    "docs/bench/mirror.md": ["tests/bench/run_mirror_bench.py", "--report"],
    "docs/bench/fs.md": ["tests/bench/run_fs_bench.py", "--report"],
    "docs/bench/fs-pressure.md": ["tests/bench/run_fs_bench.py", "--report", "--pressure"],
    "docs/benchmarks.md": ["tests/bench/report.py"],
    "docs/bench/cpu.md": ["tests/bench/run_cpu_bench.py", "--report"],
}


def test_the_benchmark_pages_regenerate_byte_identical_from_the_kept_json(tmp_path):
    import shutil
    import subprocess
    pytest.importorskip("matplotlib")
    repo = Path(__file__).resolve().parent.parent
    # a copy: the generators write their pages (and plots) where they live
    shutil.copytree(repo / "docs", tmp_path / "docs")
    shutil.copytree(repo / "tests/bench", tmp_path / "tests/bench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(repo / "tests/vm.py", tmp_path / "tests/vm.py")
    for page, cmd in PAGES.items():
        (tmp_path / page).unlink()
        proc = subprocess.run([sys.executable] + cmd, cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    # writeback.md has no report-only mode: its write_md() from the kept JSON
    (tmp_path / "docs/bench/writeback.md").unlink()
    proc = subprocess.run([sys.executable, "-c", "import json, sys; sys.path[:0] = ['tests', "
                           "'tests/bench']; import run_wb_bench as w; w.write_md(json.loads("
                           "open('docs/bench/writeback.json').read()))"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for page in list(PAGES) + ["docs/bench/writeback.md"]:
        want, got = (repo / page).read_text(), (tmp_path / page).read_text()
        if want != got:
            import difflib
            diff = "".join(list(difflib.unified_diff(
                want.splitlines(True), got.splitlines(True), page, "regenerated"))[:40])
            raise AssertionError("%s differs from what its generator writes from the kept "
                                 "JSON (edit the generator, not the page):\n%s" % (page, diff))


def mirror_fio(iops, p50_us, p99_us, sync_p50_us=None, sync_p99_us=None):
    def lat(p50, p99):
        return {"mean": p50 * 1000, "percentile": {"50.000000": p50 * 1000,
                                                  "99.000000": p99 * 1000,
                                                  "99.900000": p99 * 2000}}
    job = {"write": {"iops": iops, "total_ios": iops * 10, "clat_ns": lat(p50_us, p99_us)}}
    if sync_p50_us is not None:
        job["sync"] = {"total_ios": iops * 10, "lat_ns": lat(sync_p50_us, sync_p99_us)}
    return json.dumps({"jobs": [job]})


def test_mirror_bench_ratios_dram_and_resync_from_guest_lines(tmp_path, monkeypatch):
    import run_mirror_bench as mb
    monkeypatch.setattr(mb, "OUT", tmp_path)
    monkeypatch.setattr(mb, "REPEATS", 2)
    lines = ["MB region0=region0 region1=region1"]
    for r in (1, 2):
        # single: cycle p50 10+5 us; mirrored: 12+6 us in round 1, 13.5+6.5 in round 2
        for s, (w, sy, iops) in {"single": (10, 5, 1000),
                                 "mirror": ((12, 6, 800) if r == 1 else (13.5, 6.5, 700))}.items():
            free = 2_000_000
            drop = 4096 if s == "single" else 4096 + 64 * (r - 1)   # KiB over 262144 blocks
            lines += ["MEM at=before_%s-%d MemFree=%d Slab=100 VmallocUsed=1000 Percpu=10" % (s, r, free),
                      "MB sys=%s r=%d create_s=0.5 blocks=262144 ram_bytes_per_block=14.5" % (s, r),
                      "MEM at=after_%s-%d MemFree=%d Slab=100 VmallocUsed=5096 Percpu=10" % (s, r, free - drop),
                      "MB sys=%s r=%d job=qd1_fsync write_hits_before=0 wb_blocks_before=0" % (s, r),
                      "MB sys=%s r=%d job=qd1_fsync fio_rc=0 write_hits=500 wb_blocks=0" % (s, r),
                      "FIOJSON %s qd1_fsync %d %s" % (s, r, mirror_fio(100, w, 2 * w, sy, 2 * sy)),
                      "FIOJSON %s qd32_4jobs %d %s" % (s, r, mirror_fio(iops, 100, 300))]
    # 1 GiB copied in 2 s (the kernel log from the script's line to "copy
    # done", 3 s, less the recovery load), dd took 1.6 s; the create, which
    # polls for the end of the copy, 3.5 s
    lines += ["MB sys=resync r=1 blocks=262144 live=262000 copy_bytes=1073741824 "
              "single_load_s=1.0 mirror_first_s=3.5 raw_s=1.6 copy_t=10.0 loaded_t=13.0",
              "MB done=1"]
    res = mb.summarize(0, "\n".join(lines), "", 0, {"loadavg": "0 0 0", "qemu_processes": 0},
                       "2026-12-07 06:00 UTC")
    d = res["derived"]
    assert res["runs"]["single-qd1_fsync-r1"]["cycle_p50_us"] == 15
    assert res["runs"]["single-qd1_fsync-r1"]["write_hits"] == "500"
    assert d["qd1_cycle_p50_rounds"] == [18 / 15, 20 / 15]
    assert abs(d["qd1_cycle_p50"] - 19 / 15) < 1e-9            # median of 18 and 20
    assert d["qd32_iops_rounds"] == [0.8, 0.7] and abs(d["qd32_iops"] - 0.75) < 1e-9
    assert res["systems"]["single"]["memfree_b_per_block"] == 16.0
    assert res["systems"]["mirror"]["memfree_b_per_block"] == 16.125
    assert d["ram_memfree_b_per_block_diff_rounds"] == [0.0, 0.25]
    assert res["systems"]["mirror"]["accounted_b_per_block"] == 16.0
    x = res["resync"]["1"]
    assert x["copy_s"] == 2.0 and x["copy_mb_s"] == 512.0 and x["raw_mb_s"] == 640.0
    assert x["ratio"] == 0.8 and abs(x["ratio_log"] - 1.6 / 3.0) < 1e-9
    mb.write_md(res)
    md = (tmp_path / "mirror.md").read_text()
    assert "| QD32 x 4 jobs 4 KiB random write IOPS | ≥ 0.7x | 0.75x (met) | 0.80x, 0.70x |" in md
    assert "| QD1 4 KiB random write + fsync, p50 of the cycle" in md and "1.27x (met)" in md
    # the data_crc row comes from make bench-cpu's kept run (docs/bench/cpu.json)
    assert re.search(r"\| cost of `data_crc`, guest instructions per op \(`make bench-cpu`, "
                     r"[^|]*\) \| \(stated, no goal\) \| 4 KiB write, new block \+\d+ ", md), md
    assert "The rounds of the QD1 p50 and the QD32 IOPS straddle the goal" in md


def fs_fio_json(iops, p50_ns, sync_p50_ns):
    pct = lambda v: {"50.000000": v, "99.000000": 3 * v, "99.900000": 5 * v}  # noqa: E731
    return json.dumps({"jobs": [{"error": 0, "write": {
        "iops": iops, "total_ios": int(iops * 10),
        "clat_ns": {"mean": p50_ns, "percentile": pct(p50_ns)}},
        "sync": {"total_ios": int(iops * 10),
                 "lat_ns": {"mean": sync_p50_ns, "percentile": pct(sync_p50_ns)}}}]})


def test_fs_bench_ratios_within_each_round(tmp_path, monkeypatch):
    """run_fs_bench: medians of the rounds, their spread, and dm-pmemcache's
    ratios to md and dm-writecache taken round by round, on the page."""
    import run_fs_bench as fb
    lines = []
    for r, (md, pmc, wc) in enumerate([(100, 400, 300), (120, 360, 240)], 1):
        for sys_, iops in (("md", md), ("pmc", pmc), ("wc", wc)):
            lines.append("FIOJSON %s-ext4 small %d %s" % (sys_, r, fs_fio_json(iops, 1e6 / iops, 2e3)))
    runs = fb.parse("\n".join(lines + ["FS sys=md fs=ext4 r=1 fio_rc=0"]))
    assert sorted(runs) == ["md-ext4", "pmc-ext4", "wc-ext4"]
    med, ratios = fb.derive(runs)
    assert med["pmc-ext4"]["iops"]["median"] == 380 and med["md-ext4"]["iops"]["spread"] == 1.2
    assert ratios["ext4"]["md"]["iops"]["rounds"] == [4.0, 3.0]
    assert ratios["ext4"]["md"]["iops"]["median"] == 3.5
    assert ratios["ext4"]["wc"]["iops"]["rounds"] == [400 / 300, 1.5]
    assert "xfs" not in ratios
    monkeypatch.setattr(fb, "FS_MD", tmp_path / "fs.md")
    fb.write_md({"settings": {"date": "2026-12-07 20:00 UTC", "commit": "abc", "boot_s": 600,
                              "load0": "1 1 1", "load1": "1 1 1", "rt": 15, "repeats": 2,
                              "nfiles": 256, "fsize_k": 64, "jobs": 4},
                 "runs": runs, "median": med, "ratios": ratios, "kernel_reports": []})
    md = (tmp_path / "fs.md").read_text()
    assert "| dm-pmemcache | 380 |" in md
    assert "dm-pmemcache / md raid5 alone: IOPS **3.50x** (rounds 4.00x, 3.00x)" in md


def test_the_cpu_profile_edits_apply_to_the_module_as_it_is():
    """make bench-cpu's profiling copy (tests/bench/cpu_profile.py) stamps
    the phases by text edits of the module; when the code under one moved,
    the page said "No profile this run" (data_crc's new fill() did that).
    Each edit must apply exactly once to the sources of this tree."""
    import cpu_profile
    import vm_mutants
    src = Path(__file__).resolve().parent.parent / "dm-pmemcache"
    for name, edits in cpu_profile.EDITS.items():
        vm_mutants.apply_edits((src / name).read_text(), edits)


def test_fs_pressure_bench_asserts_the_caches_made_room(tmp_path, monkeypatch):
    """run_fs_bench --pressure: what each cache did during a timed run, from
    its status before and after; a run that cached fewer new blocks than it
    had free at its start made no room, and the bench fails on it."""
    import run_fs_bench as fb
    pmc = "0 100 pmemcache 16000 10 %d 5 0 0 0 0 %d 0 0 0 %d 0 %d " + " ".join(["0"] * 21)
    wc = "0 100 writecache 0 16000 %d 0 0 0 0 0 0 0 %d %d 0 0"
    lines = []
    for r in (1, 2):
        lines += ["CST pmc-ext4 %d before %s" % (r, pmc % (3000, 100, 10, 20)),
                  "CST pmc-ext4 %d after %s" % (r, pmc % (0, 9100, 400, 20)),
                  "CST wc-ext4 %d before %s" % (r, wc % (2000, 50, 0)),
                  "FIOJSON pmc-ext4 small %d %s" % (r, fs_fio_json(300, 3e3, 2e3)),
                  "FIOJSON wc-ext4 small %d %s" % (r, fs_fio_json(300, 3e3, 2e3)),
                  "FIOJSON md-ext4 small %d %s" % (r, fs_fio_json(100, 1e4, 2e3))]
        # round 2: dm-writecache cached fewer blocks than it had free
        lines.append("CST wc-ext4 %d after %s" % (r, wc % (0, 5050 if r == 1 else 1050, 7)))
    runs = fb.parse("\n".join(lines))
    assert runs["pmc-ext4"]["1"]["cache"] == {"free_at_start": 3000, "new_blocks": 9000,
                                              "written_back": 390}
    assert runs["wc-ext4"]["1"]["cache"] == {"free_at_start": 2000, "new_blocks": 5000,
                                             "blocked_on_freelist": 7}
    assert fb.pressure_missing(runs) == ["wc-ext4 round 2: 1000 new blocks, 2000 free at the start"]
    del runs["wc-ext4"]["2"]
    assert fb.pressure_missing(runs) == []
    med, ratios = fb.derive(runs)
    monkeypatch.setattr(fb, "FS_MD", tmp_path / "fs-pressure.md")
    fb.write_md({"settings": {"date": "2026-12-07 20:00 UTC", "commit": "abc", "boot_s": 600,
                              "load0": "1 1 1", "load1": "1 1 1", "rt": 15, "repeats": 2,
                              "nfiles": 512, "fsize_k": 64, "jobs": 4, "pmem_mb": 64,
                              "pressure": True},
                 "runs": runs, "median": med, "ratios": ratios, "kernel_reports": []})
    md = (tmp_path / "fs-pressure.md").read_text()
    assert "working set twice the cache" in md and "NVDIMM of 64 MiB" in md
    assert "| dm-pmemcache, ext4 | 3 000 | 9 000 | 390 |" in md
