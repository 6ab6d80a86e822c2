"""Bad input at scale: generated table lines and messages (issue 7, part 4).

The host generates, from a fixed seed, table lines that each carry at
least one defect (wrong argument counts, huge, negative and non-numeric
numbers, unknown and repeated features, feature counts that lie, wrong
devices, pmem that is too small, block sizes that are not powers of two,
watermarks the wrong way round) plus valid lines at the edges of what is
allowed, and the same for messages. One guest boot feeds them all to
dmsetup in a single loop and records, per line, dmsetup's status and the
kernel lines it caused (dmesg -c).

Every bad line must be refused, leave no device behind and cause exactly
one "device-mapper: table:" line (the reason: dm core prints ti->error as
"<dev>: pmemcache: <reason> (-EINVAL)", or its own reason for a zero
length or a table larger than the kernel allows) plus dm core's own
"device-mapper: ioctl: error adding target to table", and nothing else.
A bad message causes exactly one "device-mapper:" line (ours, or dm
core's for '@' messages and sectors outside the device). Every edge line
and valid message must be accepted without any kernel line. A table that
works is used for I/O afterwards.

`make test` runs 150 table lines and 60 messages; `make test-long`
(PMC_LONG=1) 2,000 and 600; PMC_FUZZ_TABLES and PMC_FUZZ_MESSAGES choose.
"""
import os
import random
import re
import struct

from test_target import PRELUDE, parse_status, pmemcache_module  # noqa: F401
from test_target import run as run_target

LONG = os.environ.get("PMC_LONG", os.environ.get("LONG", "0")) not in ("", "0")
# Under TCG a line costs 0.15 to 0.3 s of guest time (2,000 tables and 600
# messages: 6.5 minutes, 250 and 100: 1.5), so make test runs a short form
# of about a minute.
N_TABLES = int(os.environ.get("PMC_FUZZ_TABLES", "2000" if LONG else "150"))
N_MESSAGES = int(os.environ.get("PMC_FUZZ_MESSAGES", "600" if LONG else "60"))
SEED = int(os.environ.get("PMC_SEED", "77"))

ORIGIN, PMEM = "/dev/md0", "/dev/pmem0"
# Partitions of pmem0 (MBR written by the guest script): p1 8 KiB (too
# small for any cache), p2 12 KiB (exactly one 4 KiB block: an edge that
# must work), p3 1 KiB (less than a page).
PARTS = [(2048, 16), (4096, 24), (6144, 2)]
SMALL_PMEM, ONE_BLOCK_PMEM, TINY_PMEM = "/dev/pmem0p1", "/dev/pmem0p2", "/dev/pmem0p3"

# name -> (min, max) for features with a value, None for flags
FEATURES = {
    "high_watermark": (0, 100), "low_watermark": (0, 100),
    "writeback_jobs": (1, 65536), "max_age": (0, 86400000),
    "stripe_blocks": (0, 4096), "full_wait": (0, 60000), "seq_bypass": (0, 1048576),
    "resync_rate": (0, 1048576),
    "writeback": None, "flush_on_suspend": None, "cleaner": None, "format": None,
}
WB_MODES = ["pfn", "bounce", "auto"]
BAD_NUMBERS = ["-1", "-4096", "abc", "4k", "0x10", "1.5", "1e3", "+-1", "--5",
               "18446744073709551616", "99999999999999999999999999",
               "4294967296", "4294967346", "4294971392", "4294967297", "0x1000"]
BAD_DEVICES = ["/dev/nonexistent", "/dev/md9", "/dev/pmem9", "/dev/null", "/dev/zero",
               "999:999", "254:250", "99999:1", "0:0", "/dev/vda", "/dev/vdb",
               "nonsense", "/", "/dev"]
WORDS = ["bogus", "high_water", "watermark", "cleane", "cleaner2", "formatx",
         "flush", "writebackjobs", "max-age", "discard", "1", "0", "-", "pfn"]


def _val(rng, name):
    lo, hi = FEATURES[name]
    return str(rng.choice([lo, hi, rng.randint(lo, hi)]))


def valid_features(rng, k=None, allow_format=True):
    """The words of a valid feature list (without the count)."""
    names = [n for n in FEATURES if allow_format or n != "format"]
    k = rng.randint(0, len(names)) if k is None else k
    chosen = rng.sample(names, k)
    words = []
    high = low = None
    for n in chosen:
        words.append(n.upper() if rng.random() < 0.1 else n)
        if n == "writeback":
            words.append(rng.choice(WB_MODES[1:]))  # pfn needs a capable origin
        elif FEATURES[n]:
            words.append(_val(rng, n))
            if n == "high_watermark":
                high = words[-1]
            if n == "low_watermark":
                low = words[-1]
    # keep low <= high, with the defaults 50/45 for the missing one
    hi = int(high) if high is not None else 50
    lo = int(low) if low is not None else 45
    if lo > hi:
        i = words.index(low) if low is not None else None
        if i is not None:
            words[i] = str(rng.randint(0, hi))
        else:
            words[words.index(high)] = str(rng.randint(45, 100))
    return words


def table(start, length, args):
    return " ".join([str(start), str(length), "pmemcache"] + args)


def edge_tables(rng):
    """Valid lines at the edges: all must be accepted."""
    t = [
        table(0, "SZ", [ORIGIN, ONE_BLOCK_PMEM, "4096"]),
        table(0, "SZ", [ORIGIN, ONE_BLOCK_PMEM, "4096", "0"]),
        table(0, 8, [ORIGIN, PMEM, "4096", "1", "format"]),
        table(0, "SZ-1", [ORIGIN, PMEM, "512", "1", "format"]),
        table(0, "SZ", [ORIGIN, PMEM, "4096", "5", "high_watermark", "100",
                        "low_watermark", "100", "format"]),
        table(0, "SZ", [ORIGIN, PMEM, "4096", "5", "high_watermark", "0",
                        "low_watermark", "0", "format"]),
        table(0, "SZ", [ORIGIN, PMEM, "2048", "19", "format", "cleaner",
                        "flush_on_suspend", "writeback", "bounce", "max_age", "86400000",
                        "writeback_jobs", "65536", "low_watermark", "0",
                        "high_watermark", "100", "stripe_blocks", "4096", "full_wait",
                        "60000", "seq_bypass", "1048576"]),
        table(0, "SZ", [ORIGIN, PMEM, "1024", "5", "writeback_jobs", "1", "max_age",
                        "1", "FORMAT"]),
    ]
    while len(t) < 24:
        bs = rng.choice(["512", "1024", "2048", "4096"])
        f = valid_features(rng, allow_format=False) + ["format"]
        t.append(table(0, rng.choice(["SZ", "SZ", 8, 4096]),
                       [ORIGIN, PMEM, bs, str(len(f))] + f))
    return t


def bad_table(rng):
    """One line with at least one defect, and what kind it is."""
    kind = rng.choice(["argc", "bs", "count", "unknown", "value", "missing",
                       "watermarks", "duplicate", "device", "length", "pmem"])
    bs = rng.choice(["512", "1024", "2048", "4096"])
    f = valid_features(rng)
    dev = [ORIGIN, PMEM]
    start, length = 0, "SZ"
    if kind == "argc":
        args = rng.choice([[], [ORIGIN], [ORIGIN, PMEM], [PMEM], [bs]])
        return kind, table(start, length, args)
    if kind == "bs":
        bs = rng.choice(BAD_NUMBERS + [
            str(rng.choice([0, 1, 2, 256, 511, 8192, 16384, 65536, 1 << 20])),
            str(rng.choice([n for n in range(513, 4096, 7) if n & (n - 1)])),
            str(rng.choice([512, 1024, 2048, 4096]) + 2 ** 32)])
    elif kind == "count":
        good = len(f)
        lies = [str(good + d) for d in (-3, -2, -1, 1, 2, 3, 14)] + [
            str(good + 2 ** 32), "-%d" % good, "abc", "14", "20", "4294967295"]
        f = [rng.choice([c for c in lies if c != str(good)])] + f
        return kind, table(start, length, dev + [bs] + f)
    elif kind == "unknown":
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_")
                       for _ in range(rng.randint(1, 20)))
        f.insert(rng.randint(0, len(f)),
                 rng.choice(WORDS + [word if word not in FEATURES else "x" + word]))
    elif kind == "value":
        name = rng.choice([n for n in FEATURES if FEATURES[n]] + ["writeback"])
        if name == "writeback":
            v = rng.choice(["sideways", "PFNX", "0", "none", "bounce2", "-"])
        else:
            lo, hi = FEATURES[name]
            v = rng.choice(BAD_NUMBERS + [str(hi + 1), str(hi + 2 ** 32), str(lo - 1)])
        # drop an existing occurrence, then add the bad one
        f = _without(f, name) + [name, v]
    elif kind == "missing":
        name = rng.choice([n for n in FEATURES if FEATURES[n]] + ["writeback"])
        f = _without(f, name) + [name]
    elif kind == "watermarks":
        hi = rng.randint(0, 99)
        lo = rng.randint(hi + 1, 100)
        choice = rng.random()
        if choice < 0.6:
            f = ["high_watermark", str(hi), "low_watermark", str(lo)]
        elif choice < 0.8 and lo > 50:
            f = ["low_watermark", str(lo)]
        elif hi < 45:
            f = ["high_watermark", str(hi)]
        else:
            f = ["low_watermark", str(lo), "high_watermark", str(hi)]
        if rng.random() < 0.5:
            f += ["cleaner"]
    elif kind == "duplicate":
        if not f:
            f = valid_features(rng, k=2)
        name = rng.choice([w for w in f if w.lower() in FEATURES])
        i = f.index(name)
        dup = f[i:i + (2 if FEATURES[name.lower()] or name.lower() == "writeback" else 1)]
        f = f + [dup[0].swapcase() if rng.random() < 0.3 else dup[0]] + dup[1:]
    elif kind == "device":
        which = rng.random()
        if which < 0.35:
            dev[0] = rng.choice(BAD_DEVICES)
        elif which < 0.7:
            dev[1] = rng.choice(BAD_DEVICES + ["/dev/vdf", "/dev/mapper/slice"])
        else:
            dev = rng.choice([[ORIGIN, ORIGIN], [PMEM, PMEM], [PMEM, ORIGIN],
                              ["/dev/vdf", "/dev/vdf"], [ORIGIN, "/dev/md0p1"]])
    elif kind == "length":
        start, length = rng.choice([(0, 0), (8, "SZ"), (0, "SZ+8"), (0, "SZ+1"),
                                    (0, 2 ** 62), (0, 2 ** 40), (4096, "SZ")])
    elif kind == "pmem":
        dev[1] = rng.choice([SMALL_PMEM, TINY_PMEM, "/dev/mapper/slice"])
        if dev[1] == SMALL_PMEM:
            bs = rng.choice(["512", "4096"])
    f = [str(len(f))] + f if (f or rng.random() < 0.5) else []
    return kind, table(start, length, dev + [bs] + f)


def _without(words, name):
    out, skip = [], 0
    for i, w in enumerate(words):
        if skip:
            skip -= 1
            continue
        if w.lower() == name:
            skip = 1 if (FEATURES[name] or name == "writeback") else 0
            continue
        out.append(w)
    return out


VALID_MESSAGES = ["flush", "clear_stats", "cleaner", "nocleaner", "FLUSH", "Clear_Stats",
                  "NOCLEANER"]
# "<feature> <value>" messages whose outcome does not depend on the state
TUNABLE_MESSAGES = [("writeback_jobs 64", True), ("full_wait 100", True),
                    ("seq_bypass 0", True), ("stripe_blocks 0", True),
                    ("WRITEBACK_JOBS 1024", True), ("max_age 5000", True),
                    ("high_watermark 101", False), ("writeback_jobs 4294967297", False),
                    ("full_wait 60001", False), ("low_watermark 4294967296", False),
                    ("writeback_jobs 0", False), ("seq_bypass 1e3", False),
                    ("format 1", False), ("cleaner 1", False)]


def messages(rng, n):
    """(sector+words, valid) pairs."""
    out = [("0 nocleaner", True), ("0 bogus", False), ("%d flush" % 2 ** 40, False),
           ("0 @bogus", False)]
    while len(out) < n:
        r = rng.random()
        if r < 0.2:
            m = "0 " + rng.choice(VALID_MESSAGES)
            out.append((m, True))
            continue
        if r < 0.35:
            m, ok = rng.choice(TUNABLE_MESSAGES)
            out.append(("0 " + m, ok))
            continue
        word = rng.choice(VALID_MESSAGES + WORDS)
        kind = rng.choice(["extra", "word", "long", "core", "sector"])
        if kind == "extra":
            m = "0 %s %s" % (word, rng.choice(WORDS + VALID_MESSAGES))
        elif kind == "word":
            m = "0 " + rng.choice([w + "x" for w in VALID_MESSAGES] + WORDS[:6] +
                                  ["flus", "clear-stats", "clean", "no_cleaner"])
        elif kind == "long":
            m = "0 " + "".join(rng.choice("abcdefghij_0123456789") for _ in range(
                rng.randint(33, 200)))
        elif kind == "core":
            m = "0 " + rng.choice(["@bogus", "@cancel_deferred_remove now", "@stats_bogus",
                                   "@"])
        else:
            m = "%d %s" % (rng.choice([2 ** 40, 2 ** 62, 10 ** 15]), word)
        out.append((m, False))
    return out


def mbr(parts):
    """A DOS partition table with Linux partitions at (lba, sectors)."""
    b = bytearray(512)
    for i, (lba, n) in enumerate(parts):
        e = 446 + 16 * i
        b[e + 4] = 0x83
        b[e + 8:e + 12] = lba.to_bytes(4, "little")
        b[e + 12:e + 16] = n.to_bytes(4, "little")
    b[510:512] = b"\x55\xaa"
    return bytes(b)


# One bad line per reason that the test looks for, whatever the count.
SENTINELS = [
    table(0, "SZ", [ORIGIN, PMEM, "4294971392"]),
    table(0, "SZ", [ORIGIN, PMEM, "4096", "4294967297", "cleaner"]),
    table(0, "SZ", [ORIGIN, PMEM, "4096", "1", "cleaner", "format"]),
    table(0, "SZ", [ORIGIN, PMEM, "4096", "2", "cleaner", "CLEANER"]),
    table(0, "SZ", [ORIGIN, PMEM, "4096", "2", "high_watermark", "4294967346"]),
    table(0, "SZ", [ORIGIN, PMEM, "4096", "2", "low_watermark", "51"]),
    table(0, "SZ", [ORIGIN, PMEM, "4096", "1", "bogus"]),
    table(0, "SZ", ["/dev/nonexistent", PMEM, "4096"]),
    table(0, "SZ", [ORIGIN, "/dev/nonexistent", "4096"]),
    table(0, "SZ", [ORIGIN, SMALL_PMEM, "4096"]),
    table(0, "SZ", [ORIGIN, TINY_PMEM, "4096"]),
    table(0, "SZ", [ORIGIN, "/dev/vdf", "4096"]),
    table(0, "SZ", [ORIGIN, "/dev/mapper/slice", "4096"]),
    table(0, "SZ", [ORIGIN, ORIGIN, "4096"]),
    table(0, 0, [ORIGIN, PMEM, "4096"]),
    table(0, 2 ** 62, [ORIGIN, PMEM, "4096"]),
]


def generate(seed, n_tables, n_messages):
    rng = random.Random(seed)
    edges = edge_tables(rng)
    lines = [(t, True) for t in edges] + [(t, False) for t in SENTINELS]
    kinds = {}
    while len(lines) < n_tables:
        kind, t = bad_table(rng)
        kinds[kind] = kinds.get(kind, 0) + 1
        lines.append((t, False))
    # edges first: "4096" alone on p2 must come before anything formats it
    head, tail = lines[:2], lines[2:]
    rng.shuffle(tail)
    return head + tail, messages(rng, n_messages), kinds


# The guest side: one dmsetup call per line, with the kernel lines it caused.
FUZZ = r"""
pmc_init
dd if=/test/mbr of=/dev/pmem0 bs=512 count=1 conv=notrunc 2>/dev/null
blockdev --rereadpt /dev/pmem0 || die rereadpt
for p in 1 2 3; do [ -b /dev/pmem0p$p ] || die "no /dev/pmem0p$p"; done
md_make md0 raid1 2 a
sz=$(blockdev --getsz /dev/md0)
sed -e "s/SZ+8/$((sz + 8))/; s/SZ+1/$((sz + 1))/; s/SZ-1/$((sz - 1))/; s/SZ/$sz/" \
	/test/tables > /tmp/tables
dmesg -n 1
dmesg -c > /dev/null
i=0
while IFS= read -r t; do
	i=$((i + 1))
	# the slice holds all of pmem0, so the partitions cannot be opened
	# while it exists: only for the lines that use it
	case $t in
	*/dev/mapper/slice*) dm_create slice "0 64 linear /dev/pmem0 8192" || die slice ;;
	esac
	klog_run T$i dm_try f$i "$t"
	[ ! -b /dev/mapper/slice ] || dmsetup remove slice || die "remove slice"
done < /tmp/tables
echo "LEFT=$(dmsetup ls | grep -c '^f[0-9]')"
# messages to a working cache
dm_create pc "0 $sz pmemcache /dev/md0 /dev/pmem0 4096 1 format" || die "valid table"
dd if=/dev/urandom of=/tmp/pat bs=64k count=16 2>/dev/null
dd if=/tmp/pat of=/dev/mapper/pc bs=64k oflag=direct 2>/dev/null || die "write pc"
dmesg -c > /dev/null
set -f
i=0
while IFS= read -r m; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	klog_run M$i dmsetup message pc $m
done < /test/messages
set +f
dmsetup message pc 0 flush || die flush
dmsetup remove pc || die "remove pc"
dd if=/dev/md0 of=/tmp/back bs=64k count=16 iflag=direct 2>/dev/null || die "read md0"
cmp /tmp/pat /tmp/back && echo DATA_OK=1
klog_summary
"""


def klog(res):
    """{tag: (rc, table lines, ioctl lines, other lines, reason)} from klog_summary."""
    return {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)),
                         int(m.group(5)), m.group(6))
            for m in re.finditer(r"^R (\S+) (\d+) (\d+) (\d+) (\d+)\|(.*?)\r?$",
                                 res.output, re.M)}


# rc != 0, one reason line, dm core's ioctl line, nothing else
REFUSED = (1, 1, 1, 0)
ACCEPTED = (0, 0, 0, 0)


def test_fuzzed_tables_and_messages_are_refused(vm, tmp_path, figures):
    lines, msgs, kinds = generate(SEED, N_TABLES, N_MESSAGES)
    (tmp_path / "tables").write_text("".join(t + "\n" for t, _ in lines))
    (tmp_path / "messages").write_text("".join(m + "\n" for m, _ in msgs))
    (tmp_path / "mbr").write_bytes(mbr(PARTS))
    files = [(tmp_path / n, "/test/" + n) for n in ("tables", "messages", "mbr")]
    res = vm.run(PRELUDE + FUZZ, files=files, timeout=1500)
    got = klog(res)

    wrong = []
    for i, (t, ok) in enumerate(lines, 1):
        rc, nt, ni, no, why = got["T%d" % i]
        if (rc, nt, ni, no) != (ACCEPTED if ok else REFUSED):
            wrong.append("%s -> rc %d, %d table, %d ioctl, %d other lines: %s"
                         % (t, rc, nt, ni, no, why))
    for i, (m, ok) in enumerate(msgs, 1):
        rc, nt, ni, no, why = got["M%d" % i]
        if (rc, nt, ni, no) != (ACCEPTED if ok else (1, 0, 0, 1)):
            wrong.append("message %s -> rc %d, %d lines: %s" % (m, rc, nt + ni + no, why))
    refused = sum(1 for i in range(len(lines)) if got["T%d" % (i + 1)][0])
    mrefused = sum(1 for i in range(len(msgs)) if got["M%d" % (i + 1)][0])
    figures["fuzzed tables (refused)"] = "%d (%d)" % (len(lines), refused)
    figures["fuzzed messages (refused)"] = "%d (%d)" % (len(msgs), mrefused)
    figures["fuzz boot: oopses/WARNINGs"] = len(res.reports())
    print("fuzz: %d tables (%d valid edges), %d refused; %d messages, %d refused; "
          "oopses 0; defects %s" % (len(lines), sum(ok for _, ok in lines), refused,
                                    len(msgs), mrefused, sorted(kinds.items())))
    assert not wrong, "%d wrong:\n%s" % (len(wrong), "\n".join(wrong[:40]))
    assert res.value("LEFT") == "0"
    assert res.value("DATA_OK") == "1"
    # the documented reasons are among those seen
    reasons = "\n".join(v[4] for v in got.values())
    for why in ("Invalid block size", "Unrecognised feature", "given more than once",
                "low_watermark is above", "Number of feature arguments differs",
                "Origin device lookup failed", "pmem device lookup failed",
                "pmem device is too small", "pmem device is empty", "not a DAX-capable",
                "not synchronous", "zero-length target", "too large device",
                "Origin and pmem device are the same", "unrecognised message",
                "Target message sector outside device", "Unsupported message sent to DM core"):
        assert why in reasons, why


# ---- corrupted metadata ------------------------------------------------

def crc32c(seed, data):
    """The kernel's crc32c(seed, buf, len): reflected 0x82F63B78, no inversions."""
    crc = seed
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc


# struct pmc_super (docs/format.md): name -> (offset, struct format)
SB = {"magic": (0, "<Q"), "version": (8, "<I"), "sb_size": (12, "<I"),
      "block_size": (16, "<I"), "record_size": (20, "<I"), "features": (24, "<Q"),
      "origin_uuid": (48, "<Q"), "origin_id_kind": (64, "<I"), "record_seed": (68, "<I"),
      "origin_sectors": (72, "<Q"), "pmem_bytes": (80, "<Q"), "n_blocks": (88, "<Q"),
      "records_offset": (96, "<Q"), "data_offset": (104, "<Q"), "csum": (252, "<I")}


def sb_csum(sb):
    tmp = bytearray(sb[:256])
    tmp[0:8] = bytes(8)
    tmp[252:256] = bytes(4)
    return crc32c(0xFFFFFFFF, tmp)


def sb_set(page, field, value, fix_csum=True):
    off, fmt = SB[field]
    p = bytearray(page)
    struct.pack_into(fmt, p, off, value)
    if fix_csum:
        struct.pack_into("<I", p, 252, sb_csum(p))
    return bytes(p)


def sb_get(page, field):
    off, fmt = SB[field]
    return struct.unpack_from(fmt, page, off)[0]


def rec_set(page, slot, seed, **fields):
    """Rewrite record @slot (in its 4 KiB page) with a correct checksum."""
    p = bytearray(page)
    o = (4096 + 32 * slot) % 4096
    oblock, seq, valid, _, state, _ = struct.unpack_from("<QQIIII", p, o)
    oblock = fields.get("oblock", oblock)
    valid = fields.get("valid", valid)
    state = fields.get("state", state)
    struct.pack_into("<QQII", p, o, oblock, seq, valid, 0)
    struct.pack_into("<I", p, o + 24, state)
    body = struct.pack("<I", slot) + bytes(p[o:o + 24]) + struct.pack("<I", state)
    struct.pack_into("<I", p, o + 28, crc32c(seed, body))
    return bytes(p)


def sb_cases(sb):
    """(name, page, expected reason) for superblock corruptions: each
    field with a correct checksum (so that the field's own check is what
    refuses it), and the checksum itself."""
    g = lambda f: sb_get(sb, f)  # noqa: E731
    flip = bytearray(sb)
    flip[100] ^= 0x10  # n_blocks, checksum left as it was
    return [
        ("magic-other", sb_set(sb, "magic", 0x1122334455667788), "not a pmemcache superblock"),
        ("magic-zero", sb_set(sb, "magic", 0), "not a pmemcache superblock"),
        ("version", sb_set(sb, "version", 2), "unsupported superblock version"),
        ("version-0", sb_set(sb, "version", 0), "unsupported superblock version"),
        ("sb_size", sb_set(sb, "sb_size", 512), "unknown layout"),
        ("record_size", sb_set(sb, "record_size", 64), "unknown layout"),
        ("records_offset", sb_set(sb, "records_offset", 8192), "unknown layout"),
        # bit 0 is data_crc; any other is unknown
        ("features", sb_set(sb, "features", 2), "unsupported features"),
        ("block_size", sb_set(sb, "block_size", 2048), "block size differs"),
        ("block_size-odd", sb_set(sb, "block_size", 3000), "block size differs"),
        ("pmem_bytes-big", sb_set(sb, "pmem_bytes", g("pmem_bytes") * 2), "smaller than the cache"),
        ("pmem_bytes-small", sb_set(sb, "pmem_bytes", g("pmem_bytes") // 2), "geometry is inconsistent"),
        ("n_blocks", sb_set(sb, "n_blocks", g("n_blocks") + 1), "geometry is inconsistent"),
        ("n_blocks-0", sb_set(sb, "n_blocks", 0), "geometry is inconsistent"),
        ("n_blocks-max", sb_set(sb, "n_blocks", 2 ** 64 - 1), "geometry is inconsistent"),
        ("data_offset", sb_set(sb, "data_offset", g("data_offset") + 4096), "geometry is inconsistent"),
        ("origin_sectors", sb_set(sb, "origin_sectors", g("origin_sectors") + 8), "origin size differs"),
        ("origin_uuid", sb_set(sb, "origin_uuid", g("origin_uuid") ^ 1), "origin UUID differs"),
        ("origin_id_kind", sb_set(sb, "origin_id_kind", 0), "origin UUID differs"),
        ("record_seed", sb_set(sb, "record_seed", g("record_seed") & ~1), "record seed is invalid"),
        ("csum", sb_set(sb, "csum", g("csum") ^ 0x400, fix_csum=False), "checksum mismatch"),
        ("n_blocks-csum", bytes(flip), "checksum mismatch"),
    ]


SETUP = r"""
pmc_init
md_make md0 raid1 2 a
dm_create pc "$(pmc_table md0 '4 high_watermark 100 low_watermark 100')" || die create
fio_job meta /dev/mapper/pc %(job)s
status 1
dmsetup remove pc
"""

# Each case: write its page(s), try the table, put the original page back.
CORRUPT = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb 2>&1 || die assemble
table="$(pmc_table md0 '4 high_watermark 100 low_watermark 100')"
dmesg -n 1
dmesg -c > /dev/null
while read -r name page; do
	dd if=/test/c/$name of=/dev/pmem0 bs=4096 seek=$page count=1 conv=notrunc oflag=direct 2>/dev/null || die "dd $name"
	klog_run $name dm_try c "$table"
	dd if=/test/c/orig.$page of=/dev/pmem0 bs=4096 seek=$page count=1 conv=notrunc oflag=direct 2>/dev/null || die "restore $name"
done < /test/c/list
klog_summary
# repaired as documented: a torn record is dead, the rest loads
dm_create pc "$table" || die "original refused"
status 2
fio_check meta /dev/mapper/pc %(job)s
dmsetup remove pc
# an interrupted format (magic FORMATTING) is formatted again
dd if=/test/c/formatting of=/dev/pmem0 bs=4096 count=1 conv=notrunc oflag=direct 2>/dev/null
dm_create pc "$table" || die "interrupted format refused"
status 3
dmsetup remove pc
"""
META_JOB = "--rw=write --bs=4k --size=1m --offset=0"


def test_corrupted_metadata_is_refused_or_repaired(vm, tmp_path, figures):
    """Boot 1 fills a cache; the host corrupts superblock fields and
    records in copies of the pmem pages; boot 2 tries every copy."""
    res = run_target(vm, SETUP % dict(job=META_JOB))
    dirty = parse_status(res.value("STATUS1"))["dirty"]
    assert dirty == 256
    img = (vm.state / "pmem.img").read_bytes()[:8 * 4096]
    sb = img[:4096]
    assert sb_get(sb, "magic") == 0x686361434d454d50  # the namespace starts at 0
    assert sb_csum(sb) == sb_get(sb, "csum")  # our crc32c is the kernel's
    seed = sb_get(sb, "record_seed")
    rec0 = img[4096:8192]  # records of slots 0..127: the first blocks written
    assert struct.unpack_from("<I", rec0, 24)[0] == 1  # slot 0 is DIRTY

    cases = [(n, 0, p, why) for n, p, why in sb_cases(sb)]
    # torn (checksum wrong) and dead (state/valid invalid) records: loaded
    # without them, as after a crash
    torn = bytearray(rec0)
    torn[5 * 32 + 29] ^= 0xff
    repaired = [("rec-torn", 1, bytes(torn)),
                ("rec-state", 1, rec_set(rec0, 6, seed, state=7)),
                ("rec-valid", 1, rec_set(rec0, 7, seed, valid=0x1ff))]
    # a record with a correct checksum beyond the end of the origin (no
    # crash makes one): dropped, with one error line
    beyond = ("rec-beyond", 1, rec_set(rec0, 3, seed, oblock=2 ** 40))
    d = tmp_path / "c"
    d.mkdir()
    (d / "orig.0").write_bytes(sb)
    (d / "orig.1").write_bytes(rec0)
    (d / "formatting").write_bytes(sb_set(sb, "magic", 0x21746d664d454d50, fix_csum=False))
    lst = []
    for n, page, data, *_ in cases + repaired + [beyond]:
        (d / n).write_bytes(data)
        lst.append("%s %d\n" % (n, page))
    (d / "list").write_text("".join(lst))
    files = [(f, "/test/c/" + f.name) for f in d.iterdir()]
    res = run_target(vm, CORRUPT % dict(job=META_JOB), files=files)
    got = klog(res)

    wrong = []
    for n, _, _, why in cases:
        rc, nt, ni, no, reason = got[n]
        if (rc, nt, ni, no) != REFUSED or why not in reason or "(-EINVAL)" not in reason:
            wrong.append("%s: rc %d, %d/%d/%d lines: %s" % (n, rc, nt, ni, no, reason))
    for n, _, _ in repaired:
        if got[n][:4] != ACCEPTED:
            wrong.append("%s: %s" % (n, got[n]))
    rc, nt, ni, no, reason = got["rec-beyond"]
    if (rc, nt, ni, no) != (0, 0, 0, 1) or "1 corrupt records point beyond" not in reason:
        wrong.append("rec-beyond: %s" % (got["rec-beyond"],))
    assert not wrong, "\n".join(wrong)
    # after the refusals, the untouched cache still holds every block
    assert parse_status(res.value("STATUS2"))["dirty"] == dirty
    assert res.values("VERIFY_OK") == ["meta"]
    s3 = parse_status(res.value("STATUS3"))
    assert s3["dirty"] == 0 and s3["free"] == s3["blocks"]
    # written once every case above passed (docs/reliability.md's figures)
    figures["superblock corruptions refused with one line and `-EINVAL`"] = \
        "%d / %d" % (len(cases), len(cases))
    n = len(repaired) + 1
    figures["record corruptions repaired as `format.md` says"] = \
        "%d / %d, and an interrupted format formatted again" % (n, n)
