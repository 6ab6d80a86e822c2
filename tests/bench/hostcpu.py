"""The QEMU process's own CPU time, read on the host at marks the guest prints.

Under TCG the guest's CPU is emulated by QEMU's vCPU threads and its
devices' DMA (virtio, the NVDIMM's memory) is QEMU's own work too: the
utime+stime of the QEMU process is what a benchmark run cost the host.
A guest script prints "HOSTMARK NAME" on its output channel; watch()
reads that channel every 20 ms while the guest runs and records, at each
mark, (host time, QEMU CPU s).  The guest should sleep a little after a
mark that starts a measured span (the host reads it within about 20 ms).

Used by run_bench.py (the drain) and run_scale_bench.py (per-write cost).
"""
import os
import subprocess
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.02


def children_map():
    kids = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append((int(p.name), stat[stat.find("(") + 1:stat.rfind(")")]))
    return kids


def find_qemu(root):
    """The QEMU process under run-vm.sh (pid root): a descendant named qemu-system-*."""
    kids, todo = children_map(), [root]
    while todo:
        for pid, comm in kids.get(todo.pop(), []):
            if comm.startswith("qemu-system"):
                return pid
            todo.append(pid)
    return None


def cpu_s(pid):
    """utime + stime of a process, seconds (all its threads)."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def host_load():
    return {"loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "qemu_processes": len([1 for kids in children_map().values()
                                   for _, c in kids if c.startswith("qemu-system")])}


def watch(cmd, out_path, on_line=None):
    """Run the guest command CMD to its end, reading the script's output
    file OUT_PATH as it grows.  Returns (exit status, marks): marks is
    {name: (host time, QEMU CPU s or None)} for each "HOSTMARK name" line;
    every other complete line goes to on_line(line)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    marks, qemu, buf, pos = {}, None, "", 0
    try:
        while True:
            done = proc.poll() is not None
            if qemu is None and not done:
                qemu = find_qemu(proc.pid)
            try:
                with open(out_path, errors="replace") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
            except OSError:
                chunk = ""
            if chunk:
                buf += chunk
                *lines, buf = buf.split("\n")
                for l in lines:
                    if l.startswith("HOSTMARK "):
                        marks[l.split()[1]] = (time.time(), cpu_s(qemu) if qemu else None)
                    elif on_line:
                        on_line(l)
            if done:
                break
            time.sleep(POLL_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return proc.returncode, marks


def span(marks, m0, m1):
    """(QEMU CPU s, host wall s) between two marks, or (None, None)."""
    a, b = marks.get(m0), marks.get(m1)
    if not a or not b or a[1] is None or b[1] is None:
        return None, None
    return b[1] - a[1], b[0] - a[0]
