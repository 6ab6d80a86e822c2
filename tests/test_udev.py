"""The cache comes up by udev alone (issue 17): systemd-udevd in the guest,
our rule from the pmemcachectl package, the host's own udev rules.

The guest gets, per test (files appended by run-vm.sh, the base image does
not change): the host's udevadm (systemd-udevd is the same binary) with
the libraries it loads, the host rules a Debian system uses for md and dm
block devices (50-udev-default, 55-dm, 60-persistent-storage{,-dm},
63-md-raid-arrays, 95-dm-notify; not 64-md-raid-assembly: md is
assembled by hand, in the order the test wants), and the udev rule and
binary of the pmemcachectl .deb (packaging/mkdeb.sh), unpacked with
dpkg-deb. The file system is VFAT (busybox mkdosfs; the guest kernel has
no ext4): udevd's builtin blkid gives it a by-uuid link.

systemd-udevd listens for uevents on a netlink socket and for udevadm on
a unix socket: the guest kernel has CONFIG_NET and CONFIG_UNIX for them
(qemu/kernel.config; a kernel without them cannot run udevd, "Failed to
create socket: Function not implemented", and the udevd test skips with
that reason).  The emulated test runs the same scenario with the same
rules and the kernel's uevents handed over by the script (see UDEV_LIB):
it checks the rules and the tool, not udevd's event delivery, nor the
DM_COOKIE flags of dm events.

Both boots of a scenario: the cache over a RAID1 md0, a VFAT file system
on it, the pmem namespace and the array taken away and brought back in
both orders (ndctl disable/enable-namespace, mdadm --stop/--assemble);
then files written with fsync until a power cut, and a boot where udev
alone brings the cache back once md0 is assembled.
"""
import re
import subprocess
import time
from pathlib import Path

import pytest

from vm import KBUILD, REPO, check_reports, GuestRun

UDEVADM = Path("/bin/udevadm")
UDEVD = Path("/lib/systemd/systemd-udevd")
HOST_RULES = Path("/lib/udev/rules.d")
# What a Debian system's udev does with md and dm block devices.
RULES = ["50-udev-default.rules", "55-dm.rules", "60-persistent-storage.rules",
         "60-persistent-storage-dm.rules", "63-md-raid-arrays.rules",
         "95-dm-notify.rules"]
# Programs the rules above run, at the paths they name.
RULE_PROGRAMS = [("/usr/sbin/mdadm", "/sbin/mdadm")]
GUEST_RULES = "/usr/lib/udev/rules.d"


def guest_kernel_lacks():
    """Kernel options systemd-udevd needs that the guest kernel lacks."""
    try:
        cfg = (KBUILD / ".config").read_text()
    except OSError:
        return ["a kernel build"]
    return [o for o in ("CONFIG_NET", "CONFIG_UNIX") if not re.search(r"^%s=y$" % o, cfg, re.M)]


def libraries(binary):
    """The shared libraries @binary loads, as ldd resolves them."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if m:
            libs.append(m.group(1))
    return libs


def udev_files(debroot):
    """(host path, guest path) of udevd, udevadm, their libraries, the host
    rules and our rule and tool from the unpacked package at @debroot."""
    files = [(UDEVADM, "/bin/udevadm"), (UDEVADM, "/lib/systemd/systemd-udevd")]
    files += [(lib, lib) for lib in libraries(UDEVADM)]
    for src, dst in RULE_PROGRAMS:
        files.append((src, dst))
        files += [(lib, lib) for lib in libraries(src)]
    files += [(HOST_RULES / r, "%s/%s" % (GUEST_RULES, r)) for r in RULES]
    files.append((debroot / "usr/lib/udev/rules.d/69-pmemcache.rules",
                  GUEST_RULES + "/69-pmemcache.rules"))
    # after guest_files()' build-tree tool: the packaged one wins
    files.append((debroot / "usr/sbin/pmemcachectl", "/usr/sbin/pmemcachectl"))
    return files


@pytest.fixture(scope="module")
def debroot(tmp_path_factory):
    """The pmemcachectl package (make deb-pmemcachectl), unpacked."""
    out = tmp_path_factory.mktemp("deb")
    p = subprocess.run(["make", "-s", "-C", str(REPO), "deb-pmemcachectl",
                        "DEBOUT=%s" % out], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    deb, = out.glob("pmemcachectl_*.deb")
    root = out / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    rules = (root / "usr/lib/udev/rules.d/69-pmemcache.rules").read_text()
    assert 'RUN+="/usr/sbin/pmemcachectl activate --all"' in rules
    return root


@pytest.fixture(scope="module")
def udev_guest(debroot):
    if not UDEVD.exists() or not UDEVADM.exists():
        pytest.skip("no systemd-udevd on the host")
    lacks = guest_kernel_lacks()
    if lacks:
        pytest.skip("guest kernel lacks %s: systemd-udevd needs a netlink socket "
                    "(uevents) and a unix socket (udevadm)" % ", ".join(lacks))
    import test_target
    p = test_target.build_module()
    assert p.returncode == 0, p.stderr
    return test_target, udev_files(debroot)


# ------------------------------------------------------------ guest side --
# EVENTS=udevd: systemd-udevd gets the kernel's uevents; "settle" waits for
# it. EVENTS=emulated (a guest kernel without sockets): "settle" hands the
# named events to the same rules with `udevadm test`, which imports
# udev-probe, writes the udev database and the /dev links, and lists
# the RUN programs without running them; the emulation runs them, as udevd
# would, then gives the dm devices they created their change event. Only
# the delivery of the kernel's uevents is emulated, and not all of it: a uevent's own variables are not in sysfs, so the DM_COOKIE
# of a dm device's resume (whose flags tell 55-dm.rules "this change is
# the activation") cannot be handed over; the emulation gives a new dm
# device its change event only (55-dm.rules disables the rules of a dm
# device's add event, and without the cookie's flags the change would
# inherit that from the udev database).
UDEV_LIB = r"""
EVENTS=%(events)s
fsuuid=
# uevent ACTION DEV (emulated only)
uevent() {
	[ -e /sys/class/block/$2 ] || return 0
	echo "UEVENT=$1 $2"
	udevadm test --action=$1 /sys/class/block/$2 > /tmp/ue.$2 2>&1 ||
		{ cat /tmp/ue.$2; die "udevadm test $1 $2"; }
	sed -n "s/^run: '\(.*\)'\$/\1/p" /tmp/ue.$2 > /tmp/ue.$2.run
	while read -r cmd; do
		echo "RUN=$2 $cmd"
		sh -c "$cmd" < /dev/null >> /tmp/run.log 2>&1 || echo "RUN_FAILED=$2 $cmd"
		# a write to a uevent file: the kernel's event, handed over
		ev=$(echo "$cmd" | sed -En 's,.*echo (add|change) > /sys/class/block/([^/]*)/uevent.*,\1 \2,p')
		[ -z "$ev" ] || uevent $ev
	done < /tmp/ue.$2.run
	for d in /sys/class/block/dm-*; do
		[ -e "$d" ] || continue
		grep -qx "${d##*/}" /tmp/dm-seen 2>/dev/null && continue
		echo "${d##*/}" >> /tmp/dm-seen
		uevent change ${d##*/}
	done
}
# settle ACTION:DEV...: the kernel just sent these events; wait until the
# rules have handled them (emulated: hand them over).  With udevd, a
# change: event is one that no kernel sends by itself here (a file
# system made on a device): udevadm trigger sends it.
settle() {
	for ev in "$@"; do
		if [ $EVENTS = udevd ]; then
			case $ev in change:*) udevadm trigger --action=change /sys/class/block/${ev#*:} ;; esac
		else
			uevent ${ev%%%%:*} ${ev#*:}
		fi
	done
	if [ $EVENTS = udevd ]; then
		udevadm settle -t 120 || die "udevadm settle"
	fi
	# the links of removed devices go, as with udevd's remove events
	[ $EVENTS = udevd ] || for l in /dev/disk/*/*; do
		[ -e "$l" ] || rm -f "$l"
	done
}
start_udev() {
	mkdir -p /run/udev
	: > /tmp/dm-seen
	if [ $EVENTS = udevd ]; then
		unset DM_DISABLE_UDEV
		/lib/systemd/systemd-udevd --daemon || die "systemd-udevd"
		udevadm trigger --type=subsystems --action=add
		udevadm trigger --type=devices --action=add
		udevadm settle -t 120 || die "udevadm settle"
	else
		for d in /sys/class/block/*; do uevent add ${d##*/}; done
	fi
}
ndm() { ls /sys/class/block | grep -c '^dm-' || true; }
# show TAG: what udev made of the devices, as KEY=value lines
show() {
	echo "$1_NDM=$(ndm)"
	echo "$1_DMUUID=$(cat /sys/class/block/dm-*/dm/uuid 2>/dev/null | tr '\n' ' ')"
	links=
	for l in /dev/disk/by-uuid/*; do
		[ -e "$l" ] || [ -L "$l" ] || continue
		links="$links ${l##*/}>$(readlink -f "$l" | sed 's,^/dev/,,')"
	done
	echo "$1_LINKS=$links"
	udevadm info -q property /sys/class/block/md0 2>/dev/null > /tmp/p || true
	echo "$1_MD=$(grep -E '^(SYSTEMD_READY|PMEMCACHE_ROLE|ID_FS_UUID)=' /tmp/p | sort | tr '\n' ' ')"
	for d in /sys/class/block/dm-*; do
		[ -e "$d" ] || continue
		udevadm info -q property $d > /tmp/p
		echo "$1_DM=${d##*/} $(grep -E '^(ID_FS_UUID|SYSTEMD_READY|PMEMCACHE_ROLE)=' /tmp/p | sort | tr '\n' ' ')"
	done
}
# the cache device down, its pmem namespace and md array gone
all_down() {
	for d in /sys/class/block/dm-*; do
		[ -e "$d" ] && dmsetup remove "$(cat $d/dm/name)"
	done
	mdadm --stop /dev/md0 2>&1 || die "mdadm --stop"
	ndctl disable-namespace namespace0.0 > /dev/null 2>&1 || die "disable-namespace"
	settle
	[ ! -e /sys/class/block/pmem0 ] || die "pmem0 still there"
	: > /tmp/dm-seen
}
assemble() {
	mdadm --assemble /dev/md0 /dev/vda /dev/vdb 2>&1 || die "mdadm --assemble"
	settle add:md0 change:md0
}
enable_pmem() {
	ndctl enable-namespace namespace0.0 > /dev/null 2>&1 || die "enable-namespace"
	settle add:pmem0
}
# read_files TAG: the checksum of every file of the file system, by its link
read_files() {
	[ -n "$fsuuid" ] && [ -e /dev/disk/by-uuid/$fsuuid ] || { echo "$1_MOUNT=no link"; return; }
	mount -t vfat /dev/disk/by-uuid/$fsuuid /mnt || { echo "$1_MOUNT=failed"; return; }
	echo "$1_MOUNT=ok"
	for f in /mnt/*; do
		[ -f "$f" ] && echo "$1_FILE=${f##*/} $(sha256sum < "$f" | cut -d' ' -f1)"
	done
	umount /mnt
}
"""

# Boot 1: a cache over md0 with a file system; down and up again in both
# orders; then files written with fsync until the power goes.
BOOT1 = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mkdir -p /mnt
start_udev
md_make md0 raid1 2 a
settle add:md0 change:md0
pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 \
	--high-watermark 100 --low-watermark 100 || die create
dm=$(ls /sys/class/block | grep '^dm-' | head -1)
mkdosfs -n PMCUDEV /dev/mapper/pc > /dev/null || die mkdosfs
settle change:$dm change:md0 change:pmem0
fsuuid=$(udevadm info -q property /sys/class/block/$dm | sed -n 's/^ID_FS_UUID=//p')
echo "FSUUID=$fsuuid"
[ -n "$fsuuid" ] || die "no file system UUID on $dm"
mount -t vfat /dev/mapper/pc /mnt || die mount
dd if=/dev/urandom of=/mnt/FIRST bs=4096 count=8 conv=fsync 2> /dev/null || die "write FIRST"
echo "ACK=FIRST $(sha256sum < /mnt/FIRST | cut -d' ' -f1)"
umount /mnt
# the file system reaches md0 too: its UUID is on both devices now
pmemcachectl flush pc > /dev/null || die flush
show CREATED

all_down
show DOWN1
enable_pmem
show PMEM_ONLY
assemble
show ORDER1
read_files ORDER1

all_down
assemble
show MD_ONLY
enable_pmem
show ORDER2
read_files ORDER2

# dirty data, then the power cut (the host kills the guest).  Names in
# capitals: an 8.3 name is one directory entry, which the file's fsync
# writes; a lower-case name also has a long-name entry, which only an
# fsync of the directory would (busybox has none).
mount -t vfat /dev/disk/by-uuid/$fsuuid /mnt || die "mount by uuid"
i=0
while [ $i -lt 400 ]; do
	dd if=/dev/urandom of=/mnt/F$i bs=4096 count=$((1 + i %% 7)) conv=fsync 2> /dev/null ||
		die "write F$i"
	echo "ACK=F$i $(sha256sum < /mnt/F$i | cut -d' ' -f1)"
	i=$((i + 1))
done
echo "WROTE_ALL=1"
sleep 600
"""

# Boot 2, after the cut: udev alone brings the cache back.
BOOT2 = r"""
insmod /lib/modules/extra/dm-pmemcache.ko || die insmod
mkdir -p /mnt
start_udev
show BOOT
assemble
show AFTER
fsuuid=%(fsuuid)s
read_files AFTER
echo "STATUS=$(pmemcachectl status $(cat /sys/class/block/dm-*/dm/name | head -1) --json --interval 0 | tr -d '\n')"
echo DONE=1
"""


def kv(line):
    return dict(w.split("=", 1) for w in line.split())


def links(res, tag):
    """The /dev/disk/by-uuid links at @tag: {uuid: device}."""
    return dict(w.split(">", 1) for w in res.value(tag + "_LINKS").split())


def wait_for(boot, pattern, count, seconds):
    """Poll a started boot's output until @pattern matched @count times:
    None, or why not."""
    deadline = time.time() + seconds
    text = ""
    while time.time() < deadline:
        _, text, result = boot.read()
        if "FAIL:" in text or "@@EXIT" in result:
            return "guest stopped early"
        if len(re.findall(pattern, text, re.M)) >= count:
            return None
        time.sleep(0.5)
    return "guest too slow"


def check_up(res, tag, fsuuid, cache_uuid):
    """The cache came up: one dm device with our DM UUID, the file
    system's by-uuid link at it, md0 marked as the origin and not linked."""
    assert res.value(tag + "_NDM") == "1", res.tail()
    assert res.value(tag + "_DMUUID").split() == [cache_uuid]
    dm = res.value(tag + "_DM").split()
    assert dm[0].startswith("dm-") and "ID_FS_UUID=" + fsuuid in dm[1:]
    ln = links(res, tag)
    assert ln.get(fsuuid) == dm[0], ln
    assert "md0" not in ln.values(), ln
    md = kv(res.value(tag + "_MD"))
    assert md["SYSTEMD_READY"] == "0" and md["PMEMCACHE_ROLE"] == "origin", md


def scenario(vm, events, files):
    """Both boots; returns them. A power cut ends boot 1 after 8 files."""
    lib = UDEV_LIB % {"events": events}
    import test_target
    pre = test_target.PRELUDE + lib
    opts = dict(files=files, disks=2, disk_size=128, pmem_size=256, timeout=900)
    proc, boot = vm.start(pre + BOOT1 % {}, **opts)
    try:
        why = wait_for(boot, r"^ACK=F\d+ ", 8, 800)
    finally:
        vm.power_cut(proc)
    r1 = GuestRun.load(None, boot)
    check_reports(r1)
    if why:
        check_boot1(r1)         # what went wrong before, if it did
        raise AssertionError("%s:\n%s" % (why, r1.tail()))
    fsuuid = re.search(r"^FSUUID=(\S+)$", r1.output, re.M).group(1)
    r2 = vm.run(pre + BOOT2 % {"fsuuid": fsuuid}, **opts)
    return r1, r2, fsuuid


def check_boot1(r1):
    fsuuid = r1.value("FSUUID")
    cache_uuid = r1.value("CREATED_DMUUID").strip()
    assert cache_uuid.startswith("PMEMCACHE-")
    # the file system is on md0 too (flushed): udev must not link it there
    check_up(r1, "CREATED", fsuuid, cache_uuid)
    assert r1.value("DOWN1_NDM") == "0" and fsuuid not in links(r1, "DOWN1")
    # order 1: pmem first, nothing; md next, the cache
    assert r1.value("PMEM_ONLY_NDM") == "0"
    check_up(r1, "ORDER1", fsuuid, cache_uuid)
    # order 2: md first, nothing; pmem next: the cache, and md0 marked now
    # (udev-probe knows an origin by the caches present: alone, md0 looks
    # like any array, with its by-uuid link, until the pmem appears)
    assert r1.value("MD_ONLY_NDM") == "0"
    check_up(r1, "ORDER2", fsuuid, cache_uuid)
    acks = dict(v.split() for v in r1.values("ACK"))
    for tag in ("ORDER1", "ORDER2"):
        assert r1.value(tag + "_MOUNT") == "ok"
        assert dict(v.split() for v in r1.values(tag + "_FILE")) == {"FIRST": acks["FIRST"]}
    assert len(acks) >= 9


def check_scenario(r1, r2, fsuuid):
    check_boot1(r1)
    cache_uuid = r1.value("CREATED_DMUUID").strip()
    acks = dict(v.split() for v in r1.values("ACK"))
    # after the cut: udev brings it up once md is assembled, not before
    assert r2.value("BOOT_NDM") == "0"
    check_up(r2, "AFTER", fsuuid, cache_uuid)
    assert r2.value("AFTER_MOUNT") == "ok"
    got = dict(v.split() for v in r2.values("AFTER_FILE"))
    lost = {f: s for f, s in acks.items() if got.get(f) != s}
    assert not lost, "acknowledged files lost or changed: %s" % lost
    assert r2.value("DONE") == "1"


def test_udevd_brings_the_cache_up_in_both_orders_and_after_a_power_cut(vm, udev_guest):
    _, files = udev_guest
    check_scenario(*scenario(vm, "udevd", files))


@pytest.fixture(scope="module")
def rules_guest(debroot):
    """For the emulated events: udevadm and the kernel build only."""
    if not UDEVADM.exists():
        pytest.skip("no udevadm on the host")
    if not (KBUILD / "Module.symvers").exists():
        pytest.skip("no kernel build at %s" % KBUILD)
    import test_target
    p = test_target.build_module()
    assert p.returncode == 0, p.stderr
    return udev_files(debroot)


def test_udev_rules_bring_the_cache_up_in_both_orders_and_after_a_power_cut(vm, rules_guest):
    """The same with the kernel's uevents handed to the rules by the script
    (udevadm test; a guest kernel without sockets cannot run udevd)."""
    check_scenario(*scenario(vm, "emulated", rules_guest))
