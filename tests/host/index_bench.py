#!/usr/bin/env python3
"""Per-cycle cost of the in-RAM index at a small and a huge cache (issue 15).

Runs tests/host/index_model --bench (the module's pmc_index.c through the
userspace shim) for each size and clock (the clean bitmap with reference
bits, and --old: the linear clock io.c had before), natively for ns and
under callgrind for instructions (deterministic; only the measured cycles
are counted), and prints one table with the ratio of the large size to the
small one.  A cycle is one write (with its share of eviction), one read
and the writeback completions that keep the dirty share.  "index Ir" is
what the module's functions executed (pmc_index.c; for --old also the
linear clock, a copy of the old io.c loop, with what inlined into them),
"all Ir" adds the model's own bookkeeping.

    python3 index_bench.py            # 1 GiB and 1 TiB (about 5 GB of RAM)
    python3 index_bench.py --quick    # 1 GiB and 64 GiB
    python3 index_bench.py --select   # writeback selection, per selected block

--select runs index_model --bench-select (pmc_index_wb_select(), the
module's selection walk, with the lookups and claims of wb_select.c
modelled) and reports, per block selected, the hash lookups, the
instructions of the selection calls only (callgrind, collection toggled
around each call) and ns.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "index_model")

# phases: dirty share in %, or kK = all but K blocks dirty
NEW_PHASES = "1,50,99,k1000"
OLD_PHASES = "1,99,k1000"


def parse_phases(out):
    res = {}
    for line in out.splitlines():
        if line.startswith("phase "):
            kv = dict(re.findall(r"(\w+)=(\S+)", line))
            res[line.split()[1]] = kv
        elif line.startswith("bench "):
            res["_bench"] = dict(re.findall(r"(\w+)=(\S+)", line))
    return res


def run_native(gib, phases, ops, old):
    cmd = [MODEL, "--bench", "--gib", str(gib), "--dirty", phases,
           "--ops", str(ops)] + (["--old"] if old else [])
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    sys.stderr.write("  %s: %.0f s\n" % (" ".join(cmd[1:]), time.time() - t))
    return parse_phases(p.stdout)


def callgrind_costs(path):
    """(total Ir, Ir in functions of pmc_index.c) of one callgrind dump."""
    total = None
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):
                total = int(line.split()[1])
    ann = subprocess.run(["callgrind_annotate", "--inclusive=no",
                          "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    index = 0
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+):(\S+)", line)
        func = m.group(3).split(".")[0] if m else ""
        if func.startswith("pmc_") or func == "old_clock":
            index += int(m.group(1).replace(",", ""))
    return total, index


def run_callgrind(gib, phases, ops, old):
    tmp = tempfile.mkdtemp(prefix="pmc-cg-")
    out = os.path.join(tmp, "cg.out")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           "--callgrind-out-file=" + out, MODEL, "--bench", "--gib",
           str(gib), "--dirty", phases, "--ops", str(ops)] + \
        (["--old"] if old else [])
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    sys.stderr.write("  callgrind %s: %.0f s\n" % (" ".join(cmd[5:]),
                                                   time.time() - t))
    res = parse_phases(p.stdout)
    for dump in glob.glob(out + ".*"):
        trig = None
        with open(dump) as f:
            for line in f:
                m = re.match(r"desc: Trigger: Client Request: (\S+)", line)
                if m:
                    trig = m.group(1)
                    break
        if trig in res:
            total, index = callgrind_costs(dump)
            res[trig]["ir"] = total / ops
            res[trig]["index_ir"] = index / ops
    shutil.rmtree(tmp, ignore_errors=True)
    return res


SELECT_PHASES = "p1,w,p50,q50"


def parse_select(out):
    res = {}
    for line in out.splitlines():
        if line.startswith("select "):
            res[line.split()[1]] = dict(re.findall(r"(\w+)=(\S+)", line))
        elif line.startswith("bench-select "):
            res["_bench"] = dict(re.findall(r"(\w+)=(\S+)", line))
    return res


def run_select(gib, ops, callgrind):
    cmd = [MODEL, "--bench-select", "--gib", str(gib), "--ops", str(ops),
           "--phases", SELECT_PHASES]
    tmp = None
    if callgrind:
        tmp = tempfile.mkdtemp(prefix="pmc-cg-")
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
               "--collect-atstart=no", "--callgrind-out-file=" + out] + cmd
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    sys.stderr.write("  %s: %.0f s\n" % (" ".join(cmd[-8:]), time.time() - t))
    res = parse_select(p.stdout)
    if callgrind:
        for dump in glob.glob(out + ".*"):
            trig = None
            total = None
            with open(dump) as f:
                for line in f:
                    m = re.match(r"desc: Trigger: Client Request: (\S+)", line)
                    if m:
                        trig = m.group(1)
                    if line.startswith("totals:"):
                        total = int(line.split()[1])
            if trig in res and total is not None:
                res[trig]["ir_per_block"] = total / float(res[trig]["selected"])
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def main_select(a, sizes):
    per = {}
    for g in sizes:
        per[g] = {"native": {} if a.no_native else run_select(g, a.ops, False)}
        if not a.no_callgrind:
            per[g]["cg"] = run_select(g, a.ops, True)
    s0, s1 = ("%g GiB" % s for s in sizes)
    head = ["phase", "chunk blocks", "lookups " + s0, "lookups " + s1,
            "Ir " + s0, "Ir " + s1, "ratio", "ns " + s0, "ns " + s1]
    print("per selected block (pD: any block may go, D %% dirty; w: whole "
          "stripes only; qD: stripe_blocks 1)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for ph in SELECT_PHASES.split(","):
        n = [per[g]["native"].get(ph, {}) for g in sizes]
        c = [per[g].get("cg", {}).get(ph, {}) for g in sizes]
        ir = [float(x["ir_per_block"]) if "ir_per_block" in x else None
              for x in c]
        row = [ph, n[1].get("chunk", "-")]
        row += ["%.2f" % float(x["looks_per_block"]) if x else "-" for x in n]
        row += ["%.0f" % v if v is not None else "-" for v in ir]
        row.append(ratio(ir[0], ir[1]) if None not in ir else "-")
        row += ["%.0f" % float(x["ns_per_block"]) if x else "-" for x in n]
        print("| " + " | ".join(str(x) for x in row) + " |")
    for g in sizes:
        b = per[g]["native"].get("_bench", {})
        print("%g GiB: slots=%s ram_bytes_per_slot=%s fill_s=%s build_s=%s"
              % (g, b.get("slots"), b.get("ram_bytes_per_slot"),
                 b.get("fill_s"), b.get("build_s")))
    return 0


def ratio(a, b):
    return "%.2f" % (b / a) if a and b is not None else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="1 and 64 GiB instead of 1 GiB and 1 TiB")
    ap.add_argument("--sizes", default=None, help="GiB,GiB (small,large)")
    ap.add_argument("--ops", type=int, default=200000)
    ap.add_argument("--old-ops", type=int, default=4000)
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-old", action="store_true")
    ap.add_argument("--select", action="store_true",
                    help="writeback selection instead of the cycle bench")
    a = ap.parse_args()
    if not os.path.exists(MODEL):
        subprocess.run(["make", "-s", "-C", HERE, "index_model"], check=True)
    sizes = [float(x) for x in (a.sizes or ("1,64" if a.quick else "1,1024")).split(",")]
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        a.no_callgrind = True
    if a.select:
        return main_select(a, sizes)
    runs = [("bitmap", NEW_PHASES, a.ops, False)]
    if not a.no_old:
        runs.append(("old", OLD_PHASES, a.old_ops, True))
    rows = []
    for clock, phases, ops, old in runs:
        per = {}
        for g in sizes:
            r = {}
            if not a.no_native:
                r["native"] = run_native(g, phases, ops, old)
            if not a.no_callgrind:
                r["cg"] = run_callgrind(g, phases, ops, old)
            per[g] = r
        for ph in phases.split(","):
            row = [clock, ph]
            for key, field in (("native", "ns_per_cycle"), ("cg", "ir"),
                               ("cg", "index_ir")):
                vals = []
                for g in sizes:
                    v = per[g].get(key, {}).get(ph, {}).get(field)
                    vals.append(float(v) if v is not None else None)
                row += ["%.0f" % v if v is not None else "-" for v in vals]
                row.append(ratio(vals[0], vals[1]))
            hit = per[sizes[1]].get("native", per[sizes[1]].get("cg", {})).get(ph, {})
            row.append(hit.get("read_hit_pct", "-"))
            rows.append(row)
    s0, s1 = ("%g GiB" % s for s in sizes)
    head = ["clock", "dirty %", "ns " + s0, "ns " + s1, "ratio",
            "all Ir " + s0, "all Ir " + s1, "ratio",
            "index Ir " + s0, "index Ir " + s1, "ratio", "read hits % " + s1]
    print("per cycle (1 write + 1 read + writeback completions); "
          "k1000 = all but 1000 blocks dirty")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
