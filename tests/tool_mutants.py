#!/usr/bin/python3
"""Mutation testing of pmemcachectl's activation safety checks, its columns
and the health decision of monitor (issue 17).

Each mutant removes one check from a copy of the checkout (its tracked
files, in a temporary folder) and runs the tests of
tests/test_pmemcachectl.py that must then fail; nothing in this checkout
changes.  Host mutants need no VM; --vm also runs the ones only a guest
can show (the create refusal and idempotency need device-mapper and md),
one pytest at a time.

usage: tests/tool_mutants.py [--vm] [NAME-PATTERN]
Prints one line per mutant and "mutants caught N of M"; exit 0 if all were.
"""
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
      "tests/test_pmemcachectl.py"]
VM_TEST = "test_vm_activate_after_power_off_by_identity"

# (name, file, [(old, new), ...], pytest -k expression, needs a VM)
MUTANTS = [
    ("origin missing: nothing created", "userspace/cmd_activate.c",
     [("\tif (!n) {\n", "\tif (0) {\n")], "origin_missing", False),
    ("kept-dirty cache not activated", "userspace/cmd_activate.c",
     [("\tif (sb->kept_dirty) {\n", "\tif (0) {\n")], "kept_dirty_by_remove", False),
    ("identity: the size", "userspace/probe.c",
     [(" ||\n\t    b->sectors != sb->origin_sectors)", ")"),
      ("oid.kind == sb->origin_kind && oid.sectors == sb->origin_sectors &&",
       "oid.kind == sb->origin_kind &&")], "udev_probe_marks", False),
    ("identity: the md UUID", "userspace/probe.c",
     [(" &&\n\t       !memcmp(oid.uuid, sb->origin_uuid, 16);", ";")],
     "udev_probe_marks", False),
    ("two arrays with the identity refused", "userspace/cmd_activate.c",
     [("\tif (n > 1) {\n", "\tif (0) {\n")], "cannot_pin_down", False),
    ("size-only identity refused", "userspace/cmd_activate.c",
     [("\tif (sb->origin_kind != PMC_ORIGIN_ID_MD) {\n", "\tif (0) {\n")],
     "cannot_pin_down", False),
    ("remove --keep-dirty needs --force", "userspace/cmd_flush.c",
     [("\tif (keep && *keep && !*force) {\n", "\tif (0) {\n")], "bad_arguments", False),
    ("udev-probe: SYSTEMD_READY=0", "userspace/cmd_activate.c",
     [("PMEMCACHE_KEPT_DIRTY=%d\\nSYSTEMD_READY=0\\n", "PMEMCACHE_KEPT_DIRTY=%d\\n")],
     "udev_probe_marks", False),
    ("kept-dirty mark: checksum", "userspace/probe.c",
     [("le32_to_cpu(m->csum) == pmc_crc32c(~0U, m, offsetof(struct pmctl_mark, csum))",
       "1")], "builds_warning_free_and_unit_tests_pass", False),
    ("columns: report lines reach stdout", "userspace/dm.c",
     [("\tif (dm_log_stdout && (level & 7) == 4) {", "\tif (0) {")],
     "columns_from or list_columns", False),
    ("columns: --noheadings as dmsetup", "userspace/report.c",
     [('\t\tsep = ":";', '\t\tsep = " ";')], "noheadings", False),
    ("columns: -o +FIELDS adds to the default", "userspace/report.c",
     [("\tif (f[0] == '+')\n", "\tif (0)\n")], "plus_adds", False),
    ("columns: --json with -o is dm_report's", "userspace/cmd_status.c",
     [("\ta->ro.json = a->json;\n", "")], "report_json", False),
    ("monitor: conditions are a set", "userspace/monitor.c",
     [("\tif (c->began[0] || c->ended[0])\n",
       "\tif (c->began[0] || c->ended[0] || strcmp(c->old, now))\n")],
     "builds_warning_free_and_unit_tests_pass", False),
    ("monitor: ok at the first look is not told", "userspace/monitor.c",
     [("\tconst char *was = h->known ? conds(h->health) : \"\";",
       "\tconst char *was = h->known ? conds(h->health) : \"x\";")],
     "builds_warning_free_and_unit_tests_pass", False),
    ("drain: a block failing its data crc is not written", "userspace/libpmc.c",
     [("\t\tif (m->data_crc && pmc_meta_check_data(m, m->base, (u32)i)) {\n",
       "\t\tif (0) {\n")], "fails_its_data_crc", False),
    ("detach: superblock cleared after the switch", "userspace/cmd_detach.c",
     [("\t/* 4. Forget the cache before the origin can be written around it. */\n"
       "\tfor (i = 0;", "\tfor (i = 2;"),
      ("\tpause_here(d, \"switched\");\n",
       "\tpause_here(d, \"switched\");\n"
       "\tfor (i = 0; i < 2 && d->half[i]; i++)\n"
       "\t\tpmctl_sb_forget(d->half[i]);\n")],
     "cut_after_detach_switched", True),
    ("activate: the kept name", "userspace/cmd_activate.c",
     [("\telse if (sb->settings.valid && pmctl_valid_dm_name(sb->settings.name) &&",
       "\telse if (0 && pmctl_valid_dm_name(sb->settings.name) &&")], VM_TEST, True),
    ("activate: the kept tunables", "userspace/cmd_activate.c",
     [("\to.settings = sb->settings.valid ? sb->settings.features : NULL;\n", "")],
     VM_TEST, True),
    ("set: the setting kept with the cache", "userspace/cmd_detach.c",
     [("\tr = pmctl_settings_save(name);\n\tif (r)\n", "\tr = 0;\n\tif (r)\n")],
     VM_TEST, True),
    ("create: dirty blocks need --force", "userspace/precheck.c",
     [("im.rs.dirty && !o->force && !o->activate) {", "0) {")], VM_TEST, True),
    ("activate: idempotent", "userspace/cmd_activate.c",
     [("\tr = find_active(a, pm, uuid, &d);\n\tif (r > 0) {", "\tr = 0;\n\tif (r > 0) {")],
     VM_TEST, True),
    ("DM UUID set after a format", "userspace/cmd_create.c",
     [("\tif (!uuid[0]) {\n\t\tr = set_uuid_after_format(o);",
       "\tif (!uuid[0] && 0) {\n\t\tr = set_uuid_after_format(o);")],
     VM_TEST, True),
]


def copy_checkout(dest):
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def main():
    args = sys.argv[1:]
    vm = "--vm" in args
    pat = next((a for a in args if a != "--vm"), "")
    caught = total = 0
    for name, f, edits, k, needs_vm in MUTANTS:
        if (needs_vm and not vm) or not re.search(pat, name):
            continue
        total += 1
        with tempfile.TemporaryDirectory(prefix="pmctl-mutant-") as d:
            d = Path(d)
            copy_checkout(d)
            src = (d / f).read_text()
            for old, new in edits:
                assert src.count(old) == 1, (name, old)
                src = src.replace(old, new)
            (d / f).write_text(src)
            b = subprocess.run(["make", "-s", "-C", str(d / "userspace"), "pmemcachectl",
                                "tests/unit_test", "tests/mkimage"],
                               capture_output=True, text=True)
            assert b.returncode == 0, (name, b.stderr[-500:])
            p = subprocess.run(PY + ["-k", k], cwd=d, capture_output=True, text=True)
            lines = p.stdout.strip().splitlines()
            ok = p.returncode == 1 and lines and " failed" in lines[-1]
            caught += bool(ok)
            print("%s: %s (%s)" % ("caught" if ok else "MISSED", name,
                                   lines[-1] if lines else p.stderr[-200:]), flush=True)
    print("mutants caught %d of %d" % (caught, total))
    return 0 if caught == total else 1


if __name__ == "__main__":
    sys.exit(main())
