"""Host tests of the bench report (tests/bench/report.py, run_bench.py):
the figures of docs/benchmarks.md come from these functions, so they are
checked on made-up guest output with known answers."""
import sys
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
