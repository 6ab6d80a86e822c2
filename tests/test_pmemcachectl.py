"""pmemcachectl, the administration tool (userspace/, docs/pmemcachectl.8).

Host part (no VM): builds the tool with -Wall -Wextra -Werror, runs the C
unit tests, checks argument errors and exit codes, `check` verdicts on
images crafted with the module's own metadata code
(userspace/tests/mkimage), `drain` onto a file-backed origin compared byte
for byte, the `status --json` schema from a captured status line, and runs
check and drain under valgrind.  check and drain read records in 1 MiB
batches: their output and writes are compared byte for byte with those of
the last version that read one record per pread (built from git), on
images with torn and superseded records at the batch boundaries.

VM part: create over md raid5, fio verify through the cache, `status
--json` counters against what was written, `flush` to clean, `remove`;
then a power cut and `drain` with the module not loaded, which must leave
every acknowledged write on md.
"""
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import test_target_powercut as tp
from test_bad_input import crc32c
from vm import KBUILD, build

REPO = Path(__file__).resolve().parent.parent
US = REPO / "userspace"
TOOL = US / "pmemcachectl"
MKIMAGE = US / "tests/mkimage"

# Exit codes, docs/pmemcachectl.8 and userspace/pmemcachectl.h.
OK, USAGE, DEVICE, DM, DIRTY, NOCACHE, CORRUPT, MISMATCH, IO, NOORIGIN = range(10)

ORIGIN_SECTORS = 8192           # 4 MiB origin
PMEM_BYTES = 2 << 20


@pytest.fixture(scope="module")
def tool():
    p = build(["make", "-C", str(US), "pmemcachectl", "tests/mkimage", "tests/unit_test"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warning:" not in p.stderr, p.stderr
    return str(TOOL)


def run(*args, valgrind=False, timeout=120):
    cmd = [str(TOOL), *map(str, args)]
    if valgrind:
        cmd = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
               "--errors-for-leak-kinds=definite,indirect"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def mkimage(path, *ops, sectors=ORIGIN_SECTORS, ident="none", size=PMEM_BYTES,
            bs=4096, origin=None, expected=None):
    cmd = [str(MKIMAGE), str(path), str(size), str(bs), str(sectors), ident]
    if origin:
        cmd += ["--origin", str(origin)]
    if expected:
        cmd += ["--apply-to", str(expected)]
    cmd += list(ops)
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return path


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_error_line(p, *words):
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("pmemcachectl: "), lines
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# A workload that leaves every kind of record: dirty full and partial
# blocks, merged partial writes, clean blocks, a write hit on a clean
# block, two live copies (crash between W4 and W6), a torn record of an
# unacknowledged write, the last sector of the origin.
WORKLOAD = ["write:0:ff:1", "write:5:0f:2", "write:5:f0:3", "write:5:02:9",
            "write:9:01:4", "clean:9", "write:10:ff:5", "clean:10",
            "write:10:08:6", "write:20:ff:7", "crashdup:20:3c:8",
            "tearnew:30:ff:9", "write:1023:80:10"]
WORKLOAD_DIRTY, WORKLOAD_DIRTY_SECTORS = 5, 33


@pytest.fixture
def images(tool, tmp_path):
    return make_images(tmp_path)


def make_images(tmp_path):
    """pmem.img with WORKLOAD, origin.img (random) and expected.img (the
    origin as it must be once every acknowledged write is on it)."""
    tmp_path.mkdir(exist_ok=True)
    origin, expected = tmp_path / "origin.img", tmp_path / "expected.img"
    origin.write_bytes(random.Random(6).randbytes(ORIGIN_SECTORS * 512))
    shutil.copy(origin, expected)
    pmem = mkimage(tmp_path / "pmem.img", *WORKLOAD, origin=origin,
                   expected=expected)
    return pmem, origin, expected


# ---------------------------------------------------------------- host --

def test_builds_warning_free_and_unit_tests_pass(tool):
    p = build(["make", "-C", str(US), "test"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^\d+ cases, 0 failed$", p.stdout, re.M), p.stdout


def test_binary_needs_only_libdevmapper_json_c_libc(tool):
    libs = subprocess.run(["ldd", tool], capture_output=True, text=True).stdout
    direct = subprocess.run(["objdump", "-p", tool], capture_output=True,
                            text=True).stdout
    needed = sorted(re.findall(r"NEEDED\s+(\S+)", direct))
    assert needed == sorted(["libdevmapper.so.1.02.1", "libjson-c.so.5", "libc.so.6"]), needed
    assert "not found" not in libs


COMMANDS = ["create", "status", "list", "flush", "remove", "detach", "set",
            "check", "drain", "activate", "udev-probe", "monitor"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(tool, cmd):
    p = run(cmd, "--help")
    assert p.returncode == OK and p.stderr == ""
    assert p.stdout.startswith("usage: pmemcachectl %s" % cmd)
    p2 = run("help", cmd)
    assert p2.stdout == p.stdout


def test_no_command_and_unknown_command_are_usage_errors(tool):
    p = run()
    assert p.returncode == USAGE and "usage:" in p.stderr
    one_error_line(run("frobnicate"), "unknown command 'frobnicate'")
    assert run("frobnicate").returncode == USAGE
    assert run("--help").returncode == OK
    v = run("--version")
    assert v.returncode == OK and v.stderr == "", v.stderr
    lines = v.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("pmemcachectl ")
    assert re.match(r"libdevmapper \d+\.\d+\.\d+", lines[1]), lines
    # the host has no such target (or no device-mapper to ask): the VM
    # test of activate sees the loaded one
    assert lines[2] in ("target pmemcache not loaded",
                        "target pmemcache unknown (device-mapper not usable)"), lines


@pytest.mark.parametrize("args,words", [
    (["create"], ["need exactly one NAME"]),
    (["create", "pc", "--origin", "/dev/null"], ["--origin and --cache are required"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--block-size", "3000"], ["--block-size", "power of two"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--block-size", "8192"], ["--block-size"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--block-size", "4k"], ["--block-size"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--high-watermark", "101"], ["--high-watermark", "0 to 100"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--high-watermark", "40"], ["low watermark (45) is above high watermark (40)"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--writeback-jobs", "0"], ["--writeback-jobs"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--max-age", "-5"], ["--max-age"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--writeback", "turbo"], ["--writeback", "turbo"]),
    (["create", "a/b", "-o", "/x", "-c", "/y"], ["not a valid device-mapper name"]),
    (["create", "x" * 200, "-o", "/x", "-c", "/y"], ["not a valid device-mapper name"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--bogus"], ["bad option '--bogus'"]),
    (["status"], ["need exactly one NAME"]),
    (["status", "pc", "--interval", "fast"], ["--interval"]),
    (["list", "extra"], ["takes no arguments"]),
    (["flush"], ["need exactly one NAME"]),
    (["remove", "a", "b"], ["need exactly one NAME"]),
    (["remove", "pc", "--keep-dirty"], ["--keep-dirty leaves the dirty blocks only in pmem",
                                        "origin stays stale", "add --force"]),
    (["remove", "pc", "--force"], ["--force only goes with --keep-dirty"]),
    (["flush", "pc", "--force"], ["bad option '--force'"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--degraded"],
     ["--degraded is only for a mirrored cache"]),
    (["create", "pc", "-o", "/x", "-c", "/y", "--format", "--mirror", "missing"],
     ["--format needs both halves"]),
    (["activate"], ["need --all or exactly one PMEMDEV"]),
    (["activate", "--all", "/dev/pmem0"], ["need --all or exactly one PMEMDEV"]),
    (["activate", "/dev/pmem0", "/dev/pmem1"], ["need --all or exactly one PMEMDEV"]),
    (["activate", "--all", "--name", "x"], ["--name needs one PMEMDEV"]),
    (["activate", "/dev/pmem0", "--name", "a/b"], ["not a valid device-mapper name"]),
    (["activate", "--all", "--wait", "soon"], ["--wait: 'soon'"]),
    (["activate", "--all", "--wait", "86401"], ["--wait: '86401'"]),
    (["udev-probe"], ["need exactly one DEVNAME"]),
    (["udev-probe", "a", "b"], ["need exactly one DEVNAME"]),
    (["check"], ["need exactly one PMEMDEV"]),
    (["check", "a", "b"], ["need exactly one PMEMDEV"]),
    (["drain", "a"], ["need PMEMDEV and ORIGINDEV"]),
    (["drain", "-x", "a", "b"], ["bad option"]),
    (["create", "pc", "-c", "/y", "--origin"], ["option '--origin' needs a value"]),
    (["check", "img", "-o"], ["option '-o' needs a value"]),
    (["detach"], ["need exactly one NAME"]),
    (["detach", "a", "b"], ["need exactly one NAME"]),
    (["detach", "pc", "--timeout", "soon"], ["--timeout", "'soon'"]),
    (["detach", "pc", "--timeout", "-1"], ["--timeout: '-1' is not a number of seconds"]),
    (["detach", "pc", "--now"], ["bad option '--now'"]),
    (["set", "pc", "high_watermark"], ["need NAME KEY VALUE"]),
    (["set", "pc", "high_watermark", "1", "2"], ["need NAME KEY VALUE"]),
    (["set", "pc", "hi_watermark", "50"], ["unknown key 'hi_watermark'"]),
    (["set", "pc", "flush", "1"], ["unknown key 'flush'"]),
    (["set", "pc", "full_wait", "10ms"], ["full_wait: '10ms' is not a number"]),
    (["set", "pc", "seq_bypass", "4294967296"], ["seq_bypass: '4294967296' is not a number"]),
    (["set", "pc", "cleaner", "maybe"], ["cleaner: 'maybe' is not on or off"]),
    (["set", "pc", "writeback", "pfn"], ["writeback cannot change while the cache runs"]),
    (["monitor", "--bogus"], ["bad option '--bogus'"]),
    (["monitor", "pc", "--program"], ["option '--program' needs a value"]),
    (["status", "pc", "-o"], ["option '-o' needs a value"]),
    (["list", "--separator"], ["option '--separator' needs a value"]),
])
def test_bad_arguments_give_one_line_and_exit_1(tool, args, words):
    p = run(*args)
    assert p.returncode == USAGE, (p.returncode, p.stderr)
    one_error_line(p, *words)


def test_bad_devices_give_one_line_and_exit_2(tool, tmp_path):
    tiny = tmp_path / "tiny.img"
    tiny.write_bytes(b"\0" * 4096)
    cases = [
        (["check", "/nonexistent"], ["/nonexistent", "No such file"]),
        (["check", "/dev/null"], ["not a block device or a regular file"]),
        (["check", str(tmp_path)], ["not a block device or a regular file"]),
        (["check", str(tiny)], ["too small"]),
        (["create", "pc", "-o", "/nonexistent", "-c", "/dev/null"], ["origin", "No such file"]),
        (["create", "pc", "-o", str(tiny), "-c", "/dev/null"], ["not a block device"]),
        (["drain", str(tiny), "/nonexistent"], ["/nonexistent"]),
        (["status", "nosuchcache"], []),
        (["flush", "nosuchcache"], []),
        (["remove", "nosuchcache"], []),
        (["detach", "nosuchcache"], []),
        (["set", "nosuchcache", "high-watermark", "60"], []),
        (["monitor", "nosuchcache", "--oneshot"], []),
    ]
    for args, words in cases:
        p = run(*args)
        assert p.returncode == DEVICE, (args, p.returncode, p.stderr)
        one_error_line(p, *words)


def test_no_permission_is_exit_2(tool, tmp_path):
    img = mkimage(tmp_path / "p.img")
    os.chmod(img, 0)
    # root reads anything: run the check as nobody if we are root
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if os.geteuid() == 0 and shutil.which("setpriv") else []
    os.chmod(tmp_path, 0o755)
    p = subprocess.run(pre + [tool, "check", str(img)], capture_output=True, text=True)
    if not pre and os.geteuid() == 0:
        pytest.skip("root without setpriv")
    assert p.returncode == DEVICE
    one_error_line(p, "Permission denied")


def check_json(img, *extra, rc):
    p = run("check", "--json", img, *extra)
    assert p.returncode == rc, (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)


def test_check_valid_image_with_dirty_blocks(images):
    pmem, _, _ = images
    j = check_json(pmem, rc=DIRTY)
    assert j["verdict"] == "dirty" and j["reason"] is None
    r = j["records"]
    assert r["dirty"] == WORKLOAD_DIRTY and r["dirty_sectors"] == WORKLOAD_DIRTY_SECTORS
    assert r["clean"] == 1 and r["superseded"] == 1 and r["torn"] == 1
    assert r["unreadable"] == 0 and r["out_of_range"] == 0
    assert r["live"] + r["free"] == j["superblock"]["blocks"]
    assert j["superblock"]["block_size"] == 4096 and j["superblock"]["version"] == 1
    assert j["origin"] == {"kind": "size", "sectors": ORIGIN_SECTORS, "uuid": None}
    human = run("check", pmem)
    assert human.returncode == DIRTY and "dirty          5 (33 sectors)" in human.stdout


def test_check_freshly_formatted_image_is_clean(tool, tmp_path):
    img = mkimage(tmp_path / "p.img")
    j = check_json(img, rc=OK)
    assert j["verdict"] == "clean" and j["records"]["live"] == 0


def test_check_blank_and_interrupted_format_mean_no_cache(tool, tmp_path):
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as f:
        f.truncate(PMEM_BYTES)
    assert check_json(blank, rc=NOCACHE)["verdict"] == "blank"
    img = mkimage(tmp_path / "fmt.img", "formatting")
    assert check_json(img, rc=NOCACHE)["verdict"] == "formatting"


def test_check_corrupt_superblock(tool, tmp_path):
    img = mkimage(tmp_path / "p.img", "write:1:ff:1", "sbcorrupt")
    j = check_json(img, rc=CORRUPT)
    assert j["verdict"] == "corrupt" and "checksum mismatch" in j["reason"]
    p = run("check", img)
    assert p.stdout.startswith("%s: corrupt: superblock checksum mismatch" % img)


def test_check_wrong_version(tool, tmp_path):
    img = mkimage(tmp_path / "p.img", "sbversion:2")
    j = check_json(img, rc=CORRUPT)
    assert j["verdict"] == "corrupt" and "unsupported superblock version" in j["reason"]


def test_check_foreign_data(tool, tmp_path):
    img = mkimage(tmp_path / "p.img", "foreign")
    j = check_json(img, rc=CORRUPT)
    assert j["verdict"] == "foreign" and "not a pmemcache superblock" in j["reason"]


def test_check_torn_record_is_ignored_like_recovery_does(tool, tmp_path):
    # A torn record is what a crash leaves of a write that was never
    # acknowledged: the module's recovery drops it, so check counts it and
    # still says valid.
    img = mkimage(tmp_path / "p.img", "write:3:ff:1", "tearnew:4:ff:2")
    j = check_json(img, rc=DIRTY)
    assert j["records"]["torn"] == 1 and j["records"]["dirty"] == 1


def test_check_origin_identity(tool, tmp_path):
    img = mkimage(tmp_path / "p.img", "write:3:ff:1")
    good = tmp_path / "o.img"
    good.write_bytes(b"\0" * ORIGIN_SECTORS * 512)
    j = check_json(img, "--origin", good, rc=DIRTY)
    assert j["origin_given"]["sectors"] == ORIGIN_SECTORS
    bad = tmp_path / "bigger.img"
    bad.write_bytes(b"\0" * (ORIGIN_SECTORS + 8) * 512)
    j = check_json(img, "--origin", bad, rc=MISMATCH)
    assert j["verdict"] == "mismatch" and "origin size differs" in j["reason"]
    md = mkimage(tmp_path / "md.img", "write:3:ff:1",
                 ident="md:0123456789abcdef0123456789abcdef")
    j = check_json(md, rc=DIRTY)
    assert j["origin"]["kind"] == "md"
    assert j["origin"]["uuid"] == "01234567-89ab-cdef-0123-456789abcdef"
    j = check_json(md, "--origin", good, rc=MISMATCH)
    assert "origin UUID differs" in j["reason"]


def test_check_refuses_records_beyond_the_origin(tool, tmp_path):
    # A record with a good checksum that maps block 1024 of a 1024-block
    # origin: drain must never write past the end of the origin.
    img = mkimage(tmp_path / "p.img", "write:3:ff:1", "write:1024:01:2")
    j = check_json(img, rc=CORRUPT)
    assert j["verdict"] == "damaged" and j["records"]["out_of_range"] == 1
    assert "beyond the end of the origin" in j["reason"]
    origin = tmp_path / "o.img"
    origin.write_bytes(b"\0" * ORIGIN_SECTORS * 512)
    p = run("drain", img, origin)
    assert p.returncode == CORRUPT
    one_error_line(p, "check failed (damaged")
    assert origin.stat().st_size == ORIGIN_SECTORS * 512
    assert set(origin.read_bytes()) == {0}


def test_check_never_writes(images):
    pmem, _, _ = images
    before = sha(pmem)
    run("check", pmem)              # recovery would invalidate the loser
    assert sha(pmem) == before


def test_drain_restores_every_acknowledged_byte(images):
    pmem, origin, expected = images
    assert sha(origin) != sha(expected)
    p = run("drain", "--json", pmem, origin)
    assert p.returncode == OK, p.stderr
    j = json.loads(p.stdout)
    assert j["blocks"] == WORKLOAD_DIRTY and j["sectors"] == WORKLOAD_DIRTY_SECTORS
    assert j["marked_clean"] == WORKLOAD_DIRTY and j["error"] is None
    assert origin.read_bytes() == expected.read_bytes()
    # the records are CLEAN now: check agrees, a second drain writes nothing
    assert check_json(pmem, rc=OK)["records"]["clean"] == WORKLOAD_DIRTY + 1
    p = run("drain", "--json", pmem, origin)
    assert p.returncode == OK and json.loads(p.stdout)["blocks"] == 0
    assert origin.read_bytes() == expected.read_bytes()


def test_drain_dry_run_and_no_mark_clean(images):
    pmem, origin, expected = images
    o0, p0 = sha(origin), sha(pmem)
    p = run("drain", "--dry-run", pmem, origin)
    assert p.returncode == OK and "would be written" in p.stdout
    assert sha(origin) == o0 and sha(pmem) == p0
    p = run("drain", "--no-mark-clean", pmem, origin)
    assert p.returncode == OK, p.stderr
    assert origin.read_bytes() == expected.read_bytes()
    assert sha(pmem) == p0
    assert check_json(pmem, rc=DIRTY)["records"]["dirty"] == WORKLOAD_DIRTY


def test_drain_never_writes_a_block_that_fails_its_data_crc(tool, tmp_path):
    """A cache formatted with data_crc (mkimage --data-crc), 3 dirty
    blocks: drained as they are, all 3 reach the origin (the control);
    with one byte of every data slot changed behind the cache, none is
    written, drain fails (IO) naming them, and they stay dirty."""
    ops = ["--data-crc", "write:1:ff:1", "write:2:ff:2", "write:3:ff:3"]
    origin = tmp_path / "o.img"
    good = mkimage(tmp_path / "good.img", *ops)
    origin.write_bytes(b"\x55" * ORIGIN_SECTORS * 512)
    p = run("drain", "--json", good, origin)
    assert p.returncode == OK, p.stderr
    assert json.loads(p.stdout)["blocks"] == 3 and json.loads(p.stdout)["crc_errors"] == 0
    assert origin.read_bytes() != b"\x55" * ORIGIN_SECTORS * 512

    bad = mkimage(tmp_path / "bad.img", *ops)
    sb = bad.read_bytes()[:256]
    n, data_off = (int.from_bytes(sb[o:o + 8], "little") for o in (88, 104))
    with open(bad, "r+b") as f:
        for k in range(n):
            f.seek(data_off + k * 4096 + 100)
            b = f.read(1)
            f.seek(data_off + k * 4096 + 100)
            f.write(bytes([b[0] ^ 0x40]))
    origin.write_bytes(b"\x55" * ORIGIN_SECTORS * 512)
    before = sha(origin)
    p = run("drain", "--json", bad, origin)
    assert p.returncode == IO, p.stderr
    j = json.loads(p.stdout)
    assert j["crc_errors"] == 3 and j["blocks"] == 0, j
    assert "fail their data crc" in j["error"], j
    assert sha(origin) == before
    assert check_json(bad, rc=DIRTY)["records"]["dirty"] == 3


@pytest.mark.parametrize("damage,rc,words", [
    ("sbcorrupt", CORRUPT, ["check failed (corrupt", "nothing written"]),
    ("sbversion:7", CORRUPT, ["unsupported superblock version"]),
    ("foreign", CORRUPT, ["check failed (foreign"]),
    ("formatting", NOCACHE, ["check failed (formatting"]),
])
def test_drain_refuses_a_cache_that_fails_check(tool, tmp_path, damage, rc, words):
    origin = tmp_path / "o.img"
    origin.write_bytes(b"\x55" * ORIGIN_SECTORS * 512)
    img = mkimage(tmp_path / "p.img", "write:1:ff:1", damage)
    before = sha(origin)
    p = run("drain", img, origin)
    assert p.returncode == rc
    one_error_line(p, *words)
    assert sha(origin) == before


def test_drain_refuses_another_origin(tool, tmp_path):
    img = mkimage(tmp_path / "p.img", "write:1:ff:1",
                  ident="md:0123456789abcdef0123456789abcdef")
    origin = tmp_path / "o.img"
    origin.write_bytes(b"\x55" * ORIGIN_SECTORS * 512)
    p = run("drain", img, origin)
    assert p.returncode == MISMATCH
    one_error_line(p, "origin UUID differs")
    assert set(origin.read_bytes()) == {0x55}
    small = tmp_path / "small.img"
    small.write_bytes(b"\x55" * 4096 * 512)
    img2 = mkimage(tmp_path / "p2.img", "write:1:ff:1")
    p = run("drain", img2, small)
    assert p.returncode == MISMATCH
    one_error_line(p, "origin size differs")
    p = run("drain", img2, img2)
    assert p.returncode in (USAGE, MISMATCH)


# --------------------------------------------- batched record reads --
# check and drain read records through a read-ahead window (libpmc.c).
# Their verdicts, output and writes must be those of the same code built
# with a one-record window (one pread per record, as before the window),
# byte for byte, records at the window boundaries included.
WINDOW = eval(re.search(r"#define PMC_READ_WINDOW\t+(.*)",
                        (US / "libpmc.c").read_text()).group(1).replace("U", ""))
WINDOW_SLOTS = WINDOW // 32     # records per window
FIRST_SLOTS = 4096 // 32        # window 0 starts with the superblock area
FILL0 = 1000                    # oblocks of fill ops: FILL0 + slot


def build_baseline(dest):
    """pmemcachectl with a one-record read window, built in @dest."""
    for d in ("userspace", "dm-pmemcache"):
        shutil.copytree(REPO / d, dest / d, ignore=shutil.ignore_patterns("*.o", "*.ko"))
    env = dict(os.environ, CPPFLAGS="-DPMC_READ_WINDOW=32U")   # the Makefile adds to it
    p = subprocess.run(["make", "-C", str(dest / "userspace"), "clean", "pmemcachectl"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return dest / "userspace/pmemcachectl"


@pytest.fixture(scope="module")
def baseline(tool, tmp_path_factory):
    return str(build_baseline(tmp_path_factory.mktemp("baseline")))


@pytest.fixture
def shm_path(tmp_path):
    """tmpfs if there is one: mkimage makes two fdatasync()s per write."""
    if not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="pmc-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d)


def boundary_ops(n_blocks):
    """Ops that put a torn, a superseded or a clean record at the last and
    first slot of the first three record windows and at the last slot
    (in the last, partial window); fill ops write every other slot."""
    b1, b2 = WINDOW_SLOTS - FIRST_SLOTS, 2 * WINDOW_SLOTS - FIRST_SLOTS
    assert n_blocks > b2 + 100
    plan = {0: ["write:1:1:1"],
            b1 - 1: ["tearnew:2:1:2"],
            b1: ["crashdup:1:1:3"],             # older copy in slot 0
            b2 - 1: ["write:3:1:4", "clean:3"],
            b2: ["tearnew:4:1:5"],
            n_blocks - 2: ["crashdup:%d:1:6" % (FILL0 + b1 + 1)],
            n_blocks - 1: ["tearnew:5:1:7"]}
    ops, slot = [], 0
    for at in sorted(plan):
        if at > slot:
            ops.append("fill:%d:%d:1" % (FILL0 + slot, at - slot))
        ops += plan[at]
        slot = at + 1
    return ops


def compared_images(kind, d):
    """(pmem, origin) of @kind in @d."""
    origin = d / "origin.img"
    if kind == "workload":
        origin.write_bytes(random.Random(6).randbytes(ORIGIN_SECTORS * 512))
        return mkimage(d / "pmem.img", *WORKLOAD, origin=origin), origin
    if kind in ("sbcorrupt", "formatting"):
        origin.write_bytes(b"\x55" * ORIGIN_SECTORS * 512)
        return mkimage(d / "pmem.img", "write:1:ff:1", kind), origin
    # bs 512: 77 K records, three windows; the origin holds 0x55 where
    # the fill ops write, so that drained blocks show.
    size, sectors = 40 << 20, 1 << 17
    probe = subprocess.run([str(MKIMAGE), str(d / "pmem.img"), str(size), "512",
                            str(sectors), "none"], capture_output=True, text=True)
    n = int(re.search(r"blocks=(\d+)", probe.stdout).group(1))
    with open(origin, "wb") as f:
        f.truncate(sectors * 512)
        f.seek(FILL0 * 512)
        f.write(b"\x55" * n * 512)
    return mkimage(d / "pmem.img", *boundary_ops(n), sectors=sectors,
                   size=size, bs=512), origin


def what_check_and_drain_say(binary, d):
    """What every check and drain form on pmem.img/origin.img in @d says."""
    said = []
    for args in [["check", "--json", "pmem.img"], ["check", "pmem.img"],
                 ["check", "--json", "pmem.img", "--origin", "origin.img"],
                 ["drain", "--dry-run", "--json", "pmem.img", "origin.img"],
                 ["drain", "--json", "pmem.img", "origin.img"],
                 ["check", "--json", "pmem.img"]]:
        p = subprocess.run([binary] + args, capture_output=True, text=True,
                           cwd=d, timeout=120)
        said.append((args, p.returncode, p.stdout, p.stderr))
    return said


@pytest.mark.parametrize("kind", ["boundaries", "workload", "sbcorrupt", "formatting"])
def test_check_and_drain_say_what_the_per_record_reader_said(tool, baseline, shm_path, kind):
    made = shm_path / "made"
    made.mkdir()
    compared_images(kind, made)
    said = {}
    for who, binary in [("old", baseline), ("new", tool)]:
        subprocess.run(["cp", "-r", "--sparse=always", str(made), str(shm_path / who)],
                       check=True)
        said[who] = what_check_and_drain_say(binary, shm_path / who)
    assert said["new"] == said["old"]
    for f in ["pmem.img", "origin.img"]:
        assert subprocess.run(["cmp", shm_path / "old" / f, shm_path / "new" / f]).returncode == 0
    if kind == "boundaries":
        j = json.loads(said["new"][0][2])
        r = j["records"]
        assert j["verdict"] == "dirty" and r["torn"] == 3 and r["superseded"] == 2
        assert r["free"] == 5 and r["live"] + 5 == j["superblock"]["blocks"]
        assert json.loads(said["new"][4][2])["blocks"] == r["dirty"] > 40000


@pytest.mark.skipif(not shutil.which("valgrind"), reason="no valgrind")
def test_windowed_reads_run_clean_under_valgrind(tool, shm_path):
    # Stores into the window: the drain of test_check_and_drain_run_clean...
    pmem, _ = compared_images("boundaries", shm_path)
    p = run("check", "--json", pmem, valgrind=True)
    assert p.returncode == DIRTY, p.stderr
    assert json.loads(p.stdout)["records"]["torn"] == 3


STATUS = ("0 2097152 pmemcache 65536 100 65000 436 50 2 10 7 200 0 3 9 0 0 150 614400 0 0 0 "
          "12.1 bounce - 0 29491 48 2 5 1 0 0 0 3 0 0 0 ok")
TABLE = "0 2097152 pmemcache 9:0 259:0 4096 4 high_watermark 60 low_watermark 40"

STATUS_KEYS = {
    "schema": int, "name": str, "size_sectors": int, "origin_dev": str,
    "origin": (str, type(None)), "cache_dev": str, "cache": (str, type(None)),
    "block_size": int, "features": str, "blocks": int, "dirty": int,
    "free": int, "clean": int, "dirty_fraction": float, "dirty_bytes": int,
    "read_hits": int, "read_partial": int, "read_misses": int,
    "write_hits": int, "write_new": int, "write_around": int, "discards": int,
    "flushes": int, "wb_pfn_blocks": int, "wb_pfn_bytes": int,
    "wb_bounce_blocks": int, "wb_bounce_bytes": int, "writeback_blocks": int,
    "writeback_bytes": int, "writeback_rate_bytes_per_sec": (float, int, type(None)),
    "wb_errors": int, "wb_notsupp": int, "media_errors": int, "errors": int,
    "ram_bytes_per_block": float, "ram_bytes": int, "route": str, "mode": str,
    "wb_rate_blocks_per_sec": int, "wb_target_dirty": int, "stripe_blocks": int,
    "wb_full_stripes": int, "wb_flushes": int, "full_waits": int, "full_around": int,
    "full_through": int, "full_timeouts": int, "bad_slots": int, "mirror_reads": int,
    "resync_left": int, "crc_errors": int, "health": str,
    "dm_uuid": (str, type(None)),
}


def check_status_schema(j):
    assert set(j) == set(STATUS_KEYS), set(j) ^ set(STATUS_KEYS)
    for k, t in STATUS_KEYS.items():
        assert isinstance(j[k], t), (k, j[k])
    assert j["schema"] == 1


def test_status_json_schema_from_a_captured_line(tool):
    p = run("status", "pc", "--json", "--status-line", STATUS, "--table-line", TABLE)
    assert p.returncode == OK, p.stderr
    j = json.loads(p.stdout)
    check_status_schema(j)
    assert j["name"] == "pc" and j["size_sectors"] == 2097152
    assert j["blocks"] == 65536 and j["dirty"] == 100 and j["free"] == 65000
    assert j["clean"] == 436 and j["read_hits"] == 50 and j["write_new"] == 200
    assert j["wb_bounce_blocks"] == 150 and j["writeback_bytes"] == 614400
    assert abs(j["dirty_fraction"] - 100 / 65536) < 1e-9
    assert j["dirty_bytes"] == 100 * 4096 and j["block_size"] == 4096
    assert j["features"] == "4 high_watermark 60 low_watermark 40"
    assert j["route"] == "bounce" and j["mode"] == "normal"
    assert j["ram_bytes"] == round(12.1 * 65536)
    assert j["writeback_rate_bytes_per_sec"] is None
    assert j["wb_target_dirty"] == 29491 and j["stripe_blocks"] == 48
    assert j["wb_full_stripes"] == 2 and j["wb_flushes"] == 5 and j["full_waits"] == 1
    assert j["full_through"] == 0 and j["full_timeouts"] == 0 and j["bad_slots"] == 3
    assert j["mirror_reads"] == 0 and j["resync_left"] == 0 and j["health"] == "ok"


def test_status_shows_the_dm_uuid(tool):
    uuid = "PMEMCACHE-01234567-89ab-cdef-0001-0203040506ff"
    p = run("status", "pc", "--json", "--status-line", STATUS, "--table-line", TABLE,
            "--dm-uuid", uuid)
    assert p.returncode == OK, p.stderr
    assert json.loads(p.stdout)["dm_uuid"] == uuid
    p = run("status", "pc", "--json", "--status-line", STATUS, "--table-line", TABLE)
    assert json.loads(p.stdout)["dm_uuid"] is None      # made by dmsetup
    p = run("status", "pc", "--status-line", STATUS, "--table-line", TABLE,
            "--dm-uuid", uuid)
    assert "  dm uuid            %s\n" % uuid in p.stdout


def test_status_rejects_a_line_of_another_layout(tool):
    p = run("status", "pc", "--json", "--status-line", STATUS + " 7")
    assert p.returncode == DM
    one_error_line(p, "unexpected status line")
    p = run("status", "pc", "--json", "--status-line",
            STATUS.replace("pmemcache", "writecache"))
    assert p.returncode == DM


def test_human_status_from_a_captured_line(tool):
    p = run("status", "pc", "--status-line", STATUS, "--table-line", TABLE)
    assert p.returncode == OK, p.stderr
    assert "dirty              100 (0.2%)" in p.stdout
    assert "block size         4096 bytes" in p.stdout


# ----------------------------------------- columns through dm_report --
CAPTURED = ("--status-line", STATUS, "--table-line", TABLE)
STATUS_BAD = STATUS[:-len(" 3 0 0 0 ok")] + " 3 0 0 0 origin_failing,full"
UUID = "PMEMCACHE-01234567-89ab-cdef-0001-0203040506ff"


def report_fields(tool):
    p = run("status", "-o", "help")
    assert p.returncode == OK and p.stderr == "", p.stderr
    return re.findall(r"^  (\w+) ", p.stdout, re.M)


def test_report_fields_are_the_json_keys(tool):
    # one vocabulary: every key of the status object is a column, and back
    fields = report_fields(tool)
    assert len(fields) == len(set(fields))
    assert set(fields) == set(STATUS_KEYS) - {"schema"} | {"dirty_percent"}, \
        set(fields) ^ (set(STATUS_KEYS) - {"schema"} | {"dirty_percent"})
    assert run("list", "-o", "help").stdout == run("status", "-o", "help").stdout


def test_status_columns_from_a_captured_line(tool):
    p = run("status", "pc", *CAPTURED, "-o", "name,dirty,dirty_percent,block_size,"
            "origin_dev,cache_dev,wb_target_dirty,bad_slots,route,mode,health")
    assert p.returncode == OK, p.stderr
    head, row = p.stdout.splitlines()
    assert head.split() == ["NAME", "DIRTY", "DIRTY%", "BS", "ORIGIN_DEV", "CACHE_DEV",
                            "WB_TARGET", "BAD_SLOTS", "ROUTE", "MODE", "HEALTH"]
    assert row.split() == ["pc", "100", "0.15", "4096", "9:0", "259:0", "29491", "3",
                           "bounce", "normal", "ok"]
    # aligned: each value ends (numbers) or starts (words) under its heading
    assert row.index("29491") + 5 == head.index("WB_TARGET") + len("WB_TARGET")
    assert row.index("bounce") == head.index("ROUTE")


def test_every_column_has_the_value_of_the_json_object(tool):
    fields = report_fields(tool)
    j = json.loads(run("status", "pc", "--json", *CAPTURED, "--dm-uuid", UUID).stdout)
    p = run("status", "pc", *CAPTURED, "--dm-uuid", UUID, "--noheadings",
            "--separator", "|", "-o", ",".join(fields))
    assert p.returncode == OK, p.stderr
    vals = dict(zip(fields, p.stdout.rstrip("\n").split("|")))
    assert len(vals) == len(fields)
    for k in fields:
        if k == "dirty_percent":
            assert vals[k] == "%.2f" % (100 * j["dirty"] / j["blocks"]), vals[k]
        elif k == "writeback_rate_bytes_per_sec":
            assert j[k] is None and vals[k] == "", vals[k]
        elif isinstance(j[k], float):
            assert abs(float(vals[k]) - j[k]) < 1e-6, (k, vals[k], j[k])
        elif k in ("origin", "cache") and j[k] is None:
            assert vals[k] == j[k + "_dev"], (k, vals[k])
        else:
            assert vals[k] == str(j[k]), (k, vals[k], j[k])


def test_noheadings_and_separator_as_dmsetup(tool):
    p = run("status", "pc", *CAPTURED, "-o", "name,dirty,origin_dev", "--noheadings")
    assert p.returncode == OK, p.stderr
    assert p.stdout == "pc:100:9:0\n"          # dmsetup info -c --noheadings
    p = run("status", "pc", *CAPTURED, "-o", "name,dirty", "--noheadings",
            "--separator", ",")
    assert p.stdout == "pc,100\n"
    p = run("status", "pc", *CAPTURED, "-o", "name,dirty", "--separator", ",")
    assert p.stdout == "NAME,DIRTY\npc,100\n"


def test_status_default_is_human_and_c_or_plus_adds_the_default_columns(tool):
    human = run("status", "pc", *CAPTURED).stdout
    assert human.startswith("pc: pmemcache, normal mode\n")
    p = run("status", "pc", *CAPTURED, "-c")
    assert p.returncode == OK, p.stderr
    default = ["NAME", "BLOCKS", "DIRTY", "DIRTY%", "MODE", "HEALTH", "ORIGIN", "CACHE",
               "DM_UUID"]
    assert p.stdout.splitlines()[0].split() == default
    p = run("status", "pc", *CAPTURED, "-o", "+bad_slots")
    assert p.stdout.splitlines()[0].split() == default + ["BAD_SLOTS"]


def test_report_json_has_the_chosen_fields_only(tool):
    p = run("status", "pc", *CAPTURED, "-o", "name,dirty,health", "--json")
    assert p.returncode == OK, p.stderr
    assert json.loads(p.stdout) == {"pmemcache": [{"name": "pc", "dirty": "100",
                                                   "health": "ok"}]}
    # without -o, --json stays the schema-1 object
    check_status_schema(json.loads(run("status", "pc", *CAPTURED, "--json").stdout))


def test_list_columns_rows_and_json(tool):
    devs = ["--device", "pc", *CAPTURED,
            "--device", "pc2", "--status-line", STATUS_BAD, "--table-line", TABLE,
            "--dm-uuid", UUID]
    p = run("list", *devs)
    assert p.returncode == OK, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["NAME", "BLOCKS", "DIRTY", "DIRTY%", "MODE", "HEALTH",
                                "ORIGIN", "CACHE", "DM_UUID"]
    assert lines[1].split()[:6] == ["pc", "65536", "100", "0.15", "normal", "ok"]
    assert lines[2].split()[5] == "origin_failing,full" and lines[2].split()[-1] == UUID
    assert len(lines) == 3
    p = run("list", *devs, "-o", "name,health", "--noheadings")
    assert p.stdout == "pc:ok\npc2:origin_failing,full\n"
    p = run("list", *devs, "-o", "name,dm_uuid", "--json")
    assert json.loads(p.stdout) == {"pmemcache": [{"name": "pc", "dm_uuid": ""},
                                                  {"name": "pc2", "dm_uuid": UUID}]}
    lst = json.loads(run("list", *devs, "--json").stdout)
    assert [d["name"] for d in lst] == ["pc", "pc2"] and lst[1]["dm_uuid"] == UUID
    for d in lst:
        check_status_schema(d)


def test_unknown_field_is_a_usage_error(tool):
    p = run("status", "pc", *CAPTURED, "-o", "name,bogus")
    assert p.returncode == USAGE
    one_error_line(p, "-o name,bogus", "Unrecognised field: bogus", "-o help")
    assert p.stdout == ""
    p = run("list", "--device", "pc", *CAPTURED, "-o", "bogus")
    assert p.returncode == USAGE
    one_error_line(p, "bogus")


@pytest.mark.skipif(not shutil.which("valgrind"), reason="no valgrind")
def test_check_and_drain_run_clean_under_valgrind(images):
    pmem, origin, expected = images
    p = run("check", "--json", pmem, valgrind=True)
    assert p.returncode == DIRTY, p.stderr
    p = run("check", pmem, "--origin", origin, valgrind=True)
    assert p.returncode == DIRTY, p.stderr
    p = run("drain", pmem, origin, valgrind=True)
    assert p.returncode == OK, p.stderr
    assert origin.read_bytes() == expected.read_bytes()
    for args, rc in [(("check", "/nonexistent"), DEVICE),
                     (("drain", pmem, "/nonexistent"), DEVICE),
                     (("status", "pc", "--json", "--status-line", STATUS,
                       "--table-line", TABLE), OK),
                     (("status", "pc", "-o", "+bad_slots,ram_bytes_per_block",
                       "--status-line", STATUS, "--table-line", TABLE), OK),
                     (("list", "--json", "-c", "--device", "pc", "--status-line", STATUS,
                       "--table-line", TABLE), OK),
                     (("status", "pc", "-o", "bogus", "--status-line", STATUS,
                       "--table-line", TABLE), USAGE),
                     (("create", "pc", "-o", "/x", "-c", "/y", "--block-size", "7"), USAGE),
                     (("set", "pc", "writeback", "pfn"), USAGE),
                     (("set", "pc", "cleaner", "maybe"), USAGE),
                     (("detach", "pc", "--timeout", "x"), USAGE)]:
        p = run(*args, valgrind=True)
        assert p.returncode == rc, (args, p.returncode, p.stderr)


@pytest.mark.skipif(not shutil.which("groff"), reason="no groff")
def test_man_page_renders_and_documents_every_command_and_exit_code(tool):
    page = REPO / "docs/pmemcachectl.8"
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    text = page.read_text()
    for cmd in COMMANDS:
        assert re.search(r"^\.SS %s\b" % cmd, text, re.M), cmd
        assert re.search(r"^\.B pmemcachectl %s$" % cmd, text, re.M), cmd
    for code in range(10):
        assert re.search(r"^\.B %d$" % code, text, re.M), code
    for key in STATUS_KEYS:
        assert key.replace("_", "\\_") in text or key in text, key


def test_set_help_lists_every_key_of_the_tool_and_the_man_page(tool):
    p = run("set", "--help")
    keys = re.findall(r"^  ([a-z_]+) ", p.stdout, re.M)
    # the live tunables of pmc_table.c's pmc_tunables[] and target.c's
    # cleaner message
    table = (REPO / "dm-pmemcache/pmc_table.c").read_text()
    live = re.findall(r'\] = \{ "(\w+)",[^}]*?(true|false) \}', table, re.S)
    enum = (REPO / "dm-pmemcache/pmc_table.h").read_text()
    n_tunables = len(re.findall(r"^\tPMC_T_\w+,", enum, re.M))
    assert len(live) == n_tunables and {k for k, l in live} | {"cleaner"} <= set(keys), keys
    for k, l in live:       # the tunables no message changes: refused by the tool
        line = re.search(r"^  %s .*$" % k, p.stdout, re.M).group(0)
        assert ("set by the table only" in line) == (l == "false"), line
    page = (REPO / "docs/pmemcachectl.8").read_text()
    for k in keys:
        assert k.replace("_", "\\_") in page, k


@pytest.mark.parametrize("top,prefix", [(True, None), (False, "/usr")])
def test_make_install_honours_prefix_and_destdir(tool, tmp_path, top, prefix):
    dest = tmp_path / "root"
    cmd = ["make", "-C", str(REPO if top else US), "install", "DESTDIR=%s" % dest]
    if prefix:
        cmd.append("PREFIX=%s" % prefix)
    p = build(cmd)
    assert p.returncode == 0, p.stdout + p.stderr
    pre = prefix or "/usr/local"
    base = dest / pre.lstrip("/")
    sbin, man = base / "sbin/pmemcachectl", base / "share/man/man8/pmemcachectl.8"
    rules = base / "lib/udev/rules.d/69-pmemcache.rules"
    unit = base / "lib/systemd/system/pmemcache-activate.service"
    comp = base / "share/bash-completion/completions/pmemcachectl"
    files = sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file())
    print("installed:", *files, sep="\n  ")
    assert files == sorted(str(f.relative_to(dest)) for f in (sbin, man, rules, unit, comp)), files
    assert sbin.stat().st_mode & 0o777 == 0o755
    for f in (man, rules, unit, comp):
        assert f.stat().st_mode & 0o777 == 0o644, f
    assert sbin.read_bytes() == TOOL.read_bytes()
    assert man.read_bytes() == (REPO / "docs/pmemcachectl.8").read_bytes()
    assert comp.read_bytes() == (US / "completion/pmemcachectl.bash").read_bytes()
    # the rule and the unit run the tool where it was installed (not DESTDIR)
    r, u = rules.read_text(), unit.read_text()
    assert "@" not in r.replace("@SBINDIR@", "") and "@SBINDIR@" not in r + u
    assert 'IMPORT{program}="%s/sbin/pmemcachectl udev-probe %%k"' % pre in r
    assert 'RUN+="%s/sbin/pmemcachectl activate --all"' % pre in r
    assert 'ENV{SYSTEMD_READY}="0", ENV{UDISKS_IGNORE}="1"' in r
    assert "ExecStart=%s/sbin/pmemcachectl activate --all --wait 30\n" % pre in u
    assert "Type=oneshot" in u and "Before=local-fs-pre.target" in u
    assert "SuccessExitStatus=9" in u
    assert str(dest) not in r + u
    v = subprocess.run([str(sbin), "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("pmemcachectl ")
    p = build(cmd[:3] + ["uninstall"] + cmd[4:])
    assert p.returncode == 0, p.stdout + p.stderr
    assert not [f for f in dest.rglob("*") if f.is_file()]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze")
def test_systemd_unit_verifies(tool, tmp_path):
    # installed without DESTDIR under a scratch prefix: ExecStart exists
    p = build(["make", "-C", str(US), "install", "PREFIX=%s" % tmp_path])
    assert p.returncode == 0, p.stdout + p.stderr
    unit = tmp_path / "lib/systemd/system/pmemcache-activate.service"
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_bash_completion_completes_commands_and_options(tool):
    script = (". %s; COMP_WORDS=(pmemcachectl act); COMP_CWORD=1; _pmemcachectl; "
              "echo \"${COMPREPLY[*]}\"; COMP_WORDS=(pmemcachectl remove pc --k); "
              "COMP_CWORD=3; _pmemcachectl; echo \"${COMPREPLY[*]}\"; "
              "COMP_WORDS=(pmemcachectl activate --); COMP_CWORD=2; _pmemcachectl; "
              "echo \"${COMPREPLY[*]}\"" % (US / "completion/pmemcachectl.bash"))
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.splitlines() == ["activate", "--keep-dirty",
                                     "--all --name --wait --dry-run --help"]


def test_set_completion_offers_every_key_the_tool_takes(tool):
    keys = [k for k, what in re.findall(r"^  ([a-z_]+) +(.*)$", run("set", "--help").stdout,
                                        re.M) if not what.startswith("set by the table only")]
    assert "max_age" in keys and "cleaner" in keys
    script = (". %s; COMP_WORDS=(pmemcachectl set pc ''); COMP_CWORD=3; _pmemcachectl; "
              "echo \"${COMPREPLY[*]}\"" % (US / "completion/pmemcachectl.bash"))
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert sorted(p.stdout.split()) == sorted(keys)


# ------------------------------------------- activate, udev-probe (host) --
# A fake /sys and /dev (PMEMCACHECTL_SYSFS, PMEMCACHECTL_DEVDIR): pmem
# "devices" are image files from mkimage, md arrays are sysfs folders with
# md/uuid.  activate --dry-run and udev-probe never touch device-mapper.
MD_UUID = "0123456789abcdef0123456789abcdef"


class FakeTree:
    def __init__(self, root):
        self.sys, self.dev = root / "sys", root / "dev"
        for d in ("class/block", "dev/block", "devices/virtual/block"):
            (self.sys / d).mkdir(parents=True)
        self.dev.mkdir()
        self.env = dict(os.environ, PMEMCACHECTL_SYSFS=str(self.sys),
                        PMEMCACHECTL_DEVDIR=str(self.dev))

    def add(self, name, majmin, sectors, parent=None, partno=None, md_uuid=None):
        base = self.sys / "devices/virtual/block"
        real = (base / parent / name) if parent else (base / name)
        real.mkdir(parents=True)
        (real / "dev").write_text(majmin + "\n")
        (real / "size").write_text("%d\n" % sectors)
        if partno:
            (real / "partition").write_text("%d\n" % partno)
        if md_uuid:
            (real / "md").mkdir()
            u = md_uuid
            (real / "md/uuid").write_text("%s-%s-%s-%s-%s\n" % (u[:8], u[8:12], u[12:16],
                                                                u[16:20], u[20:]))
        os.symlink(real, self.sys / "class/block" / name)
        os.symlink(real, self.sys / "dev/block" / majmin)

    def remove(self, name, majmin):
        os.unlink(self.sys / "class/block" / name)
        os.unlink(self.sys / "dev/block" / majmin)

    def pmem(self, name, majmin, *ops, ident="md:" + MD_UUID, sectors=ORIGIN_SECTORS):
        img = mkimage(self.dev / name, *ops, sectors=sectors, ident=ident)
        self.add(name, majmin, PMEM_BYTES // 512)
        return img

    def run(self, *args, timeout=60):
        return subprocess.run([str(TOOL), *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, env=self.env)


def cache_uuid(img):
    return json.loads(run("check", "--json", img).stdout)["superblock"]["cache_uuid"]


def probe_keys(p):
    assert p.returncode == OK and p.stderr == "", p.stderr
    return dict(l.split("=", 1) for l in p.stdout.splitlines())


@pytest.fixture
def tree(tool, tmp_path):
    t = FakeTree(tmp_path)
    t.add("md0", "9:0", ORIGIN_SECTORS, md_uuid=MD_UUID)
    t.add("md1", "9:1", ORIGIN_SECTORS, md_uuid="f" * 32)      # same size, other array
    t.add("md2", "9:2", ORIGIN_SECTORS // 2, md_uuid=MD_UUID)  # same UUID, smaller
    t.add("vda", "254:0", ORIGIN_SECTORS)
    t.img = t.pmem("pmem0", "259:0", "write:3:ff:1")
    return t


def test_udev_probe_marks_the_origin_and_the_cache_and_nothing_else(tree):
    u = cache_uuid(tree.img)
    k = probe_keys(tree.run("udev-probe", "md0"))
    assert k == {"PMEMCACHE_ROLE": "origin", "PMEMCACHE_CACHE_UUID": u,
                 "PMEMCACHE_DM_UUID": "PMEMCACHE-" + u, "PMEMCACHE_KEPT_DIRTY": "0",
                 "SYSTEMD_READY": "0", "UDISKS_IGNORE": "1"}
    assert probe_keys(tree.run("udev-probe", str(tree.dev / "md0"))) == k
    k = probe_keys(tree.run("udev-probe", "pmem0"))
    assert k["PMEMCACHE_ROLE"] == "cache" and k["SYSTEMD_READY"] == "0"
    # the origin is here: the rule sends it a change event by this name
    assert k["PMEMCACHE_ORIGIN"] == "md0"
    for other in ("md1", "md2", "vda", "nosuchdev", "../etc"):
        assert probe_keys(tree.run("udev-probe", other)) == {}, other


def test_udev_probe_and_activate_match_an_md_partition_by_its_number(tool, tmp_path):
    t = FakeTree(tmp_path)
    t.add("md0", "9:0", ORIGIN_SECTORS * 4, md_uuid=MD_UUID)
    t.add("md0p1", "259:8", ORIGIN_SECTORS, parent="md0", partno=1)
    t.add("md0p2", "259:9", ORIGIN_SECTORS, parent="md0", partno=2)
    part1 = MD_UUID[:30] + "%02x" % (int(MD_UUID[30:], 16) ^ 1)   # pmc_origin_identity()
    t.pmem("pmem0", "259:0", ident="md:" + part1)
    assert probe_keys(t.run("udev-probe", "md0p1"))["PMEMCACHE_ROLE"] == "origin"
    assert probe_keys(t.run("udev-probe", "md0p2")) == {}
    assert probe_keys(t.run("udev-probe", "md0")) == {}
    p = t.run("activate", "--all", "--dry-run")
    assert p.returncode == OK, p.stderr
    assert "over %s/md0p1 " % t.dev in p.stdout


def test_udev_probe_and_activate_take_a_cache_with_data_crcs(tool, tmp_path):
    """A cache formatted with data_crc (superblock feature bit 0) is a cache
    like any other to the tool's superblock reader: the udev rule hides its
    origin and activate attaches it (the reader refused every feature bit
    once, so a data_crc cache came back from no reboot)."""
    t = FakeTree(tmp_path)
    t.add("md0", "9:0", ORIGIN_SECTORS, md_uuid=MD_UUID)
    t.pmem("pmem0", "259:0", "--data-crc")
    assert probe_keys(t.run("udev-probe", "md0"))["PMEMCACHE_ROLE"] == "origin"
    p = t.run("activate", "--all", "--dry-run")
    assert p.returncode == OK, p.stderr
    assert "would create" in p.stdout


def test_a_grown_array_is_still_the_origin(tool, tmp_path):
    # mdadm --grow under a live cache: the module caches blocks up to the
    # new end, the superblock keeps the size recorded at format.  udev and
    # activation still know the array by its UUID, and check alone does not
    # call a record past the recorded size damaged.
    t = FakeTree(tmp_path)
    t.add("md0", "9:0", ORIGIN_SECTORS * 2, md_uuid=MD_UUID)
    past = ORIGIN_SECTORS // 8 + 5                          # a block of the grown part
    img = t.pmem("pmem0", "259:0", "write:3:ff:1", "write:%d:ff:2" % past)
    assert probe_keys(t.run("udev-probe", "md0"))["PMEMCACHE_ROLE"] == "origin"
    assert probe_keys(t.run("udev-probe", "pmem0"))["PMEMCACHE_ORIGIN"] == "md0"
    p = t.run("activate", "--all", "--dry-run")
    assert p.returncode == OK, p.stderr
    assert "over %s/md0 " % t.dev in p.stdout
    j = check_json(img, rc=DIRTY)
    r = j["records"]
    assert (r["dirty"], r["out_of_range"], r["past_recorded_size"]) == (2, 0, 1)
    p = run("check", img)
    assert p.returncode == DIRTY and "past size      1 (" in p.stdout, p.stdout
    # without a UUID the size is all there is: the same record is corrupt
    none = mkimage(tmp_path / "none.img", "write:3:ff:1", "write:%d:ff:2" % past)
    j = check_json(none, rc=CORRUPT)
    assert j["records"]["out_of_range"] == 1 and j["records"]["past_recorded_size"] == 0


def test_activate_dry_run_names_the_device_and_its_dm_uuid(tree):
    u = cache_uuid(tree.img)
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == OK and p.stderr == "", p.stderr
    assert p.stdout == ("%s: would create /dev/mapper/pmemcache-%s over %s (DM UUID "
                        "PMEMCACHE-%s, block size 4096)\n"
                        % (tree.img, u[:8], tree.dev / "md0", u))
    p = tree.run("activate", tree.img, "--name", "boot0", "--dry-run")
    assert p.returncode == OK and "/dev/mapper/boot0 over" in p.stdout


def test_activate_with_the_origin_missing_says_so_and_creates_nothing(tree):
    tree.remove("md0", "9:0")
    u = cache_uuid(tree.img)
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == NOORIGIN and p.stdout == ""
    one_error_line(p, str(tree.img), u, "origin (md array 01234567-89ab-cdef-0123-"
                   "456789abcdef, %d sectors) not present; nothing created" % ORIGIN_SECTORS)
    # the identity is the UUID, and a size at least the recorded one: the
    # array with the UUID and a smaller size (md2) and the one with the
    # size and another UUID (md1) are not it
    t0 = time.time()
    p = tree.run("activate", "--all", "--dry-run", "--wait", "1")
    assert p.returncode == NOORIGIN and time.time() - t0 >= 1
    assert "not present after --wait" in p.stderr


def test_activate_wait_finds_an_origin_that_appears_meanwhile(tree):
    tree.remove("md0", "9:0")
    proc = subprocess.Popen([str(TOOL), "activate", "--all", "--dry-run", "--wait", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=tree.env)
    time.sleep(1)
    assert proc.poll() is None              # still waiting
    tree.add("md0b", "9:3", ORIGIN_SECTORS, md_uuid=MD_UUID)   # assembled, other minor
    out, errs = proc.communicate(timeout=20)
    assert proc.returncode == OK, errs
    assert "over %s/md0b " % tree.dev in out


def test_activate_refuses_what_it_cannot_pin_down(tree, tmp_path):
    tree.add("md9", "9:9", ORIGIN_SECTORS, md_uuid=MD_UUID)    # two arrays, one UUID
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == DEVICE
    one_error_line(p, "2 devices have the origin's identity", "nothing created")
    t = FakeTree(tmp_path / "t2")
    img = t.pmem("pmem1", "259:1", ident="none")
    p = t.run("activate", img, "--dry-run")
    assert p.returncode == DEVICE
    one_error_line(p, "records its origin by size %d sectors only" % ORIGIN_SECTORS,
                   "use create")




HALF_A, HALF_B = b"\xaa" * 16, b"\xbb" * 16


def write_mirror_info(img, half, partner, generation=1, flags=0, seq=1, slot=0):
    """A mirror info slot (struct pmc_mirror_info, docs/format.md) naming
    the image's cache as the pair."""
    import struct
    pair = bytes.fromhex(cache_uuid(img).replace("-", ""))
    body = struct.pack("<QQ16s16s16sQQI40s", 0x317272696d434d50, seq, pair, half, partner,
                       generation, 0, flags, bytes(40))
    with open(img, "r+b") as f:
        f.seek(1024 + 128 * slot)
        f.write(body + crc32c(0xFFFFFFFF, body).to_bytes(4, "little"))


def mirror_pair(tree):
    """The tree's cache on pmem0 and a copy on pmem1: the two halves of
    one mirrored cache, in sync."""
    img1 = tree.dev / "pmem1"
    shutil.copy(tree.img, img1)
    tree.add("pmem1", "259:1", PMEM_BYTES // 512)
    write_mirror_info(tree.img, HALF_A, HALF_B)
    write_mirror_info(img1, HALF_B, HALF_A)
    return img1


def test_activate_starts_the_halves_of_a_mirror_together(tree):
    img1 = mirror_pair(tree)
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == OK, p.stderr
    assert len(p.stdout.splitlines()) == 1, p.stdout       # one device for the pair
    assert p.stdout.startswith("%s/pmem0: would create" % tree.dev)
    assert ", mirror %s/pmem1)" % tree.dev in p.stdout, p.stdout
    p = tree.run("activate", img1, "--dry-run")
    assert p.returncode == OK and ", mirror %s/pmem0)" % tree.dev in p.stdout, p.stdout
    # another cache's half is no partner
    write_mirror_info(img1, b"\xcc" * 16, HALF_A)
    p = tree.run("activate", tree.img, "--dry-run")
    assert p.returncode == NOORIGIN, p.stdout


def test_activate_starts_a_half_alone_only_if_it_knows_it_ran_alone(tree):
    mirror_pair(tree)
    tree.remove("pmem1", "259:1")
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == NOORIGIN and p.stdout == ""
    one_error_line(p, "a half of a mirrored cache whose other half is not present",
                   "not activated", "create --mirror missing --degraded")
    # M1 stored (a new generation, the partner stale): it holds every write
    write_mirror_info(tree.img, HALF_A, HALF_B, generation=2, flags=1, seq=2, slot=1)
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == OK and p.stdout.endswith(", mirror -)\n"), p.stdout
    # a half being copied from its partner (RESYNCING) never starts alone
    write_mirror_info(tree.img, HALF_A, HALF_B, generation=2, flags=3, seq=3, slot=0)
    assert tree.run("activate", tree.img, "--dry-run").returncode == NOORIGIN
    p = tree.run("activate", "--all", "--dry-run")     # left to its partner
    assert p.returncode == OK and "no cache on" in p.stdout, p.stdout


def half_pair(images):
    """The images fixture's cache (pmem.img, dirty) and a copy, as the
    two halves of one mirrored cache in sync."""
    pmem, origin, expected = images
    other = pmem.with_name("pmem2.img")
    shutil.copy(pmem, other)
    write_mirror_info(pmem, HALF_A, HALF_B)
    write_mirror_info(other, HALF_B, HALF_A)
    return pmem, other, origin, expected


def test_check_says_what_each_half_knows_and_which_is_current(images):
    pmem, other, _, _ = half_pair(images)
    p = run("check", pmem)
    assert p.returncode == DIRTY, p.stderr
    assert "half aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa, partner bbbbbbbb" in p.stdout
    assert "alone it cannot tell whether the partner ran on since" in p.stdout
    assert "refused: the other half is missing and may have run alone since" in p.stdout
    j = check_json(pmem, "--mirror", other, rc=DIRTY)["mirror"]
    assert j["start"] == "both" and j["holder"] == str(pmem) and j["reason"] is None
    assert [h["generation"] for h in j["halves"]] == [1, 1]
    # B ran alone (M1): B holds every write, A is to be copied from it
    write_mirror_info(other, HALF_B, HALF_A, generation=2, flags=1, seq=2, slot=1)
    j = check_json(pmem, "--mirror", other, rc=DIRTY)["mirror"]
    assert j["start"] == "copy" and j["holder"] == str(other), j
    assert check_json(other, rc=DIRTY)["mirror"]["start"] == "alone"
    p = run("check", tmp_copy(pmem), "--mirror", tmp_copy(other, "plain2.img"))
    assert p.returncode == USAGE
    one_error_line(p, "--mirror: neither", "is a half of a mirrored cache")


def tmp_copy(img, name="plain.img"):
    """A device with no mirror info (a copy of @img without its slots)."""
    c = img.with_name(name)
    shutil.copy(img, c)
    with open(c, "r+b") as f:
        f.seek(1024)
        f.write(bytes(256))
    return c


def test_drain_takes_the_current_half_and_never_a_stale_one(images):
    pmem, other, origin, expected = half_pair(images)
    o0 = sha(origin)
    # A alone cannot tell whether B ran on since: nothing written
    p = run("drain", pmem, origin)
    assert p.returncode == DEVICE and sha(origin) == o0
    one_error_line(p, "a half of a mirrored cache: the other half is missing",
                   "--mirror OTHER gives its other half", "nothing written")
    # B ran alone: with both given, drain reads B; A alone is still refused
    write_mirror_info(other, HALF_B, HALF_A, generation=2, flags=1, seq=2, slot=1)
    p = run("drain", pmem, origin, "--mirror", other)
    assert p.returncode == OK, p.stderr
    assert "draining from %s, the half that holds every acknowledged write" % other in p.stdout
    assert origin.read_bytes() == expected.read_bytes()
    assert check_json(other, rc=OK)["records"]["dirty"] == 0
    assert check_json(pmem, rc=DIRTY)["records"]["dirty"] == WORKLOAD_DIRTY   # left stale


def test_drain_of_halves_in_sync_marks_both_clean(images):
    pmem, other, origin, expected = half_pair(images)
    p = run("drain", pmem, origin, "--mirror", other)
    assert p.returncode == OK, p.stderr
    assert origin.read_bytes() == expected.read_bytes()
    for half in (pmem, other):
        assert check_json(half, rc=OK)["records"]["dirty"] == 0, half
    # --degraded: A alone, the administrator's word
    pmem2, _, origin2, expected2 = half_pair(make_images(pmem.parent / "again"))
    p = run("drain", pmem2, origin2, "--degraded")
    assert p.returncode == OK and origin2.read_bytes() == expected2.read_bytes()


def write_kept_mark(img, uuid, when=1700000000):
    """The mark remove --keep-dirty --force leaves (docs/format.md)."""
    body = b"PMCKEPTD" + when.to_bytes(8, "little") + bytes.fromhex(uuid.replace("-", ""))
    with open(img, "r+b") as f:
        f.seek(3584)
        f.write(body + crc32c(0xFFFFFFFF, body).to_bytes(4, "little"))


def format_md_settings_layout():
    """docs/format.md's "Settings" table: {field: (offset, size)}."""
    doc = (REPO / "docs/format.md").read_text()
    sec = doc.split("### Settings (bytes 2048..3071", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)(?:\[(\d+)\])?` ?(u64|u32)? \|", sec, re.M)
    return {name: (int(off), int(n) if n else {"u64": 8, "u32": 4}[kind])
            for off, name, n, kind in rows}


def write_settings(img, uuid, seq, name, features, slot=0, good=True):
    """A settings slot as docs/format.md lays it out, written by this test's
    own code (not the tool's)."""
    lay = format_md_settings_layout()
    body = bytearray(lay["csum"][0])
    body[0:8] = b"PMCsets1"
    body[8:16] = seq.to_bytes(8, "little")
    body[16:32] = bytes.fromhex(uuid.replace("-", ""))
    off, size = lay["name"]
    body[off:off + len(name)] = name.encode()
    off, size = lay["features"]
    body[off:off + len(features)] = features.encode()
    csum = crc32c(0xFFFFFFFF, bytes(body)) ^ (0 if good else 1)
    with open(img, "r+b") as f:
        f.seek(2048 + 512 * slot)
        f.write(bytes(body) + csum.to_bytes(4, "little"))


def test_activate_takes_the_name_kept_as_format_md_lays_it_out(tree):
    """The settings slots of docs/format.md, written here from the doc's
    table: activate takes the newer valid slot's name; a slot whose checksum
    fails (a torn update) leaves the older one; with none, the default name."""
    lay = format_md_settings_layout()
    assert lay == {"magic": (0, 8), "seq": (8, 8), "cache_uuid": (16, 16), "name": (32, 128),
                   "features": (160, 348), "csum": (508, 4)}, lay
    u = cache_uuid(tree.img)
    write_settings(tree.img, u, 1, "db", "high_watermark 60", slot=0)
    write_settings(tree.img, u, 2, "db2", "high_watermark 70", slot=1)
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == OK and "would create /dev/mapper/db2 " in p.stdout, p.stdout
    write_settings(tree.img, u, 2, "db2", "high_watermark 70", slot=1, good=False)
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == OK and "would create /dev/mapper/db " in p.stdout, p.stdout
    write_settings(tree.img, u, 1, "db", "high_watermark 60", slot=0, good=False)
    p = tree.run("activate", "--all", "--dry-run")
    assert "would create /dev/mapper/pmemcache-%s " % u[:8] in p.stdout, p.stdout


def test_activate_leaves_a_cache_kept_dirty_by_remove(tree):
    u = cache_uuid(tree.img)
    write_kept_mark(tree.img, u)
    assert probe_keys(tree.run("udev-probe", "md0"))["PMEMCACHE_KEPT_DIRTY"] == "1"
    p = tree.run("activate", "--all", "--dry-run")
    assert p.returncode == DIRTY and p.stdout == ""
    one_error_line(p, "was removed with --keep-dirty --force (2023-11-14 22:13:20 UTC)",
                   "not activated", "create --force")
    # check and the module ignore the mark: the superblock is untouched
    c = json.loads(run("check", "--json", tree.img).stdout)
    assert c["verdict"] == "dirty" and c["superblock"]["cache_uuid"] == u
    write_kept_mark(tree.img, "f" * 32)     # another cache's mark: not this one's
    assert probe_keys(tree.run("udev-probe", "md0"))["PMEMCACHE_KEPT_DIRTY"] == "0"
    assert tree.run("activate", "--all", "--dry-run").returncode == OK


@pytest.mark.skipif(not shutil.which("valgrind"), reason="no valgrind")
def test_activate_and_udev_probe_run_clean_under_valgrind(tree):
    vg = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
          "--errors-for-leak-kinds=definite,indirect", str(TOOL)]
    for args, rc in [(["udev-probe", "md0"], OK), (["udev-probe", "pmem0"], OK),
                     (["udev-probe", "vda"], OK),
                     (["activate", "--all", "--dry-run"], OK),
                     (["activate", tree.img, "--dry-run", "--name", "x"], OK),
                     (["activate", "--all", "--dry-run", "--wait", "x"], USAGE)]:
        p = subprocess.run(vg + list(map(str, args)), capture_output=True, text=True,
                           env=tree.env, timeout=120)
        assert p.returncode == rc, (args, p.returncode, p.stderr)
    tree.remove("md0", "9:0")
    p = subprocess.run(vg + ["activate", "--all", "--dry-run"], capture_output=True,
                       text=True, env=tree.env, timeout=120)
    assert p.returncode == NOORIGIN, p.stderr


def test_activate_without_a_cache(tool, tmp_path):
    t = FakeTree(tmp_path)
    (t.dev / "pmem0").write_bytes(b"\0" * PMEM_BYTES)
    t.add("pmem0", "259:0", PMEM_BYTES // 512)
    p = t.run("activate", "--all", "--dry-run")
    assert p.returncode == OK and p.stdout == "no cache on 1 pmem devices\n"
    p = t.run("activate", t.dev / "pmem0", "--dry-run")
    assert p.returncode == NOCACHE
    one_error_line(p, "no cache on this device")
    img = t.dev / "pmem0"
    with open(img, "r+b") as f:                 # a superblock that fails its checksum
        f.write(b"PMEMCach")
    p = t.run("activate", "--all", "--dry-run")
    assert p.returncode == CORRUPT
    one_error_line(p, "does not validate")


# ------------------------------------------------------------------ VM --

def _vm_setup():
    """The module built as tests/test_target.py does, and its guest prelude."""
    import test_target
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)
    p = test_target.build_module()
    assert p.returncode == 0, p.stderr
    return test_target


@pytest.fixture(scope="module")
def guest(tool):
    return _vm_setup()


CREATE_FIO = r"""
pmc_init
md_make md0 raid5 4 a
# high watermark 100: nothing is written back until we flush, so the
# counters must match exactly what fio wrote.
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
[ -b /dev/mapper/pc ] || die "no /dev/mapper/pc"
set +e
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 2>/tmp/e; echo "INUSE_RC=$?"
echo "INUSE_ERR=$(cat /tmp/e)"
pmemcachectl create pc2 --origin /dev/md0 --cache /dev/vde 2>/tmp/e; echo "NOTPMEM_RC=$?"
echo "NOTPMEM_ERR=$(cat /tmp/e)"
dmsetup create --noudevsync lin --table "0 8 linear /dev/vdf 0"
pmemcachectl status lin 2>/tmp/e; echo "WRONGTYPE_RC=$?"
dmsetup remove lin
echo "WRONGTYPE_ERR=$(cat /tmp/e)"
set -e
fio_job seq /dev/mapper/pc --rw=write --bs=64k --size=8m --offset=0
echo "JSON1=$(pmemcachectl status pc --json --interval 0 | tr -d '\n')"
pmemcachectl status pc > /tmp/st || die "human status"
echo "HUMAN_DIRTY=$(grep '^  dirty ' /tmp/st | tr -s ' ')"
pmemcachectl list
echo "LIST=$(pmemcachectl list --json | tr -d '\n')"
# Ctrl-C during a flush: exit 130, the device keeps working.
fio_job big /dev/mapper/pc --rw=write --bs=1m --size=96m --offset=16m
pmemcachectl flush pc > /tmp/fl 2>&1 &
p=$!
sleep 1
kill -INT $p
set +e
wait $p
echo "INT_RC=$?"
set -e
cat /tmp/fl
echo "INT_ERR=$(tail -1 /tmp/fl)"
echo "JSONI=$(pmemcachectl status pc --json --interval 0 | tr -d '\n')"
dd if=/dev/mapper/pc of=/dev/null bs=4096 count=16 iflag=direct 2>/dev/null ||
	die "device dead after Ctrl-C"
pmemcachectl flush pc > /tmp/flush || die flush
cat /tmp/flush
echo "JSON2=$(pmemcachectl status pc --json | tr -d '\n')"
pmemcachectl remove pc || die remove
[ ! -e /dev/mapper/pc ] || die "node left behind"
fio_check seq /dev/md0 --rw=write --bs=64k --size=8m --offset=0
fio_check big /dev/md0 --rw=write --bs=1m --size=96m --offset=16m
echo DONE=1
"""


def test_vm_create_fio_status_flush_remove(vm, guest):
    res = vm.run(guest.PRELUDE + CREATE_FIO, timeout=900)
    assert res.value("DONE") == "1"
    assert res.value("INUSE_RC") == str(DEVICE)
    assert "name already in use" in res.value("INUSE_ERR")
    assert res.value("NOTPMEM_RC") == str(DEVICE)
    assert "not a pmem namespace" in res.value("NOTPMEM_ERR")
    assert res.value("WRONGTYPE_RC") == str(DEVICE)
    assert "not a pmemcache device" in res.value("WRONGTYPE_ERR")
    j1, j2 = json.loads(res.value("JSON1")), json.loads(res.value("JSON2"))
    check_status_schema(j1)
    check_status_schema(j2)
    blocks_written = 8 * 1024 * 1024 // 4096
    assert j1["write_new"] == blocks_written and j1["write_hits"] == 0
    assert j1["dirty"] == blocks_written
    assert j1["dirty_bytes"] == 8 * 1024 * 1024
    assert j1["blocks"] - j1["free"] == blocks_written
    assert j1["read_hits"] >= blocks_written      # fio's verify pass
    assert j1["writeback_bytes"] == 0 and j1["errors"] == 0
    assert j1["origin"] == "/dev/md0" and j1["cache"] == "/dev/pmem0"
    assert abs(j1["dirty_fraction"] - blocks_written / j1["blocks"]) < 1e-9
    assert res.value("HUMAN_DIRTY").startswith(" dirty %d (" % blocks_written)
    lst = json.loads(res.value("LIST"))
    assert [d["name"] for d in lst] == ["pc"]
    ji = json.loads(res.value("JSONI"))
    big = 96 * 1024 * 1024 // 4096
    if ji["dirty"] > 0:             # else the flush beat the signal
        assert res.value("INT_RC") == "130"
        assert "interrupted; the device keeps working" in res.value("INT_ERR")
    assert ji["mode"] == "normal"
    total = blocks_written + big
    assert j2["dirty"] == 0 and j2["clean"] == total
    assert j2["writeback_blocks"] == total
    assert j2["writeback_bytes"] == total * 4096
    assert j2["errors"] == 0
    assert res.values("VERIFY_OK") == ["seq", "big"]


NBLOCKS = 64
WRITER = r"""
pmc_init
md_make md0 raid5 4 a
# max_age: a block is written back once its epoch (max_age/2) ended, 0-4 s
# after it got dirty, so at the cut the older blocks are clean (or in
# writeback). The watermarks (1-2 %% of the cache) are never reached by the
# 64 blocks written: with low_watermark 0, any dirty block started writeback.
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 \
	--high-watermark 2 --low-watermark 1 --max-age 8000 || die create
# A cut could still find every block clean, so after a seeded time aging
# stops: the writes begun after AGING_OFF stay dirty.
( sleep %(aging_s).1f; dmsetup message pc 0 max_age 0 && echo AGING_OFF=1 ) &
""" + tp.WRITE_LOOP

DRAIN = r"""
# No insmod: the module is not loaded; only the tool and md.
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
grep -q pmemcache /proc/modules && die "module loaded"
set +e
pmemcachectl check /dev/pmem0 --origin /dev/md0; echo "CHECK1_RC=$?"
pmemcachectl drain /dev/pmem0 /dev/vdf 2>/tmp/e; echo "WRONG_ORIGIN_RC=$?"
echo "WRONG_ORIGIN_ERR=$(cat /tmp/e)"
# create reads the metadata before anything else
pmemcachectl create pc -o /dev/md0 -c /dev/pmem0 --format 2>/tmp/e; echo "FORMAT_RC=$?"
echo "FORMAT_ERR=$(cat /tmp/e)"
pmemcachectl create pc -o /dev/vdf -c /dev/pmem0 2>/tmp/e; echo "OTHER_RC=$?"
echo "OTHER_ERR=$(cat /tmp/e)"
pmemcachectl create pc -o /dev/md0 -c /dev/pmem0 --force 2>/tmp/e; echo "NOMOD_RC=$?"
echo "NOMOD_ERR=$(cat /tmp/e)"
set -e
echo "CHECK1=$(pmemcachectl check --json /dev/pmem0 | tr -d '\n')"
pmemcachectl drain --json /dev/pmem0 /dev/md0 > /tmp/drain || die drain
echo "DRAIN=$(tr -d '\n' < /tmp/drain)"
set +e
pmemcachectl check /dev/pmem0 --origin /dev/md0 > /dev/null; echo "CHECK2_RC=$?"
set -e
dd if=/dev/md0 of=/tmp/o bs=4096 count=%(nblocks)d iflag=direct 2>/dev/null || die "read md0"
s=0
while [ $s -lt %(nsec)d ]; do
	echo "S $s $(dd if=/tmp/o bs=16 skip=$((s * 32)) count=1 2>/dev/null | tr -d '\000\n')"
	s=$((s + 1))
done
echo DONE=1
"""


def wait_for_dirty_write(boot, seconds=300):
    """Until a write begun after AGING_OFF was acknowledged: the cut then
    finds at least that block dirty."""
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        _, text, _ = boot.read()
        off = text.find("AGING_OFF=1\n")
        started = re.findall(r"^W (\d+) ", text[off:], re.M) if off >= 0 else []
        if started and re.search(r"^ACK %s$" % started[0], text, re.M):
            return
        time.sleep(0.2)
    raise AssertionError("no write acknowledged after aging stopped:\n" + text[-3000:])


def test_vm_drain_after_power_cut_without_module(vm, guest):
    rng = random.Random(int(os.environ.get("PMC_SEED", "77")))
    proc, log = vm.start(guest.PRELUDE + WRITER % dict(seed=rng.randrange(1, 30000),
                                                      nblocks=NBLOCKS,
                                                      aging_s=3 + rng.random() * 8), timeout=600)
    try:
        tp.wait_for_acks(log, rng.randrange(40, 120))
        wait_for_dirty_write(log)
        time.sleep(rng.random() * 0.5)
    finally:
        tp.power_cut(vm, proc)
    console = tp.cut_console(log)
    allowed, nacked = tp.expected_sectors(console)
    assert nacked > 0

    res = vm.run(DRAIN % dict(nblocks=NBLOCKS, nsec=NBLOCKS * 8), timeout=600)
    assert res.value("DONE") == "1"
    assert res.value("CHECK1_RC") in (str(OK), str(DIRTY))
    c1 = json.loads(res.value("CHECK1"))
    assert c1["verdict"] in ("clean", "dirty") and c1["origin"]["kind"] == "md"
    assert res.value("WRONG_ORIGIN_RC") == str(MISMATCH)
    assert "origin size differs" in res.value("WRONG_ORIGIN_ERR")
    if c1["records"]["dirty"]:
        assert res.value("FORMAT_RC") == str(DIRTY)
        assert "--format would lose them" in res.value("FORMAT_ERR")
    assert res.value("OTHER_RC") == str(MISMATCH)
    assert "origin size differs" in res.value("OTHER_ERR")
    assert res.value("NOMOD_RC") == str(DM)
    assert "target is not loaded" in res.value("NOMOD_ERR")
    d = json.loads(res.value("DRAIN"))
    assert d["blocks"] == c1["records"]["dirty"] and d["error"] is None
    assert d["blocks"] > 0          # the writes after AGING_OFF
    assert res.value("CHECK2_RC") == str(OK)
    got = tp.read_back(res)
    assert len(got) == NBLOCKS * 8
    lost = tp.lost_writes(got, allowed)
    print("acknowledged writes: %d, dirty blocks drained: %d, clean: %d"
          % (nacked, d["blocks"], c1["records"]["clean"]))
    assert not lost, lost


MEDIA_ERRORS = r"""
pmc_init
pmemcachectl create pc --origin /dev/vdf --cache /dev/pmem0 || die create
dd if=/dev/urandom of=/dev/mapper/pc bs=4k count=64 oflag=direct 2>/dev/null || die write
pmemcachectl remove --keep-dirty --force pc || die remove
# media errors in the last page of record window 0 and the first of window 1
echo "2040 8" > /sys/block/pmem0/badblocks || die badblocks
echo "2048 8" > /sys/block/pmem0/badblocks || die badblocks
set +e
pmemcachectl check --json /dev/pmem0 > /tmp/new; echo "NEW_RC=$?"
/test/pmemcachectl-old check --json /dev/pmem0 > /tmp/old; echo "OLD_RC=$?"
set -e
echo "NEW=$(tr -d '\n' < /tmp/new)"
echo "OLD=$(tr -d '\n' < /tmp/old)"
"""


def test_vm_media_errors_in_a_read_window_cost_only_their_records(vm, guest, baseline):
    # A window that fails to read is read record by record, as before:
    # only the records of the two bad pages (2 x 128) are unreadable.
    res = vm.run(guest.PRELUDE + MEDIA_ERRORS, timeout=600,
                 files=[(baseline, "/test/pmemcachectl-old")])
    assert res.value("NEW_RC") == res.value("OLD_RC") == str(CORRUPT)
    new = json.loads(res.value("NEW"))
    assert res.value("NEW") == res.value("OLD")
    assert new["verdict"] == "damaged" and new["records"]["unreadable"] == 256
    assert new["records"]["dirty"] == 64


DETACH_MEDIA = r"""
pmc_init
pmemcachectl create pc --origin /dev/vdf --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
dd if=/dev/urandom of=/dev/mapper/pc bs=4k count=8 oflag=direct 2>/dev/null || die write
# a fresh cache hands out slot 0 first: block 0's data is poisoned
doff=$(dd if=/dev/pmem0 bs=4096 count=1 iflag=direct 2>/dev/null | od -An -tu8 -j104 -N8 | tr -d ' ')
echo "$((doff / 512)) 8" > /sys/block/pmem0/badblocks || die badblocks
set +e
timeout 200 pmemcachectl detach pc --timeout 120 > /dev/null 2> /tmp/e; echo "MEDIA_RC=$?"
set -e
echo "MEDIA_ERR=$(tail -1 /tmp/e)"
echo "MEDIA_TABLE=$(dmsetup table pc | awk '{print $3}')"
echo "MEDIA_DIRTY=$(dmsetup status pc | awk '{print $5}')"
"""


def test_vm_detach_stops_on_a_pmem_media_error(vm, guest):
    """A dirty block whose pmem is poisoned is never written back, so a
    detach cannot drain: it must fail at once with the media error (not
    wait out --timeout, not loop), and restore the cache."""
    res = vm.run(guest.PRELUDE + DETACH_MEDIA, timeout=600)
    assert res.value("MEDIA_RC") == str(IO), res.tail()
    line = res.value("MEDIA_ERR")
    assert "a pmem media error" in line and "blocks still dirty" in line, line
    assert line.endswith("the cache stays attached, table and settings restored"), line
    assert res.value("MEDIA_TABLE") == "pmemcache"
    assert int(res.value("MEDIA_DIRTY")) >= 1


# ------------------------------------------------------ detach and set --
GUEST_IO = REPO / "tests/guest/durable_io"      # .c


@pytest.fixture(scope="module")
def writer_tool(guest, tmp_path_factory):
    """tests/guest/durable_io.c, static, for the guest.  Built in a folder
    of this test's own: test_durability (another pytest worker) may be
    rebuilding tests/guest/durable_io while a guest of ours is packed."""
    out = tmp_path_factory.mktemp("writer") / "durable_io"
    p = subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
                        "-o", str(out), str(GUEST_IO) + ".c"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return [(out, "/usr/bin/durable_io")]


DETACH_LIB = r"""
# dm status fields: dirty $5, wb_errors $20, mode $25, health $36
st() { dmsetup status pc | awk -v f=$1 '{print $f}'; }
# 0 too before the writer's shell has created its file
acks() { n=$(grep -c '^ACK' $1 2>/dev/null || true); echo ${n:-0}; }
wait_acks() {
	n=0
	while [ "$(acks $1)" -lt $2 ]; do
		grep -q FAIL $1 && { cat $1 | grep FAIL; die "writer failed"; }
		n=$((n + 1))
		[ $n -lt 600 ] || die "writer too slow"
		sleep 1
	done
}
# state TAG: the device's table, mode, state and tables after a restore
state() {
	echo "$1_TABLE=$(dmsetup table pc)"
	echo "$1_MODE=$(st 25)"
	echo "$1_DIRTY=$(st 5)"
	echo "$1_HEALTH=$(dmsetup status pc | awk '{print $NF}')"
	echo "$1_STATE=$(dmsetup info pc | awk '/^State:/ {print $2}')"
	echo "$1_TABLES=$(dmsetup info pc | sed -n 's/^Tables present: *//p')"
	echo "$1_OPEN=$(dmsetup info -c --noheadings -o open pc)"
}
"""

# Expected content of every sector the two writers wrote (durable_io check
# format): /tmp/w1, random writes of two threads, is replayed per sector
# (last acknowledged write; a write that was in flight at the kill may or
# may not be there); /tmp/w2, one sequential writer that never wraps, is
# one line per write.
EXPECT = r"""
awk '
FNR == 1 { f++ }
$1 == "ACK" { ack[$2] = 1; next }
$1 == "W" && NF == 4 { n++; id[n] = $2; st[n] = $3; ct[n] = $4; fl[n] = f }
END {
	lo = -1; hi = -1; last = -1
	for (i = 1; i <= n; i++) {
		if (fl[i] == 2) {
			if (st[i] + 0 <= last) { print "WRAPPED"; exit 1 }
			last = st[i] + 0
			print st[i], ct[i], (id[i] in ack) ? id[i] : id[i] ",0"
			continue
		}
		for (k = st[i] + 0; k < st[i] + ct[i]; k++) {
			prev = (k in cur) ? cur[k] : 0
			if (id[i] in ack) { cur[k] = id[i]; delete alt[k] }
			else { alt[k] = prev; cur[k] = id[i] }
			if (lo < 0 || k < lo) lo = k
			if (k > hi) hi = k
		}
	}
	pv = ""; pn = 0; ps = 0
	for (k = lo; lo >= 0 && k <= hi + 1; k++) {
		v = ""
		if (k in cur) v = cur[k] ((k in alt) ? "," alt[k] : "")
		if (v == pv && v != "") { pn++; continue }
		if (pv != "") print ps, pn, pv
		ps = k; pn = 1; pv = v
	}
}' /tmp/w1 /tmp/w2 > /tmp/expect || die "expect: $(tail -1 /tmp/expect)"
echo "EXPECT_LINES=$(wc -l < /tmp/expect)"
"""

DETACH_BUSY = DETACH_LIB + r"""
pmc_init
md_make md0 raid5 4 a
# Watermarks 100: nothing is written back before the detach.
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
# Random writes of 512 B to 64 KiB (partial blocks too), left dirty.
durable_io write /dev/mapper/pc 0 16384 2 1 %(seed)d > /tmp/w1 &
p1=$!
wait_acks /tmp/w1 300
kill -9 $p1
wait $p1 || true
# The writer that runs across the detach: sequential, O_DIRECT, some
# writes O_DSYNC or followed by fdatasync; it dies at its first error.
durable_io write /dev/mapper/pc 65536 2097152 1 100000000 %(seed)d seq > /tmp/w2 &
wp=$!
wait_acks /tmp/w2 150
echo "DIRTY_BEFORE=$(st 5)"
echo "OPEN_BEFORE=$(dmsetup info -c --noheadings -o open pc)"
set +e
pmemcachectl detach pc --timeout 600 > /tmp/d.out 2> /tmp/d.err
echo "DETACH_RC=$?"
set -e
kill -0 $wp && echo WRITER_ALIVE=1
echo "ACKS_AT_DETACH=$(acks /tmp/w2)"
sed 's/^/DERR: /' /tmp/d.err
sed 's/^/DOUT: /' /tmp/d.out
echo "TABLE1=$(dmsetup table pc)"
echo "OPEN_AFTER=$(dmsetup info -c --noheadings -o open pc)"
echo "MD_DEV=$(cat /sys/block/md0/dev)"
sleep 3
kill -0 $wp && echo WRITER_ALIVE2=1
echo "ACKS_LATER=$(acks /tmp/w2)"
kill -9 $wp
wait $wp || true
echo "WRITER_FAILS=$(cat /tmp/w1 /tmp/w2 | grep -c FAIL || true)"
""" + EXPECT + r"""
set +e
durable_io check /dev/mapper/pc /tmp/expect > /tmp/c1; echo "DEV_RC=$?"
durable_io check /dev/md0 /tmp/expect > /tmp/c2; echo "MD_RC=$?"
set -e
for c in DEV:c1 MD:c2; do
	grep '^CHECK' /tmp/${c#*:} | sed "s/^/${c%%:*}_/"
	grep '^BAD' /tmp/${c#*:} | head -5 | sed "s/^/${c%%:*}_/"
done
# The cache forgotten: blank superblock, so a create without --format
# formats it and cannot serve its old blocks over what the origin got
# meanwhile (the first MiB, cached before the detach, written since).
cmp -n 4096 /dev/pmem0 /dev/zero > /dev/null && echo SB_CLEARED=1
dd if=/dev/urandom of=/tmp/new bs=1M count=1 2>/dev/null
dd if=/tmp/new of=/dev/mapper/pc bs=1M count=1 oflag=direct 2>/dev/null || die "write linear"
dmsetup remove pc || die "remove linear"
pmemcachectl create pc2 --origin /dev/md0 --cache /dev/pmem0 || die "create again"
dd if=/dev/mapper/pc2 of=/tmp/got bs=1M count=1 iflag=direct 2>/dev/null || die "read pc2"
cmp /tmp/new /tmp/got > /dev/null && echo REATTACH_SAME=1
echo "STATUS_PC2=$(pmemcachectl status pc2 | tr '\n' ' ')"
echo DONE=1
"""


def test_vm_detach_while_a_writer_keeps_the_device_busy(vm, guest, writer_tool):
    res = vm.run(guest.PRELUDE + DETACH_BUSY % dict(seed=random.randrange(1, 1 << 30)),
                 files=writer_tool, timeout=1500)
    assert res.value("DONE") == "1"
    assert int(res.value("DIRTY_BEFORE")) > 0
    assert int(res.value("OPEN_BEFORE")) >= 1
    errors = re.findall(r"^DERR: pmemcachectl: .*$", res.output, re.M)
    assert not errors, errors
    assert res.value("DETACH_RC") == "0", res.tail()
    m = re.search(r"^DERR: pc: detach: cleaner mode, (\d+) dirty blocks to write back$",
                  res.output, re.M)
    assert m and int(m.group(1)) > 0, res.tail()
    # the device stayed open and the writer went on, on the origin now
    assert res.value("WRITER_ALIVE") == "1" and res.value("WRITER_ALIVE2") == "1"
    assert res.value("WRITER_FAILS") == "0"
    assert int(res.value("ACKS_LATER")) > int(res.value("ACKS_AT_DETACH"))
    assert int(res.value("OPEN_AFTER")) >= 1
    size = res.value("TABLE1").split()[1]
    assert res.value("TABLE1") == "0 %s linear %s 0" % (size, res.value("MD_DEV"))
    assert "pc: detached: linear on /dev/md0" in res.output
    # every acknowledged write, through the device and on md itself
    assert int(res.value("EXPECT_LINES")) > 100
    for who in ("DEV", "MD"):
        assert res.value(who + "_RC") == "0", res.tail()
        m = re.search(r"^%s_CHECK sectors=(\d+) ok=(\d+) bad=(\d+)$" % who, res.output, re.M)
        assert m and int(m.group(1)) > 0 and m.group(1) == m.group(2) and m.group(3) == "0"
    # and the cache left behind is forgotten: attached again, it serves
    # what the origin got after the detach, not its old blocks
    assert "pc: the superblock of /dev/pmem0 is cleared" in res.output
    assert res.value("SB_CLEARED") == "1"
    assert res.value("REATTACH_SAME") == "1", res.tail()


STAGES = ["cleaner", "load", "swap", "linear", "suspend", "check", "resume"]

DETACH_RESTORE = DETACH_LIB + r"""
pmc_init
md_make md0 raid5 4 a
N=$(blockdev --getsz /dev/md0)
dm_create orig "0 $N linear /dev/md0 0"
pmemcachectl create pc --origin /dev/mapper/orig --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
pmemcachectl set pc full_wait 250 > /dev/null || die "set full_wait"
exec 3< /dev/mapper/pc
fio_job data /dev/mapper/pc --rw=write --bs=64k --size=64m --offset=0
state T0
# sb TAG: the superblock area, which a failed detach must leave as it was
sb() { echo "$1_SB=$(dd if=/dev/pmem0 bs=4096 count=1 iflag=direct 2>/dev/null | md5sum)"; }
sb T0
origin() {
	dmsetup load orig --table "0 $N $1" || die "load orig $1"
	dmsetup suspend orig || die "suspend orig"
	dmsetup resume --noudevsync orig || die "resume orig"
}
set +e
# a slow origin: every write takes 2 s
origin "delay /dev/md0 0 0 /dev/md0 0 2000"
pmemcachectl detach pc --timeout 3 > /dev/null 2> /tmp/e; echo "TIMEOUT_RC=$?"
echo "TIMEOUT_ERR=$(tail -1 /tmp/e)"
state TIMEOUT
pmemcachectl detach pc > /dev/null 2> /tmp/e &
p=$!
sleep 3
kill -INT $p
wait $p; echo "INT_RC=$?"
echo "INT_ERR=$(tail -1 /tmp/e)"
state INT
# a failing origin
origin "error"
pmemcachectl detach pc --timeout 300 > /dev/null 2> /tmp/e; echo "EIO_RC=$?"
echo "EIO_ERR=$(tail -1 /tmp/e)"
state EIO
origin "linear /dev/md0 0"
for s in %(stages)s; do
	PMEMCACHECTL_DETACH_FAIL=$s pmemcachectl detach pc > /dev/null 2> /tmp/e
	echo "INJ_${s}_RC=$?"
	echo "INJ_${s}_ERR=$(tail -1 /tmp/e)"
	state INJ_$s
	sb INJ_$s
	# something dirty again for the next stage
	dd if=/dev/urandom of=/dev/mapper/pc bs=4k count=16 seek=$((40000 + ${#s} * 16)) \
		oflag=direct 2> /dev/null
done
set -e
fio_check data /dev/mapper/pc --rw=write --bs=64k --size=64m --offset=0
pmemcachectl detach pc > /dev/null || die detach
echo "FINAL_TABLE=$(dmsetup table pc)"
echo "ORIG_DEV=$(dmsetup info -c --noheadings -o major,minor --separator : orig)"
fio_check data /dev/mapper/pc --rw=write --bs=64k --size=64m --offset=0
fio_check data /dev/md0 --rw=write --bs=64k --size=64m --offset=0
echo DONE=1
"""


def test_vm_detach_failures_restore_the_cache(vm, guest):
    res = vm.run(guest.PRELUDE + DETACH_RESTORE % dict(stages=" ".join(STAGES)),
                 timeout=1500)
    assert res.value("DONE") == "1"
    t0 = res.value("T0_TABLE")
    assert "pmemcache" in t0 and "full_wait 250" in t0 and "high_watermark 100" in t0
    assert res.value("T0_MODE") == "-" and int(res.value("T0_DIRTY")) == 16384

    def restored(tag, rc, *words):
        assert res.value(tag + "_RC") == str(rc), (tag, res.tail())
        line = res.value(tag + "_ERR")
        assert line.startswith("pmemcachectl: detach: pc: detach failed: "), line
        assert line.endswith("the cache stays attached, table and settings restored"), line
        for w in words:
            assert w in line, (tag, w, line)
        assert res.value(tag + "_TABLE") == t0, tag
        assert res.value(tag + "_MODE") == "-", tag
        assert res.value(tag + "_STATE") == "ACTIVE", tag
        assert res.value(tag + "_TABLES") == "LIVE", tag
        assert int(res.value(tag + "_OPEN")) >= 1, tag

    restored("TIMEOUT", DIRTY, "still dirty after --timeout 3 s")
    assert int(res.value("TIMEOUT_DIRTY")) > 0
    restored("INT", 130, "interrupted")
    assert int(res.value("INT_DIRTY")) > 0
    restored("EIO", IO, "an origin write failed")
    assert "origin_failing" in res.value("EIO_HEALTH")
    assert int(res.value("EIO_DIRTY")) > 0
    for s in STAGES:
        restored("INJ_" + s, IO if s == "check" else DM, "injected failure at " + s)
        # "resume" fails after the superblock was cleared: it is put back
        assert res.value("INJ_%s_SB" % s) == res.value("T0_SB"), s
    # after all that, the data; then a detach that works, over a dm origin
    assert res.values("VERIFY_OK") == ["data", "data", "data"]
    size = res.value("FINAL_TABLE").split()[1]
    assert res.value("FINAL_TABLE") == "0 %s linear %s 0" % (size, res.value("ORIG_DEV"))


# Boot 1: clean blocks in the cache, detach stopped just after the linear
# table went live (its test hook), new data written to the origin through
# it; then the host cuts the power.
DETACH_CUT = r"""
pmc_init
md_make md0 raid5 4 a
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 || die create
dd if=/dev/urandom of=/tmp/old bs=1M count=1 2>/dev/null
dd if=/tmp/old of=/dev/mapper/pc bs=1M count=1 oflag=direct 2>/dev/null || die "write old"
pmemcachectl flush pc > /dev/null || die flush
echo "CLEAN_BLOCKS=$(dmsetup status pc | awk '{print $4 - $5}')"
PMEMCACHECTL_DETACH_PAUSE=switched pmemcachectl detach pc > /dev/null 2> /tmp/e &
n=0
until grep -q "paused at switched" /tmp/e; do
	n=$((n + 1)); [ $n -lt 600 ] || die "detach never reached the switch: $(cat /tmp/e)"
	sleep 0.5
done
echo "TABLE=$(dmsetup table pc | awk '{print $3}')"
dd if=/dev/urandom of=/tmp/new bs=1M count=1 2>/dev/null
dd if=/tmp/new of=/dev/mapper/pc bs=1M count=1 oflag=direct conv=fsync 2>/dev/null \
	|| die "write new"
echo "OLD_SUM=$(md5sum < /tmp/old)"
echo "NEW_SUM=$(md5sum < /tmp/new)"
echo CUT_NOW=1
sleep 3600
"""

# Boot 2: what activation at boot (the udev rule's command) makes of it.
DETACH_CUT_BOOT2 = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
set +e
pmemcachectl activate --all > /dev/null 2> /tmp/e; echo "ACT_RC=$?"
set -e
dev=/dev/md0
cname=$(dmsetup info -c --noheadings -o name 2>/dev/null | grep -v '^No devices' | head -1)
[ -n "$cname" ] && dev=/dev/mapper/$cname
echo "READ_FROM=$dev"
echo "GOT_SUM=$(dd if=$dev bs=1M count=1 iflag=direct 2>/dev/null | md5sum)"
"""


def test_vm_a_cut_after_detach_switched_serves_no_stale_block(vm, guest):
    """detach clears the cache's superblock before the linear table goes
    live: a power cut once the origin was written around the cache must not
    leave a cache that activation attaches again with its clean, now stale
    blocks (tests/tool_mutants.py: the superblock cleared after the switch,
    as before, is caught here)."""
    proc, log = vm.start(guest.PRELUDE + DETACH_CUT, timeout=900)
    try:
        deadline = time.time() + 600
        while "CUT_NOW=1" not in log.read()[1]:
            assert proc.poll() is None, log.read()[1][-3000:]
            assert time.time() < deadline, "no CUT_NOW"
            time.sleep(0.2)
    finally:
        tp.power_cut(vm, proc)
    out = tp.cut_console(log)
    vals = dict(re.findall(r"^([A-Z_]+)=(.*)$", out, re.M))
    assert int(vals["CLEAN_BLOCKS"]) >= 256 and vals["TABLE"] == "linear", vals
    assert vals["OLD_SUM"] != vals["NEW_SUM"]
    res = vm.run(guest.PRELUDE + DETACH_CUT_BOOT2, timeout=600)
    got = res.value("GOT_SUM")
    if got == vals["OLD_SUM"]:
        print("STALE_DATA: read the cache's old blocks from %s" % res.value("READ_FROM"))
    assert got == vals["NEW_SUM"], (res.value("READ_FROM"), res.tail())


SET = DETACH_LIB + r"""
pmc_init
md_make md0 raid5 4 a
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 || die create
echo "S0=$(dmsetup status pc)"
for kv in "high_watermark 60" "low-watermark 40" "writeback_jobs 8" "full_wait 250" \
	  "seq_bypass 64" "stripe_blocks 16" "max_age 5000" "cleaner on"; do
	pmemcachectl set pc $kv > /tmp/o || die "set $kv"
	echo "OUT=$(cat /tmp/o)"
done
echo "S1=$(dmsetup status pc)"
echo "T1=$(dmsetup table pc)"
dmsetup suspend pc
dmsetup resume --noudevsync pc
echo "S2=$(dmsetup status pc)"
pmemcachectl set pc cleaner off > /dev/null || die "cleaner off"
echo "S3=$(dmsetup status pc)"
set +e
for kv in "high_watermark 101" "low_watermark 70" "writeback_jobs 0" "writeback pfn" \
	  "bogus 1" "full_wait x"; do
	pmemcachectl set pc $kv 2> /tmp/e
	echo "BAD_RC=$?|$(cat /tmp/e)"
done
pmemcachectl set nosuch full_wait 5 2> /tmp/e; echo "NOSUCH_RC=$?"
dmsetup create --noudevsync lin --table "0 8 linear /dev/vdf 0"
pmemcachectl set lin full_wait 5 2> /tmp/e; echo "LIN_RC=$?|$(cat /tmp/e)"
set -e
echo "T2=$(dmsetup table pc)"
echo DONE=1
"""


def test_vm_set_changes_the_running_cache(vm, guest):
    res = vm.run(guest.PRELUDE + SET, timeout=900)
    assert res.value("DONE") == "1"
    s0, s1, s2, s3 = (res.value(k).split()[3:] for k in ("S0", "S1", "S2", "S3"))
    blocks = int(s0[0])
    # status: 22 mode, 24 wb_target (low_watermark of the blocks), 25 stripe_blocks
    assert s0[21] == "-" and int(s0[23]) == blocks * 45 // 100
    assert s1[21] == "cleaner" and int(s1[23]) == blocks * 40 // 100
    assert s1[24] == s0[24]                 # stripe_blocks: from the next resume
    assert s2[24] == "16" and s2[21] == "cleaner"
    assert s3[21] == "-"
    assert res.values("OUT") == ["pc: high_watermark 60", "pc: low_watermark 40",
                                 "pc: writeback_jobs 8", "pc: full_wait 250",
                                 "pc: seq_bypass 64",
                                 "pc: stripe_blocks 16 (from the next resume)",
                                 "pc: max_age 5000", "pc: cleaner on"]
    feats = res.value("T1").split(None, 6)[6]
    assert feats == ("15 high_watermark 60 low_watermark 40 writeback_jobs 8 max_age 5000 "
                     "stripe_blocks 16 full_wait 250 seq_bypass 64 cleaner"), feats
    bad = [l.split("|", 1) for l in res.values("BAD_RC")]
    assert bad[0] == [str(DM), "pmemcachectl: set: pc: the target refused 'high_watermark 101': "
                      "message high_watermark: Invalid high_watermark (0-100)"]
    assert bad[1] == [str(DM), "pmemcachectl: set: pc: the target refused 'low_watermark 70': "
                      "message low_watermark: low_watermark would be above high_watermark"]
    assert bad[2][0] == str(DM) and "Invalid writeback_jobs (1-65536)" in bad[2][1]
    assert bad[3][0] == str(USAGE) and "writeback cannot change" in bad[3][1]
    assert bad[4][0] == str(USAGE) and "unknown key 'bogus'" in bad[4][1]
    assert bad[5][0] == str(USAGE) and "'x' is not a number" in bad[5][1]
    assert res.value("NOSUCH_RC") == str(DEVICE)
    assert res.value("LIN_RC").startswith(str(DEVICE) + "|")
    assert "not a pmemcache device" in res.value("LIN_RC")
    # the refusals changed nothing
    assert res.value("T2") == res.value("T1").replace(" 15 ", " 14 ").replace(" cleaner", "")


# ---------------------------------------------------------- activate (VM) --
# Boot 1: a cache over md, written, then the power goes (the script ends,
# nothing is removed; high watermark 100: every block stays dirty).
ACT_BOOT1 = r"""
pmc_init
md_make md0 raid5 4 a
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
# two tunables changed after create: kept with the cache, as the name
pmemcachectl set pc full_wait 250 > /dev/null || die "set full_wait"
pmemcachectl set pc writeback_jobs 8 > /dev/null || die "set writeback_jobs"
echo "TABLE1=$(dmsetup table pc)"
echo "UUID1=$(dmsetup info -c --noheadings -o uuid pc)"
echo "PROBE1=$(pmemcachectl udev-probe pmem0 | tr '\n' ' ')"
echo "LIST1=$(pmemcachectl list --json | tr -d '\n')"
fio_job act /dev/mapper/pc %(job)s
echo DONE=1
"""

# Boot 2: no udev here, so the tool runs by hand what the rule would run.
ACT_BOOT2 = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
ndevs() { dmsetup info -c --noheadings -o name 2>/dev/null | grep -vc '^No devices' || true; }
# show KEY FILE: the file on one line, lines joined by '|'
show() { echo "$1=$(tr '\n' '|' < "$2" | sed 's/|$//')"; }
set +e
# md not assembled yet: the origin is missing, nothing is created
pmemcachectl activate --all > /tmp/o 2> /tmp/e; echo "ACT1_RC=$?"
show ACT1_OUT /tmp/o; show ACT1_ERR /tmp/e
echo "ACT1_DEVS=$(ndevs)"
pmemcachectl activate --all --wait 2 2> /tmp/e; echo "ACTW_RC=$?"
show ACTW_ERR /tmp/e
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1 || die assemble
echo "PROBE_MD=$(pmemcachectl udev-probe md0 | tr '\n' ' ')"
echo "PROBE_VDE=$(pmemcachectl udev-probe vde | tr '\n' ' ')"
# re-attaching dirty blocks by hand needs --force
pmemcachectl create pc -o /dev/md0 -c /dev/pmem0 2> /tmp/e; echo "DIRTY_RC=$?"
show DIRTY_ERR /tmp/e
echo "DIRTY_DEVS=$(ndevs)"
pmemcachectl activate --all > /tmp/o 2> /tmp/e; echo "ACT2_RC=$?"
show ACT2_OUT /tmp/o; show ACT2_ERR /tmp/e
# not $name: fio_check (the prelude) sets it
cname=$(dmsetup info -c --noheadings -o name | head -1)
echo "NAME=$cname"
echo "UUID2=$(dmsetup info -c --noheadings -o uuid "$cname")"
echo "TABLE2=$(dmsetup table "$cname")"
pmemcachectl activate --all > /tmp/o 2> /tmp/e; echo "ACT3_RC=$?"
show ACT3_OUT /tmp/o; show ACT3_ERR /tmp/e
echo "ACT3_DEVS=$(ndevs)"
pmemcachectl activate /dev/pmem0 --name other > /tmp/o; echo "ACT4_RC=$?"
show ACT4_OUT /tmp/o
echo "STATUS2=$(pmemcachectl status "$cname" --json --interval 0 | tr -d '\n')"
set -e
fio_check act "/dev/mapper/$cname" %(job)s
set +e
# remove --keep-dirty: refused without --force, then marked
pmemcachectl remove "$cname" --keep-dirty 2> /tmp/e; echo "KEEP_RC=$?"
show KEEP_ERR /tmp/e
pmemcachectl remove "$cname" --keep-dirty --force > /tmp/o 2> /tmp/e; echo "KEEPF_RC=$?"
show KEEPF_OUT /tmp/o; show KEEPF_ERR /tmp/e
echo "PROBE_KEPT=$(pmemcachectl udev-probe md0 | tr '\n' ' ')"
pmemcachectl activate --all 2> /tmp/e; echo "ACT5_RC=$?"
show ACT5_ERR /tmp/e; echo "ACT5_DEVS=$(ndevs)"
pmemcachectl create pc -o /dev/md0 -c /dev/pmem0 2> /tmp/e; echo "KDIRTY_RC=$?"
show KDIRTY_ERR /tmp/e
pmemcachectl create pc -o /dev/md0 -c /dev/pmem0 --force > /tmp/o 2> /tmp/e; echo "FORCE_RC=$?"
show FORCE_OUT /tmp/o
echo "UUID3=$(dmsetup info -c --noheadings -o uuid pc)"
echo "PROBE_FORCED=$(pmemcachectl udev-probe md0 | tr '\n' ' ')"
set -e
fio_check act /dev/mapper/pc %(job)s
# a plain remove flushes and forgets the clean cache: activate finds none
pmemcachectl remove pc --quiet > /tmp/o || die remove
show RM_OUT /tmp/o
fio_check act /dev/md0 %(job)s
pmemcachectl activate --all > /tmp/o; show ACT6_OUT /tmp/o
# over a blank namespace the module formats on resume: the UUID comes after
pmemcachectl create pc2 -o /dev/md0 -c /dev/pmem0 || die "create blank"
echo "UUID4=$(dmsetup info -c --noheadings -o uuid pc2)"
echo "PROBE4=$(pmemcachectl udev-probe pmem0 | tr '\n' ' ')"
# detach: a linear table under the same DM UUID, the superblock cleared
pmemcachectl detach pc2 --quiet > /dev/null || die detach
echo "UUID5=$(dmsetup info -c --noheadings -o uuid pc2)"
echo "TABLE5=$(dmsetup table pc2)"
pmemcachectl activate --all > /tmp/o; show ACT7_OUT /tmp/o
echo DONE=1
"""


def kv(line):
    return dict(w.split("=", 1) for w in line.split())


def test_vm_activate_after_power_off_by_identity(vm, guest):
    job = "--rw=write --bs=64k --size=8m --offset=0"
    r1 = vm.run(guest.PRELUDE + ACT_BOOT1 % dict(job=job), timeout=600)
    assert r1.value("DONE") == "1"
    p1 = kv(r1.value("PROBE1"))
    u = p1["PMEMCACHE_CACHE_UUID"]
    # create over a blank namespace: the DM UUID of the superblock it formatted
    assert r1.value("UUID1") == "PMEMCACHE-" + u == p1["PMEMCACHE_DM_UUID"]
    assert json.loads(r1.value("LIST1"))[0]["dm_uuid"] == "PMEMCACHE-" + u

    # the prelude only defines helpers (fio_check); no pmc_init: no ndctl
    r2 = vm.run(guest.PRELUDE + ACT_BOOT2 % dict(job=job), timeout=900)
    assert r2.value("DONE") == "1"
    # before md: one line, exit 9, no device
    assert r2.value("ACT1_RC") == str(NOORIGIN) and r2.value("ACT1_OUT") == ""
    err = r2.value("ACT1_ERR")
    assert err.startswith("pmemcachectl: activate: /dev/pmem0: cache %s: origin (md array " % u)
    assert err.endswith("sectors) not present; nothing created")
    assert r2.value("ACT1_DEVS") == "0"
    assert r2.value("ACTW_RC") == str(NOORIGIN)
    assert "not present after --wait" in r2.value("ACTW_ERR")
    pm = kv(r2.value("PROBE_MD"))
    assert pm["PMEMCACHE_ROLE"] == "origin" and pm["SYSTEMD_READY"] == "0"
    assert pm["UDISKS_IGNORE"] == "1" and pm["PMEMCACHE_CACHE_UUID"] == u
    assert r2.value("PROBE_VDE") == ""
    # by hand, dirty blocks are not re-attached without --force
    assert r2.value("DIRTY_RC") == str(DIRTY)
    assert "dirty blocks for /dev/md0: the origin may have been written since" \
        in r2.value("DIRTY_ERR")
    assert r2.value("DIRTY_DEVS") == "0"
    # after md: the device, by identity, with its DM UUID, the name create
    # gave it and the tunables create and set gave it (kept on the cache)
    assert r2.value("ACT2_RC") == str(OK), r2.value("ACT2_ERR")
    name = "pc"
    assert r2.value("NAME") == name
    assert r2.value("UUID2") == "PMEMCACHE-" + u
    assert "created /dev/mapper/%s" % name in r2.value("ACT2_OUT")
    t2 = r2.value("TABLE2").split()
    assert t2[2:4] == ["pmemcache", "9:0"] and t2[5] == "4096", t2
    tunables = ("high_watermark 100", "low_watermark 100", "full_wait 250", "writeback_jobs 8")
    for word in tunables:
        assert word in r1.value("TABLE1") and word in r2.value("TABLE2"), \
            (word, r2.value("TABLE2"))
    # idempotent
    assert r2.value("ACT3_RC") == str(OK) and r2.value("ACT3_ERR") == ""
    assert r2.value("ACT3_OUT") == ("/dev/pmem0: cache %s already active as /dev/mapper/%s "
                                    "PMEMCACHE-%s" % (u, name, u))
    assert r2.value("ACT3_DEVS") == "1"
    assert r2.value("ACT4_RC") == str(OK) and "already active" in r2.value("ACT4_OUT")
    st = json.loads(r2.value("STATUS2"))
    dirty = st["dirty"]
    assert st["dm_uuid"] == "PMEMCACHE-" + u and 0 < dirty <= 8 * 1024 * 1024 // 4096
    assert r2.values("VERIFY_OK")[0] == "act"       # the data came back
    # remove --keep-dirty
    assert r2.value("KEEP_RC") == str(USAGE) and "add --force" in r2.value("KEEP_ERR")
    assert r2.value("KEEPF_RC") == str(OK)
    assert re.search(r": \d+ dirty blocks stay in /dev/pmem0 only: the origin is stale",
                     r2.value("KEEPF_ERR")), r2.value("KEEPF_ERR")
    assert re.search(r"\(\d+ dirty blocks kept in /dev/pmem0, marked", r2.value("KEEPF_OUT"))
    assert kv(r2.value("PROBE_KEPT"))["PMEMCACHE_KEPT_DIRTY"] == "1"
    assert r2.value("ACT5_RC") == str(DIRTY) and r2.value("ACT5_DEVS") == "0"
    assert "removed with --keep-dirty --force" in r2.value("ACT5_ERR")
    assert r2.value("KDIRTY_RC") == str(DIRTY)
    assert "kept by remove --keep-dirty" in r2.value("KDIRTY_ERR")
    assert r2.value("FORCE_RC") == str(OK)
    assert r2.value("UUID3") == "PMEMCACHE-" + u
    assert kv(r2.value("PROBE_FORCED"))["PMEMCACHE_KEPT_DIRTY"] == "0"
    assert r2.values("VERIFY_OK") == ["act", "act", "act"]
    assert "is clean and its superblock cleared" in r2.value("RM_OUT")
    assert r2.value("ACT6_OUT") == "no cache on 1 pmem devices"
    p4 = kv(r2.value("PROBE4"))
    assert p4["PMEMCACHE_CACHE_UUID"] != u
    assert r2.value("UUID4") == p4["PMEMCACHE_DM_UUID"]
    assert r2.value("UUID5") == r2.value("UUID4")
    assert r2.value("TABLE5").split()[2] == "linear"
    assert r2.value("ACT7_OUT") == "no cache on 1 pmem devices"


# Detach under a mounted file system (VFAT: the guest kernel has no ext4)
# while fio writes a file in it and a loop rewrites another one in place
# (cached blocks, dirty again at once unless cleaner mode writes them
# through): the detach must end, the table end linear, the file system
# stay mounted, and every byte verify after a remount (page cache
# dropped, so the reads come from the origin).
DETACH_MOUNTED = DETACH_LIB + r"""
pmc_init
md_make md0 raid5 4 a
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
mkdosfs /dev/mapper/pc > /dev/null || die mkdosfs
mkdir -p /mnt
mount -t vfat /dev/mapper/pc /mnt || die mount
# the status every second, shown if the detach fails
(while :; do dmsetup status pc; sleep 1; done > /tmp/samples 2>&1) &
sampler=$!
dd if=/dev/urandom of=/tmp/h0 bs=64k count=64 status=none
dd if=/dev/urandom of=/tmp/h1 bs=64k count=64 status=none
cp /tmp/h0 /mnt/hot && sync || die "hot file"
echo 0 > /tmp/hot.done
# round i writes /tmp/h$((i %% 2)) over the same clusters; /tmp/hot.done: the last whole round
(i=0; while [ ! -e /tmp/stop ]; do
	i=$((i + 1))
	dd if=/tmp/h$((i %% 2)) of=/mnt/hot bs=64k conv=notrunc,fsync oflag=direct \
		status=none || exit 1
	echo $i > /tmp/hot.done
done) &
h=$!
JOB="--name=fs --filename=/mnt/data --rw=randwrite --bs=4k --size=48m \
	--verify=crc32c --randseed=%(seed)d"
# 48 MiB at 4 MiB/s: 12 s, into the detach; fsync every 64 writes
fio $JOB --rate=4m --fsync=64 --do_verify=0 > /tmp/fio.out 2>&1 &
f=$!
n=0
while [ "$(st 5)" -lt 1024 ]; do
	n=$((n + 1))
	[ $n -lt 600 ] || die "fio wrote nothing dirty"
	sleep 0.1
done
echo "DIRTY_BEFORE=$(st 5)"
r0=$(cat /tmp/hot.done)
if ! pmemcachectl detach pc --timeout 240 > /tmp/d.out 2> /tmp/d.err; then
	tail -3 /tmp/d.err
	tail -5 /tmp/samples
	die "detach: $(tail -1 /tmp/d.err)"
fi
kill -0 $h && echo HOT_ALIVE=1
echo "HOT_ROUNDS=$(($(cat /tmp/hot.done) - r0))"
echo "TABLE1=$(dmsetup table pc)"
grep -q '^/dev/mapper/pc /mnt vfat' /proc/mounts && echo MOUNTED=1
wait $f && echo FIO_RC=0 || { cat /tmp/fio.out; die "fio failed"; }
touch /tmp/stop
wait $h && echo HOT_RC=0
kill $sampler
last=$(cat /tmp/hot.done)
umount /mnt || die umount
echo 3 > /proc/sys/vm/drop_caches
mount -t vfat /dev/mapper/pc /mnt || die remount
fio $JOB --verify_only > /tmp/v.out 2>&1 && echo VERIFY_OK=1 || cat /tmp/v.out
cmp /mnt/hot /tmp/h$((last %% 2)) && echo HOT_OK=1
umount /mnt
echo DONE=1
"""


def test_vm_detach_under_a_mounted_file_system_and_fio(vm, guest):
    res = vm.run(guest.PRELUDE + DETACH_MOUNTED % dict(seed=random.randrange(1, 1 << 30)),
                 timeout=1200)
    assert res.value("DONE") == "1", res.tail()
    assert int(res.value("DIRTY_BEFORE")) >= 1024
    # the rewriting loop still ran when the table changed, and the file system stayed
    assert res.value("HOT_ALIVE") == "1"
    assert res.value("MOUNTED") == "1"
    assert res.value("TABLE1").split()[2] == "linear", res.value("TABLE1")
    assert res.value("FIO_RC") == "0"
    assert res.value("HOT_RC") == "0"
    assert res.value("VERIFY_OK") == "1", res.tail()
    assert res.value("HOT_OK") == "1", res.tail()
