"""VM power cuts through dm-pmemcache over md raid5.

A writer in the guest overwrites 64 blocks of the cache with whole-block
and single-sector writes, each one synchronous (O_DIRECT + fsync, i.e. a
REQ_PREFLUSH after the data). It prints "W <seq> <sector> <count>" before
each write and "ACK <seq>" after it. Writeback runs all the time (low
watermarks), so writes race with clean marking and eviction. The host
kills QEMU at a random moment, a power cut that keeps exactly what the
guest stored in the NVDIMM file. It then boots again on the same images,
reassembles md, reloads the target and reads every sector: each one must
hold the last acknowledged write that covered it, or the write that was
in flight at the cut. Nothing else is allowed (an older write, a torn
sector, zeros). At least one cut must leave dirty blocks for recovery
(the recovered status says so): else the cuts checked only the origin.

`make test` does a few cuts. PMC_LONG=1 does PMC_POWERCUTS (default 50).
"""
import os
import random
import re
import time


from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
from vm import GuestRun, check_reports

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
CUTS = int(os.environ.get("PMC_POWERCUTS", "50" if LONG else "2"))
NBLOCKS = 64
TABLE_ARGS = "4 high_watermark 2 low_watermark 0"

# The writer loop: numbered, self-describing sector writes, each
# acknowledged on the script's output only after dd with O_DIRECT|fsync returned.
WRITE_LOOP = r"""
head -c 496 /dev/zero | tr '\000' 'x' > /tmp/fill
RANDOM=%(seed)d
echo READY=1
i=0
while true; do
	i=$((i + 1))
	blk=$((RANDOM %% %(nblocks)d))
	if [ $((RANDOM %% 3)) = 0 ]; then
		sec=$((blk * 8 + RANDOM %% 8)) n=1
	else
		sec=$((blk * 8)) n=8
	fi
	: > /tmp/w
	k=0
	while [ $k -lt $n ]; do
		printf "%%08d %%06d\n" $i $((sec + k)) >> /tmp/w
		cat /tmp/fill >> /tmp/w
		k=$((k + 1))
	done
	echo "W $i $sec $n"
	dd if=/tmp/w of=/dev/mapper/pc bs=512 seek=$sec count=$n oflag=direct \
		conv=fsync,notrunc 2>/dev/null || die "dd $i"
	echo "ACK $i"
done
"""

WRITER = r"""
pmc_init
md_make md0 raid5 4 a
dm_create pc "$(pmc_table md0 '%(args)s')" || die create
""" + WRITE_LOOP

# Every sector of the first %(nblocks)d blocks of /dev/mapper/pc, one
# "S <sector> <stamp>" line each (read_back()).
READ_BACK = r"""
dd if=/dev/mapper/pc of=/tmp/r bs=4096 count=%(nblocks)d iflag=direct 2>/dev/null || die read
s=0
while [ $s -lt %(nsec)d ]; do
	echo "S $s $(dd if=/tmp/r bs=16 skip=$((s * 32)) count=1 2>/dev/null | tr -d '\000\n')"
	s=$((s + 1))
done
"""

CHECK = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
dm_create pc "$(pmc_table md0 '%(args)s')" || die reload
status 2
""" + READ_BACK + r"""dmsetup message pc 0 flush || die flush
dmsetup remove pc
dd if=/dev/md0 of=/tmp/o bs=4096 count=%(nblocks)d iflag=direct 2>/dev/null || die "read md0"
cmp /tmp/r /tmp/o && echo ORIGIN_SAME=1
"""


class Allowed(dict):
    """{sector: the writes it may hold}, and .unlogged: the write the writer
    may have issued after the last acknowledged one with its "W" line lost
    (None when the line of the write in flight was seen)."""
    unlogged = None


def expected_sectors(output):
    """From the writer's output: {sector: allowed seqs} (an Allowed) and the
    count of acknowledged writes. Only whole lines count: a power cut can end
    the output inside a line."""
    ops, acked = {}, set()
    for m in re.finditer(r"^W (\d+) (\d+) (\d+)\n", output, re.M):
        ops[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    for m in re.finditer(r"^ACK (\d+)\n", output, re.M):
        acked.add(int(m.group(1)))
    last = {}
    for i in sorted(acked):
        sec, n = ops[i]
        for s in range(sec, sec + n):
            last[s] = i
    inflight = [i for i in ops if i not in acked]
    assert len(inflight) <= 1, inflight
    allowed = Allowed()
    for s in range(NBLOCKS * 8):
        allowed[s] = {last.get(s, 0)}
        for i in inflight:
            sec, n = ops[i]
            if sec <= s < sec + n:
                allowed[s].add(i)
    if not inflight:
        # The writer prints "W i" before it issues write i, but QEMU empties
        # the virtio-serial queue in its main loop, after the guest's kick:
        # a cut can find write i in pmem and its line not yet in the log.
        allowed.unlogged = max(acked, default=0) + 1
    return allowed, len(acked)


def lost_writes(got, allowed):
    """{sector: (what it holds, what it may hold)} for every sector of the
    read-back @got that the oracle @allowed (expected_sectors()) does not
    explain. The unlogged write may be in any sectors the writer's writes
    cover: one sector, or one whole block."""
    write = getattr(allowed, "unlogged", None)
    unlogged = sorted(s for s in got if got[s] == write and got[s] not in allowed[s])
    one_write = len(unlogged) == 1 or (len(unlogged) == 8 and unlogged[0] % 8 == 0
                                       and unlogged[-1] == unlogged[0] + 7)
    return {s: (got[s], sorted(allowed[s])) for s in got
            if got[s] not in allowed[s] and not (s in unlogged and one_write)}


def read_back(res):
    got = {}
    for m in re.finditer(r"^S (\d+) ?(.*)$", res.output, re.M):
        s, hdr = int(m.group(1)), m.group(2).strip()
        if not hdr:
            got[s] = 0
            continue
        hm = re.fullmatch(r"(\d{8}) (\d{6})", hdr)
        got[s] = int(hm.group(1)) if hm and int(hm.group(2)) == s else ("garbage", hdr)
    return got


def power_cut(vm, proc):
    """Kill QEMU at once (see VM.power_cut)."""
    vm.power_cut(proc)


def cut_console(boot):
    """The script output of a boot ended by a power cut (vm.start's
    BootFiles); its console is checked for kernel reports up to the cut."""
    check_reports(GuestRun.load(None, boot))
    return boot.read()[1]


def wait_for_acks(boot, want, seconds=400):
    """Poll the script output of a WRITER boot until it acknowledged `want`
    writes; fail if the writer stopped or is too slow."""
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        _, text, result = boot.read()
        if "FAIL:" in text or "@@EXIT" in result:
            raise AssertionError("writer stopped:\n" + text[-3000:])
        if "READY=1" in text and len(re.findall(r"^ACK \d+", text, re.M)) >= want:
            return
        time.sleep(0.2)
    raise AssertionError("writer too slow:\n" + text[-3000:])


def one_cut(vm, rng):
    proc, log = vm.start(PRELUDE + WRITER % dict(args=TABLE_ARGS, seed=rng.randrange(1, 30000),
                                                 nblocks=NBLOCKS), timeout=600)
    try:
        wait_for_acks(log, rng.randrange(5, 120))
        time.sleep(rng.random() * 0.5)
    finally:
        power_cut(vm, proc)
    output = cut_console(log)
    allowed, nacked = expected_sectors(output)
    assert nacked > 0, output[-3000:]

    res = vm.run(PRELUDE + CHECK % dict(args=TABLE_ARGS, nblocks=NBLOCKS,
                                        nsec=NBLOCKS * 8), timeout=600)
    got = read_back(res)
    assert len(got) == NBLOCKS * 8
    lost = lost_writes(got, allowed)
    assert res.value("ORIGIN_SAME") == "1"
    return nacked, lost, parse_status(res.value("STATUS2"))


def test_power_cuts_lose_no_acknowledged_write(vm, figures):
    rng = random.Random(int(os.environ.get("PMC_SEED", "4242")))
    total_acked, cuts, lost_all, dirty_cuts = 0, 0, {}, 0
    for _ in range(CUTS):
        # a fresh md + cache each time: reuse the VM folder name, new images
        for f in vm.state.glob("*.img"):
            f.unlink()
        nacked, lost, st = one_cut(vm, rng)
        total_acked += nacked
        cuts += 1
        # recovery found dirty blocks: the check read them from pmem
        dirty_cuts += st["dirty"] > 0
        if lost:
            lost_all[cuts] = lost
    wrong = sum(len(v) for v in lost_all.values())
    print("power cuts: %d, acknowledged writes: %d, sectors wrong: %d"
          % (cuts, total_acked, wrong))
    figures["VM power cuts (acknowledged writes)"] = "%d (%d)" % (cuts, total_acked)
    figures["acknowledged writes lost (wrong sectors)"] = wrong
    figures["VM power cuts with dirty blocks at recovery"] = "%d of %d" % (dirty_cuts, cuts)
    assert not lost_all, lost_all
    # the precondition that makes the cuts mean something
    assert dirty_cuts >= 1, "no cut left a dirty block in the cache to recover"

