# dm-pmemcache: top-level build and test driver.
#
# The kernel tree is extracted, patched and built outside the repository,
# in $(KCACHE), and reused between runs (git-reset tree, O= build, ccache).

KCACHE    ?= /var/cache/dm-pmemcache
TARBALL   ?= /usr/src/linux-source-6.1.tar.xz
DEBUG     ?= 0
JOBS      ?= $(shell nproc)

KSRC      := $(KCACHE)/linux
ifeq ($(DEBUG),1)
KBUILD    := $(KCACHE)/build-debug
FRAGMENTS := qemu/kernel.config qemu/debug.config
else
KBUILD    := $(KCACHE)/build
FRAGMENTS := qemu/kernel.config
endif
BZIMAGE   := $(KBUILD)/arch/x86/boot/bzImage
IMAGE     := $(KCACHE)/guest-base.cpio.gz

export CCACHE_DIR := $(KCACHE)/ccache

SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c

PY        := /usr/bin/python3
PYTEST    := $(PY) -m pytest

.PHONY: all deps kernel module userspace install uninstall image vm test test-long demo \
	bench bench-cpu bench-mirror bench-fs bench-fs-pressure bench-check figures clean check-series deb deb-pmemcachectl deb-modules deb-kernel

all: kernel module userspace image

deps:
	@qemu/deps.sh

# Extract + patch (core-patches/series) + configure + build, under one lock.
kernel: deps
	@mkdir -p $(KCACHE)
	@qemu/build-kernel.sh $(TARBALL) $(KSRC) $(KBUILD) $(JOBS) $(FRAGMENTS)

module: kernel
	@$(MAKE) -s -C $(KSRC) O=$(KBUILD) CC="ccache gcc" M=$(CURDIR)/dm-pmemcache modules

userspace: deps
	@$(MAKE) -s -C userspace

# pmemcachectl and its man page: PREFIX (default /usr/local), DESTDIR.
# Needs only the build dependencies of userspace/ (no make deps).
install uninstall:
	@$(MAKE) -s -C userspace $@

# Debian packages (packaging/mkdeb.sh): pmemcachectl and
# dm-pmemcache-modules-<kernel release>, built with dpkg-deb from staged
# trees into $(DEBOUT) and checked by lintian (an error fails). The module
# is built against $(KBUILD), which `make kernel` must have built (deb
# never builds the kernel). deb-pmemcachectl and deb-modules build one.
DEBOUT    ?= $(CURDIR)/out/deb
# Maintainer of every package, ours and the kernel's (builddeb takes it
# from DEBEMAIL).
export DEB_MAINTAINER ?= dm-pmemcache maintainers <maintainers@users.noreply.a-seed-5f239b57.example>

deb:
	@packaging/mkdeb.sh $(DEBOUT) $(KSRC) $(KBUILD) $(KCACHE) pmemcachectl modules

deb-pmemcachectl:
	@packaging/mkdeb.sh $(DEBOUT) $(KSRC) $(KBUILD) $(KCACHE) pmemcachectl

deb-modules:
	@packaging/mkdeb.sh $(DEBOUT) $(KSRC) $(KBUILD) $(KCACHE) modules

# The patched kernel as packages, by the kernel's own bindeb-pkg
# (scripts/Makefile.package, scripts/package/mkdebian and builddeb):
# linux-image-<release>, linux-headers-<release>, linux-libc-dev and,
# with CONFIG_DEBUG_INFO, linux-image-<release>-dbg. It builds the kernel
# (under the kernel build lock) with the configuration `make kernel` made
# in $(KBUILD): by default the QEMU guest one, which boots no ordinary
# machine (no SATA/NVMe, ext4, network, EFI). For a real machine, a build
# folder of its own and a fragment with its drivers, e.g.
#   make deb-kernel KBUILD=$(KCACHE)/build-host FRAGMENTS="qemu/kernel.config host.config"
# builddeb writes the .debs to the parent of the O= folder, $(KCACHE),
# with dpkg-buildpackage's .buildinfo and .changes; they are moved to
# $(DEBOUT). KDEB_PKGVERSION sets the package version (default
# <release>-<build number>). lintian (2026-12-05): no error in
# linux-image and linux-libc-dev; linux-headers has 9
# unstripped-binary-or-object, the host tools (fixdep, modpost, objtool,
# ...) that builddeb ships as the build made them.
deb-kernel: kernel
	@mkdir -p $(DEBOUT)
	@rm -f $(dir $(KBUILD:/=))linux-*.deb $(dir $(KBUILD:/=))linux-upstream_*
	@flock $(KCACHE)/kernel-build.lock \
		$(MAKE) -C $(KSRC) O=$(KBUILD) CC="ccache gcc" -j$(JOBS) DEBEMAIL="$(DEB_MAINTAINER)" bindeb-pkg \
		> $(KBUILD)/bindeb-pkg.log 2>&1 || { tail -40 $(KBUILD)/bindeb-pkg.log; exit 1; }
	@cd $(dir $(KBUILD:/=)) && mv -v linux-*.deb $(DEBOUT)/ && \
		{ mv -v linux-upstream_*.buildinfo linux-upstream_*.changes $(DEBOUT)/ 2>/dev/null || true; }

image: deps
	@qemu/mkimage.sh $(IMAGE)

vm: kernel image
	@qemu/run-vm.sh --kernel $(BZIMAGE) --initrd $(IMAGE) --interactive

# Two guests at a time (pytest-xdist): most of a guest's time is one
# emulated CPU, so two of them use both host cores.
TEST_JOBS ?= 2

test: kernel image
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PYTEST) -p no:cacheprovider -ra --durations=12 \
		-n $(TEST_JOBS) tests

# The long forms: >= 1,000,000 crash states of the host model on several
# simulated CPUs and every durability-site mutant caught, >= 50 VM power
# cuts, >= 200 cuts over the volatile origin, every protocol window cut
# 3 times, the durability mutants, fault injection in phases of 300 s
# (twice), 2,000 fuzzed tables and 600 messages, >= 10,000,000 libFuzzer
# executions of the on-pmem loader (tests/test_fuzz.py), the power cuts
# under ext4 and XFS with their mutant and control (tests/test_fs_powercut.py;
# still the make-test number of cuts); the figures are printed together
# at the end (the workers' figures add up).
test-long: kernel image
	@PMC_LONG=1 KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PYTEST) -p no:cacheprovider -ra \
		-n $(TEST_JOBS) \
		tests/test_crash_model.py tests/test_target_powercut.py \
		tests/test_durability.py tests/test_window_cuts.py tests/test_shutdown.py \
		tests/test_fault_injection.py tests/test_fs_powercut.py \
		tests/test_bad_input.py::test_fuzzed_tables_and_messages_are_refused \
		tests/test_fuzz.py

# The demo runs on fresh images each time.
demo: kernel image userspace $(if $(wildcard dm-pmemcache/Kbuild),module)
	@rm -rf $(KCACHE)/demo-state
	@{ echo '. /test/lib.sh'; cat tests/guest/demo.sh; } > $(KCACHE)/demo.sh
	@qemu/run-vm.sh --kernel $(BZIMAGE) --initrd $(IMAGE) \
		--state $(KCACHE)/demo-state --script $(KCACHE)/demo.sh \
		--files tests/guest/lib.sh:/test/lib.sh \
		--files userspace/pmemcachectl:/usr/sbin/pmemcachectl \
		$(foreach k,$(wildcard dm-pmemcache/*.ko),--files $(k):/lib/modules/extra/$(notdir $(k)))

# fio benchmarks side by side (issue 8): one boot per member model and
# origin layout; writes docs/benchmarks.md and docs/bench/. Before it: the
# writeback boots, page-less against bounce writeback to raid5
# (docs/bench/route.md), sustained overload against dm-writecache and bare md
# (docs/bench/overload.md) and the scale boots at 1, 16 and 64 GiB of pmem
# (docs/bench/scale.md; sparse NVDIMM files, deleted after each boot).
# The mirrored cache has its own target, make bench-mirror
# (docs/bench/mirror.md). BENCH_QUICK=1 for short runs. Uses the kernel that make test built
# (never builds one).
bench: image
	@test -f $(BZIMAGE) || { echo "no kernel at $(BZIMAGE): run make kernel (or make test) first"; exit 1; }
	@$(MAKE) -s -C $(KSRC) O=$(KBUILD) CC="ccache gcc" M=$(CURDIR)/dm-pmemcache modules
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_wb_bench.py
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_route_bench.py
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_overload_bench.py
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_scale_bench.py
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_bench.py

# The instruction-counted benchmark (issue 33): one boot under QEMU
# -icount shift=0,sleep=off on one vCPU (a guest instruction per virtual
# ns: the figures are the same on any host load). 4 KiB new writes,
# overwrites, read hits, 512 B reads, write+FLUSH, FUA writes and discards,
# QD1, on bare pmem, dm-pmemcache and dm-writecache, each twice, and
# writeback per block; a second boot runs a profiling copy of the module
# (tests/bench/cpu_profile.py: where our instructions go). Writes
# docs/bench/cpu.json, docs/bench/cpu.md and tests/cpu_guard.json (the
# overheads make test's tests/test_cpu_guard.py guards). About 5 minutes.
# Uses the kernel and the guest image that make test built.
bench-cpu:
	@test -f $(BZIMAGE) || { echo "no kernel at $(BZIMAGE): run make kernel (or make test) first"; exit 1; }
	@test -f $(IMAGE) || { echo "no guest image at $(IMAGE): run make image (or make test) first"; exit 1; }
	@$(MAKE) -s -C $(KSRC) O=$(KBUILD) CC="ccache gcc" M=$(CURDIR)/dm-pmemcache modules
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_cpu_bench.py

# The mirrored cache against the single-device one (issue 31): one boot
# with two NVDIMMs of 2 GiB (two regions; their files on /dev/shm when it
# has room), md raid1 over two fast disks, four alternating rounds of
# QD1+fsync latency, QD32x4 IOPS and DRAM per block (writeback off), then
# three resync rounds (a full single-device cache copied to
# a blank second half against dd of the same bytes). Writes
# docs/bench/mirror.json, docs/bench/mirror.md and the raw fio JSON
# (docs/bench/mirror-*-r*.json). About 10 minutes; BENCH_QUICK=1 about 4.
# Not part of make bench. Uses the kernel and the guest image that make
# test built.
bench-mirror:
	@test -f $(BZIMAGE) || { echo "no kernel at $(BZIMAGE): run make kernel (or make test) first"; exit 1; }
	@test -f $(IMAGE) || { echo "no guest image at $(IMAGE): run make image (or make test) first"; exit 1; }
	@$(MAKE) -s -C $(KSRC) O=$(KBUILD) CC="ccache gcc" M=$(CURDIR)/dm-pmemcache modules
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_mirror_bench.py

# ext4 and XFS on the cache against dm-writecache and the bare array (issue
# 32): one boot, md raid5 over four disks, one NVDIMM; per round each
# system, each file system made afresh, fio's small-file fsync load (4
# jobs of 256 files, 4 KiB writes, an fsync after each). Writes
# docs/bench/fs.json and docs/bench/fs.md. About 5 minutes. Not part of
# make bench. Uses the kernel and the guest image that make test built.
bench-fs:
	@test -f $(BZIMAGE) || { echo "no kernel at $(BZIMAGE): run make kernel (or make test) first"; exit 1; }
	@test -f $(IMAGE) || { echo "no guest image at $(IMAGE): run make image (or make test) first"; exit 1; }
	@$(MAKE) -s -C $(KSRC) O=$(KBUILD) CC="ccache gcc" M=$(CURDIR)/dm-pmemcache modules
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_fs_bench.py

# The same with the working set twice the cache (512 files a job, an
# NVDIMM of 64 MiB): both caches write back and make room during every
# timed run, which their status before and after each run must show (else
# it fails with PRESSURE_NOT_MET). Writes docs/bench/fs-pressure.json and
# .md. About 8 minutes.
bench-fs-pressure:
	@test -f $(BZIMAGE) || { echo "no kernel at $(BZIMAGE): run make kernel (or make test) first"; exit 1; }
	@test -f $(IMAGE) || { echo "no guest image at $(IMAGE): run make image (or make test) first"; exit 1; }
	@$(MAKE) -s -C $(KSRC) O=$(KBUILD) CC="ccache gcc" M=$(CURDIR)/dm-pmemcache modules
	@KCACHE=$(KCACHE) KBUILD=$(KBUILD) $(PY) tests/bench/run_fs_bench.py --pressure

# docs/reliability.md's figures table from the kept runs, docs/figures/*.json
# (pytest writes one per run: PMC_FIGURES_OUT=docs/figures/NAME.json, or
# $(KCACHE)/test-logs/CHECKOUT/figures-TIME-PID.json); make test fails when the
# page differs from what this renders.
figures:
	@$(PY) tests/render_figures.py

# pmemcachectl check on a 64 GiB image: this tree against the version that
# read one record per pread, on the host (no VM, about 3 minutes); writes
# docs/bench/check.md.
bench-check:
	@$(PY) tests/bench/check_speed.py --markdown docs/bench/check.md

# Apply core-patches/series to a pristine tree in its own worktree, build
# every prefix with the product config and run checkpatch --strict on
# every patch. Slow (one kernel build per patch): not part of make test.
check-series: deps
	@core-patches/check-series.sh $(FRAGMENTS)

clean:
	-$(MAKE) -s -C userspace clean
	rm -rf tests/__pycache__ tests/.pytest_cache .pytest_cache out
