"""KUnit suites of core-patches (blk_pfn, dma_pfn), run in the guest.

The suites are built as modules of the product kernel
(CONFIG_BLK_PFN_KUNIT_TEST=m, CONFIG_DMA_PFN_KUNIT_TEST=m in
qemu/kernel.config), so no second kernel build is needed: the guest loads
them, prints each module's KTAP output, and the host parses it with the
kernel's own tools/testing/kunit/kunit.py parse.

Two boots: a normal one, where dma_map_pfn() maps on dma-direct, and one
with swiotlb=force, where dma_pfn_supported() is false and every mapping
must be refused cleanly (no bounce, no crash), so dma_map_pfn_sg is skipped.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vm import KBUILD, KCACHE

KSRC = Path(os.environ.get("KSRC", KCACHE / "linux"))
KUNIT_PY = KSRC / "tools/testing/kunit/kunit.py"
MODULES = {
    "dma_pfn": KBUILD / "kernel/dma/pfn_kunit.ko",
    "blk_pfn": KBUILD / "block/blk-pfn-test.ko",
}

# Each module's output is the dmesg lines that appeared while it loaded.
GUEST_SCRIPT = r"""
for name in %s; do
	n=$(dmesg | wc -l)
	insmod /lib/modules/kunit/$name.ko || die "insmod $name"
	echo "@@KTAP-BEGIN $name@@"
	dmesg | tail -n +$((n + 1))
	echo "@@KTAP-END $name@@"
done
echo KUNIT_DONE=1
"""

# Warnings the suites trigger on purpose: sg_pfn_miter_refuses makes
# sg_miter_next() refuse a page-less entry with a one-time WARN.
EXPECTED_REPORTS = re.compile(r"lib/scatterlist\.c|sg_miter_next")


def module_files():
    missing = [str(p) for p in MODULES.values() if not p.exists()]
    if missing:
        pytest.skip("KUnit modules not built (%s): CONFIG_*_PFN_KUNIT_TEST=m and make kernel"
                    % ", ".join(missing))
    return [(p, "/lib/modules/kunit/%s.ko" % name) for name, p in MODULES.items()]


def parse_ktap(name, lines, tmp_path):
    """Run kunit.py parse on one module's output; return {case: status}."""
    # Strip the dmesg timestamps and add the top-level KTAP header that
    # the built-in executor prints but module loading does not.
    body = [re.sub(r"^\[\s*\d+\.\d+\]\s?", "", l) for l in lines]
    # the suite's own result line is numbered by load order; it is the
    # only suite in this document
    body = [re.sub(r"^(not )?ok \d+ ", r"\1ok 1 ", l) for l in body]
    ktap = tmp_path / ("%s.ktap" % name)
    ktap.write_text("KTAP version 1\n1..1\n" + "\n".join(body) + "\n")
    out = tmp_path / ("%s.json" % name)
    proc = subprocess.run([sys.executable, str(KUNIT_PY), "parse", "--json=%s" % out,
                           str(ktap)], capture_output=True, text=True)
    print(proc.stdout)
    assert "[ERROR]" not in proc.stdout, "KTAP of %s did not parse cleanly" % name
    assert out.exists(), "kunit.py parse failed:\n%s\n%s" % (proc.stdout, proc.stderr)
    result = json.loads(out.read_text())
    cases = {}
    for suite in result["sub_groups"]:
        assert suite["name"] == name, suite["name"]
        for case in suite["test_cases"]:
            cases[case["name"]] = case["status"]
    return cases, proc.returncode


def run_suites(vm, tmp_path, append=""):
    res = vm.run(GUEST_SCRIPT % " ".join(MODULES), files=module_files(), append=append,
                 allow_reports=True, timeout=300)
    assert res.value("KUNIT_DONE") == "1"
    unexpected = [l for l in res.reports()
                  if not EXPECTED_REPORTS.search(l) and "Call Trace:" not in l
                  and "WARNING:" not in l]
    assert not unexpected, "unexpected kernel reports:\n" + "\n".join(unexpected)
    warnings = [l for l in res.reports() if "WARNING:" in l]
    assert all(EXPECTED_REPORTS.search(l) for l in warnings), warnings
    results = {}
    for name in MODULES:
        m = re.search(r"@@KTAP-BEGIN %s@@\n(.*?)@@KTAP-END %s@@" % (name, name),
                      res.output, re.S)
        assert m, "no KTAP output for %s:\n%s" % (name, res.tail())
        results[name] = parse_ktap(name, m.group(1).splitlines(), tmp_path)
    return results


BLK_PFN_CASES = {
    "sg_pfn_basic", "sg_pfn_chain", "sg_pfn_table", "sg_pfn_mangle",
    "sg_pfn_miter_refuses", "bio_pfn_add_merge", "bio_pfn_iter",
    "bio_pfn_clone_split", "bio_pfn_map_sg", "bio_pfn_queue_gate",
    "bio_pfn_gate_deferred",
    "pfn_kmap_register_lookup", "pfn_kmap_lookup_edges", "pfn_kmap_lookup_outside",
    "pfn_kmap_overlap_refused", "pfn_kmap_unregister_forgets", "pfn_kmap_copy",
    "pfn_kmap_bio_copy_poisoned_cookie",
}
DMA_PFN_CASES = {
    "dma_pfn_supported_direct", "dma_map_pfn_direct", "dma_map_pfn_beyond_mask",
    "dma_pfn_supported_narrow_mask", "dma_map_pfn_sg",
}


def test_kunit_pfn_suites(vm, tmp_path):
    results = run_suites(vm, tmp_path)
    blk, rc_blk = results["blk_pfn"]
    dma, rc_dma = results["dma_pfn"]
    assert set(blk) == BLK_PFN_CASES
    assert set(dma) == DMA_PFN_CASES
    assert all(s == "PASS" for s in blk.values()), blk
    assert all(s == "PASS" for s in dma.values()), dma
    assert rc_blk == 0 and rc_dma == 0


def test_kunit_pfn_suites_swiotlb_force(vm, tmp_path):
    results = run_suites(vm, tmp_path, append="swiotlb=force")
    blk, _ = results["blk_pfn"]
    dma, _ = results["dma_pfn"]
    assert all(s == "PASS" for s in blk.values()), blk
    # mapping is refused, not bounced: the refusal cases pass, the
    # positive sg mapping case is skipped by design
    assert dma["dma_pfn_supported_direct"] == "PASS"
    assert dma["dma_map_pfn_direct"] == "PASS"
    assert dma["dma_map_pfn_beyond_mask"] == "PASS"
    assert dma["dma_pfn_supported_narrow_mask"] == "PASS"
    assert dma["dma_map_pfn_sg"] == "SKIP"
