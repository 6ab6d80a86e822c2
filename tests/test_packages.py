"""make deb (issue 17): the pmemcachectl and dm-pmemcache-modules-<release>
packages pass lintian without errors, unpack into a scratch root with the
files where the udev rule, the unit and bash-completion look for them,
carry the Depends meant, and their maintainer scripts do what they say.

On the host, no VM. The module package needs the kernel build at $KBUILD
(make kernel); without it only the pmemcachectl package is tested.
"""
import gzip
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from vm import REPO, KCACHE, KBUILD

HAVE_KERNEL = (KBUILD / "Module.symvers").exists()
UNIT = "pmemcache-activate.service"
RULES = "69-pmemcache.rules"
need_kernel = pytest.mark.skipif(not HAVE_KERNEL, reason="no kernel build at %s" % KBUILD)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """make deb (make deb-pmemcachectl without a kernel build) into a
    scratch DEBOUT: {package name: .deb path}."""
    out = tmp_path_factory.mktemp("deb")
    target = "deb" if HAVE_KERNEL else "deb-pmemcachectl"
    p = run(["make", "-s", "-C", str(REPO), target, "DEBOUT=%s" % out,
             "KCACHE=%s" % KCACHE, "KBUILD=%s" % KBUILD])
    assert p.returncode == 0, p.stdout + p.stderr
    found = {}
    for deb in sorted(out.glob("*.deb")):
        name = run(["dpkg-deb", "-f", str(deb), "Package"]).stdout.strip()
        found[name] = deb
    assert "pmemcachectl" in found, found
    return found


@pytest.fixture(scope="module")
def krel():
    return (KBUILD / "include/config/kernel.release").read_text().strip()


@pytest.fixture(scope="module")
def root(debs, tmp_path_factory):
    """The packages unpacked by dpkg into an empty root (no maintainer
    script runs: the root has no shell to run them with)."""
    r = tmp_path_factory.mktemp("root")
    admin = r / "var/lib/dpkg"
    for d in ("info", "updates", "triggers"):
        (admin / d).mkdir(parents=True)
    for f in ("status", "available"):
        (admin / f).touch()
    p = run(["dpkg", "--root=%s" % r, "--force-not-root", "--force-depends",
             "--unpack"] + [str(d) for d in debs.values()])
    assert p.returncode == 0, p.stdout + p.stderr
    return r


def lintian_errors(deb):
    p = run(["lintian", "--fail-on", "error", "--display-info", str(deb)])
    errors = [l for l in p.stdout.splitlines() if l.startswith("E: ")]
    # 2: a tag of the --fail-on level; anything else is lintian not running.
    assert p.returncode == (2 if errors else 0), (p.returncode, p.stdout, p.stderr)
    return errors, p.stdout


def test_lintian_has_no_errors(debs):
    modules = [n for n in debs if n.startswith("dm-pmemcache-modules-")]
    assert len(modules) == (1 if HAVE_KERNEL else 0), sorted(debs)
    for name, deb in debs.items():
        errors, text = lintian_errors(deb)
        assert errors == [], text


def test_lintian_check_catches_an_error(debs, tmp_path):
    """The check above can fail: the same package without its copyright
    file is a lintian error."""
    tree = tmp_path / "tree"
    assert run(["dpkg-deb", "-R", str(debs["pmemcachectl"]), str(tree)]).returncode == 0
    (tree / "usr/share/doc/pmemcachectl/copyright").unlink()
    bad = tmp_path / "bad.deb"
    p = run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(bad)])
    assert p.returncode == 0, p.stderr
    errors, text = lintian_errors(bad)
    assert any("no-copyright-file" in e for e in errors), text


def test_pmemcachectl_files_where_rule_unit_and_completion_expect_them(root):
    tool = root / "usr/sbin/pmemcachectl"
    assert tool.is_file() and tool.stat().st_mode & stat.S_IXUSR
    p = run([str(tool), "--version"])
    assert p.returncode == 0 and p.stdout.startswith("pmemcachectl "), p

    rule = (root / "usr/lib/udev/rules.d" / RULES).read_text()
    unit = (root / "usr/lib/systemd/system" / UNIT).read_text()
    for name, text in ((RULES, rule), (UNIT, unit)):
        assert "@SBINDIR@" not in text, name
        paths = set(re.findall(r"(/\S*/pmemcachectl)\b", text))
        # Every mention of the tool is by the path the package puts it at.
        assert paths == {"/usr/sbin/pmemcachectl"}, (name, paths)
        assert (root / paths.pop().lstrip("/")).is_file()
    assert re.search(r"^ExecStart=/usr/sbin/pmemcachectl activate", unit, re.M)
    assert 'RUN+="/usr/sbin/pmemcachectl activate --all"' in rule

    # bash-completion loads completions/<command> on first use of <command>.
    comp = root / "usr/share/bash-completion/completions/pmemcachectl"
    p = run(["bash", "-c", 'source "$1" && complete -p pmemcachectl', "-", str(comp)])
    assert p.returncode == 0 and "pmemcachectl" in p.stdout, p

    man = root / "usr/share/man/man8/pmemcachectl.8.gz"
    assert gzip.decompress(man.read_bytes()).decode().splitlines()[1].startswith(".TH PMEMCACHECTL 8")
    doc = root / "usr/share/doc/pmemcachectl"
    copyright = (doc / "copyright").read_text()
    assert copyright.startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
    assert re.search(r"^License: GPL-2$", copyright, re.M)
    version = run(["dpkg-query", "--admindir=%s" % (root / "var/lib/dpkg"),
                   "-W", "-f=${Version}", "pmemcachectl"]).stdout
    changelog = gzip.decompress((doc / "changelog.Debian.gz").read_bytes()).decode()
    assert changelog.startswith("dm-pmemcache (%s) " % version), changelog


def test_pmemcachectl_depends_on_the_libraries_it_links(debs):
    deb = debs["pmemcachectl"]
    depends = run(["dpkg-deb", "-f", str(deb), "Depends"]).stdout.strip()
    names = {d.split()[0] for d in depends.split(", ")}
    tmp = Path(run(["mktemp", "-d"]).stdout.strip())
    try:
        assert run(["dpkg-deb", "-x", str(deb), str(tmp)]).returncode == 0
        elf = run(["objdump", "-p", str(tmp / "usr/sbin/pmemcachectl")]).stdout
    finally:
        shutil.rmtree(tmp)
    needed = re.findall(r"^\s+NEEDED\s+(\S+)", elf, re.M)
    assert {"libdevmapper.so.1.02.1", "libjson-c.so.5"} <= set(needed), needed
    for soname in needed:
        path = run(["gcc", "-print-file-name=%s" % soname]).stdout.strip()
        owner = run(["dpkg", "-S", os.path.realpath(path)])
        if owner.returncode != 0:
            owner = run(["dpkg", "-S", "*/" + soname])
        pkg = owner.stdout.split(":")[0]
        assert pkg in names, (soname, pkg, depends)
    # Versioned, as dpkg-shlibdeps makes them.
    assert all("(>=" in d for d in depends.split(", ")), depends


@need_kernel
def test_module_package_for_the_kernel_release(debs, root, krel):
    name = "dm-pmemcache-modules-" + krel
    assert name in debs, sorted(debs)
    depends = run(["dpkg-deb", "-f", str(debs[name]), "Depends"]).stdout.strip()
    assert depends == "linux-image-%s, kmod" % krel, depends
    # The name the kernel's own bindeb-pkg gives its image package.
    builddeb = (KCACHE / "linux/scripts/package/builddeb").read_text()
    assert re.search(r"^packagename=linux-image-\$version$", builddeb, re.M)
    ko = root / "lib/modules" / krel / "extra/dm-pmemcache.ko"
    assert ko.is_file()
    p = run(["modinfo", "-F", "vermagic", str(ko)])
    assert p.stdout.split()[0] == krel, p.stdout
    assert run(["modinfo", "-F", "name", str(ko)]).stdout.strip() == "dm_pmemcache"
    assert (root / "usr/share/doc" / name / "copyright").is_file()


def control_script(deb, script, tmp_path):
    tree = tmp_path / ("ctl-" + deb.name)
    if not tree.exists():
        assert run(["dpkg-deb", "-e", str(deb), str(tree)]).returncode == 0
    return tree / script


@need_kernel
def test_module_scripts_run_depmod_for_that_release(debs, root, krel, tmp_path):
    """postinst, run as dpkg runs it without chroot (DPKG_ROOT), indexes
    the module in the scratch root; postrm after removal drops it."""
    deb = debs["dm-pmemcache-modules-" + krel]
    env = dict(os.environ, DPKG_ROOT=str(root), PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    dep = root / "lib/modules" / krel / "modules.dep"
    p = run(["sh", str(control_script(deb, "postinst", tmp_path)), "configure"], env=env)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^extra/dm-pmemcache\.ko:", dep.read_text(), re.M), dep.read_text()
    ko = root / "lib/modules" / krel / "extra/dm-pmemcache.ko"
    saved = ko.read_bytes()
    ko.unlink()
    try:
        p = run(["sh", str(control_script(deb, "postrm", tmp_path)), "remove"], env=env)
        assert p.returncode == 0, p.stderr
        assert "dm-pmemcache" not in dep.read_text()
    finally:
        ko.write_bytes(saved)


def test_pmemcachectl_scripts_enable_the_unit_it_ships(debs, root, tmp_path):
    """postinst enables (never starts) the unit the package ships, by its
    name; postrm purge forgets it. deb-systemd-helper and systemctl are
    stubs that log their arguments."""
    shipped = sorted(p.name for p in (root / "usr/lib/systemd/system").iterdir())
    assert shipped == [UNIT]
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    log = tmp_path / "calls"
    for cmd in ("deb-systemd-helper", "systemctl"):
        s = stubs / cmd
        s.write_text('#!/bin/sh\necho "%s $*" >> "%s"\nexit 0\n' % (cmd, log))
        s.chmod(0o755)
    env = dict(os.environ, PATH="%s:/usr/bin:/bin" % stubs)
    deb = debs["pmemcachectl"]
    p = run(["sh", str(control_script(deb, "postinst", tmp_path)), "configure"], env=env)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert "deb-systemd-helper enable %s" % UNIT in calls, calls
    assert not any(re.search(r"systemctl .*\b(start|restart)\b", c) for c in calls), calls
    log.unlink()
    p = run(["sh", str(control_script(deb, "postrm", tmp_path)), "purge"], env=env)
    assert p.returncode == 0, p.stderr
    assert "deb-systemd-helper purge %s" % UNIT in log.read_text().splitlines()
