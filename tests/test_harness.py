"""The VM harness itself: boot, exit status, kernel-report detection."""
import json
import re

import pytest

from vm import KBUILD, EXIT_TIMEOUT, GuestRun


def test_guest_boots_the_patched_kernel(vm):
    res = vm.run('echo "RELEASE=$(uname -r)"; echo "VERSION=$(uname -v)"')
    release = (KBUILD / "include/config/kernel.release").read_text().strip()
    compile_h = (KBUILD / "include/generated/utsversion.h").read_text()
    uts = re.search(r'#define UTS_VERSION "(.*)"', compile_h).group(1)
    assert res.value("RELEASE") == release
    assert "-pmemcache" in release
    assert res.value("VERSION") == uts


def test_guest_exit_status_reaches_the_host(vm):
    res = vm.run("echo before; exit 3", check=False)
    assert res.rc == 3
    assert "before" in res.output


def test_kernel_warning_in_guest_fails_the_run(vm):
    with pytest.raises(AssertionError, match="kernel reported problems"):
        vm.run('echo "WARNING: CPU: 0 PID: 1 injected by the harness test" > /dev/kmsg')


def test_hung_guest_is_killed_by_the_timeout(vm):
    res = vm.run("sleep 600", check=False, timeout=30)
    assert res.rc == EXIT_TIMEOUT


def test_kernel_line_inside_a_script_line_is_cut_out():
    console = ('FIO={"jobs": [{"bw_sampl[   11.045203] hrtimer: interrupt took 9000380 ns\n'
               'es": 3}]}\n'
               '[   12.000000] md0: a line of its own\n'
               'DONE=1\n')
    res = GuestRun(0, console, None)
    assert json.loads(res.value("FIO")) == {"jobs": [{"bw_samples": 3}]}
    assert res.value("DONE") == "1"
    assert "[   12.000000] md0: a line of its own" in res.output
