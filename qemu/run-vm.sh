#!/bin/bash
# Boot the guest kernel under QEMU: q35 with an emulated NVDIMM (an ACPI
# NFIT region whose label-less namespace comes up as raw, page-less
# /dev/pmem0) and virtio-blk disks for md RAID.
#
# Every disk and the NVDIMM live in files of the --state folder; the
# NVDIMM file is mapped share=on, so killing QEMU is a power cut that
# keeps exactly what the guest stored. Reuse the folder to boot again.
#
# With --script, the guest runs it and powers off; this script then exits
# with the guest script's status (124: timeout, 125: no exit status seen,
# i.e. the guest crashed, 123: the guest cut its own power, below).
#
# Power cuts from inside the guest: the test build of dm-pmemcache
# (PMC_CUT_HOOKS, tests/test_window_cuts.py) writes a value V > 0 to the
# isa-debug-exit port 0xf4 at a chosen point of the commit protocol. QEMU
# then exits at once with status (V << 1) | 1, keeping exactly what the
# guest stored in the NVDIMM file and nothing it held in RAM. This script
# appends "run-vm: power cut by the guest: isa-debug-exit value V" to the
# console log and exits with 123.
#
# Three channels, so that no parser ever has to untangle one from another:
#   --log     the serial console: the kernel's messages (and init's banner)
#   --out     the script's stdout and stderr, on a virtio-serial port of
#             its own (also copied to this script's stdout as it comes)
#   --result  init's report after the script: its exit status, the whole
#             kernel log and kmemleak's findings, on a second port
set -euo pipefail

usage() {
	cat <<EOU
usage: run-vm.sh --kernel BZIMAGE --initrd BASE.cpio.gz [options]
  --state DIR         images live here (default: a temporary folder)
  --script FILE       run FILE in the guest as /test/script.sh, then power off
  --files HOST:GUEST  add a file to the guest (repeatable)
  --disks N           virtio disks vda.. (default 6)
  --disk-size MiB     size of each disk (default 512)
  --pmem-size MiB     size of the NVDIMM (default 1024)
  --pmem2-size MiB    a second NVDIMM (its own region, /dev/pmem1) backed by
                      STATE/pmem2.img, for a mirrored cache (default 0: none)
  --iommu MODE        none | platform (virtio iommu_platform=on, DMA API)
                      | intel (intel-iommu + iommu_platform=on: dma-iommu)
  --throttle IOPS:BPS throttle every disk like an HDD (e.g. 150:150M)
  --cache MODE        QEMU cache mode of the disks (default unsafe)
  --append ARGS       extra kernel command line
  --memory MiB        guest RAM (default 2048)
  --timeout SECONDS   hard limit for the whole run (default 600)
  --log FILE          console log (default STATE/console.log)
  --out FILE          the script's output (default STATE/out.log)
  --result FILE       exit status and kernel log (default STATE/result.log)
  --accel tcg|kvm     default tcg (KVM fails under nesting here)
  --icount            deterministic guest time: one vCPU under
                      -icount shift=0,sleep=off, one guest instruction per
                      virtual nanosecond (tests/bench/run_cpu_bench.py)
  --interactive       console on this terminal, no timeout
EOU
	exit 2
}

kernel= initrd= state= script= disks=6 disk_size=512 pmem_size=1024 pmem2_size=0
iommu=none throttle= cache=unsafe append= memory=2048 timeout=600
log= out= result= accel=tcg interactive=0 icount=0 files=()
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift ;;
	--initrd) initrd=$2; shift ;;
	--state) state=$2; shift ;;
	--script) script=$2; shift ;;
	--files) files+=("$2"); shift ;;
	--disks) disks=$2; shift ;;
	--disk-size) disk_size=$2; shift ;;
	--pmem-size) pmem_size=$2; shift ;;
	--pmem2-size) pmem2_size=$2; shift ;;
	--iommu) iommu=$2; shift ;;
	--throttle) throttle=$2; shift ;;
	--cache) cache=$2; shift ;;
	--append) append=$2; shift ;;
	--memory) memory=$2; shift ;;
	--timeout) timeout=$2; shift ;;
	--log) log=$2; shift ;;
	--out) out=$2; shift ;;
	--result) result=$2; shift ;;
	--accel) accel=$2; shift ;;
	--interactive) interactive=1 ;;
	--icount) icount=1 ;;
	*) usage ;;
	esac
	shift
done
[ -n "$kernel" ] && [ -n "$initrd" ] || usage
[ -f "$kernel" ] || { echo "run-vm: no kernel at $kernel (make kernel)" >&2; exit 2; }
[ -f "$initrd" ] || { echo "run-vm: no image at $initrd (make image)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$state" ]; then
	state=$tmp/state
fi
mkdir -p "$state"
log=${log:-$state/console.log}
out=${out:-$state/out.log}
result=${result:-$state/result.log}

# Images are created sparse once and then kept: a second boot on the same
# state folder sees what the first one left, as after a power cut.
# Large NVDIMMs (16, 64 GiB: tests/bench/run_scale_bench.py) work the same
# way: only what the guest writes takes host disk space (a dm-pmemcache
# format writes about 0.8 % of the size), and the guest's RAM need not
# grow (the module's index is about 15 bytes per 4 KiB block, 250 MB at
# 64 GiB). A host file system that fills up under a share=on mapping
# kills QEMU with SIGBUS in the middle of a run: refuse to start without
# room for a sixteenth of the NVDIMM (at least 64 MiB).
if [ ! -f "$state/pmem.img" ]; then
	need=$(( (pmem_size / 16 > 64 ? pmem_size / 16 : 64) ))
	avail=$(df -Pm "$state" | awk 'NR == 2 {print $4}')
	if [ -n "$avail" ] && [ "$avail" -lt "$need" ]; then
		echo "run-vm: $avail MiB free in $state, a ${pmem_size} MiB sparse NVDIMM wants $need MiB free" >&2
		exit 2
	fi
	truncate -s "${pmem_size}M" "$state/pmem.img"
fi
if [ "$pmem2_size" -gt 0 ] && [ ! -f "$state/pmem2.img" ]; then
	truncate -s "${pmem2_size}M" "$state/pmem2.img"
fi
letters=(a b c d e f g h i j k l)
for ((i = 0; i < disks; i++)); do
	img=$state/vd${letters[$i]}.img
	[ -f "$img" ] || truncate -s "${disk_size}M" "$img"
done

# Per-run files go in a second cpio archive appended to the base image;
# the kernel unpacks concatenated archives in order.
extra=$tmp/extra
mkdir -p "$extra/test"
[ -n "$script" ] && cp "$script" "$extra/test/script.sh"
for f in "${files[@]}"; do
	src=${f%%:*} dst=${f#*:}
	mkdir -p "$extra$(dirname "$dst")"
	cp -L "$src" "$extra$dst"
done
(cd "$extra" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$tmp/extra.cpio.gz"
cat "$initrd" "$tmp/extra.cpio.gz" > "$tmp/initrd.cpio.gz"

# no_timer_check: on a loaded host a TCG vCPU can miss the few timer ticks
# that the boot-time IO-APIC check waits for, and the kernel then panics
# ("IO-APIC + timer doesn't work!"): seen with four guests on two cores.
cmdline="console=ttyS0 loglevel=5 oops=panic panic=-1 rdinit=/init no_timer_check"
machine=q35,nvdimm=on
dev_opts=
args=()
case "$iommu" in
none) ;;
platform) dev_opts=,disable-legacy=on,iommu_platform=on ;;
intel)
	machine=$machine,kernel-irqchip=split
	args+=(-device intel-iommu,intremap=off)
	dev_opts=,disable-legacy=on,iommu_platform=on
	cmdline="$cmdline intel_iommu=on iommu.passthrough=0" ;;
*) usage ;;
esac
drive_opts=
if [ -n "$throttle" ]; then
	drive_opts=",throttling.iops-total=${throttle%%:*},throttling.bps-total=${throttle#*:}"
	drive_opts=${drive_opts//M/000000}
fi
for ((i = 0; i < disks; i++)); do
	args+=(-drive "file=$state/vd${letters[$i]}.img,if=none,id=d$i,format=raw,cache=$cache,aio=threads$drive_opts"
	       -device "virtio-blk-pci,drive=d$i,serial=pmc-disk$i$dev_opts")
done

# With --icount the guest's clocks count its instructions: QEMU runs one
# vCPU, advances virtual time by 1 ns per instruction and, with
# sleep=off, jumps over idle time at once instead of sleeping. A guest's
# clock_gettime() delta over work that touches no host-side device
# (pmem is plain memory here) is then its instruction count, the same on
# a loaded host and on an idle one.
smp=2
if [ $icount = 1 ]; then
	[ "$accel" = tcg ] || { echo "run-vm: --icount needs --accel tcg" >&2; exit 2; }
	smp=1
	args+=(-icount shift=0,sleep=off)
fi

# A second NVDIMM is a second NFIT region (/dev/pmem1): the halves of a
# mirrored cache.
if [ "$pmem2_size" -gt 0 ]; then
	args+=(-object "memory-backend-file,id=pm1,share=on,mem-path=$state/pmem2.img,size=${pmem2_size}M"
	       -device nvdimm,memdev=pm1,id=nv1)
fi

# maxmem holds the RAM, the NVDIMMs (any size: device memory, mapped from
# the sparse files, never allocated) and 1 GiB to spare.
qemu=(qemu-system-x86_64 -machine "$machine" -accel "$accel" -cpu max -smp $smp
      -m "${memory}M,slots=2,maxmem=$((memory + pmem_size + pmem2_size + 1024))M"
      -object "memory-backend-file,id=pm0,share=on,mem-path=$state/pmem.img,size=${pmem_size}M"
      -device nvdimm,memdev=pm0,id=nv0
      -kernel "$kernel" -initrd "$tmp/initrd.cpio.gz" -append "$cmdline $append"
      -device isa-debug-exit,iobase=0xf4,iosize=0x04
      -no-reboot -nodefaults -display none "${args[@]}")

if [ $interactive = 1 ]; then
	exec "${qemu[@]}" -serial mon:stdio
fi

# The ports are found by name in the guest (qemu/guest-init.sh).
: > "$out"
: > "$result"
qemu+=(-device virtio-serial-pci,id=vser0
       -chardev "file,id=out,path=$out" -device virtserialport,bus=vser0.0,chardev=out,name=pmc.out
       -chardev "file,id=res,path=$result" -device virtserialport,bus=vser0.0,chardev=res,name=pmc.result)

tail -n +1 -f "$out" 2>/dev/null &
tailer=$!
set +e
timeout --foreground -s KILL "$timeout" "${qemu[@]}" -serial "file:$log" < /dev/null > "$log.qemu" 2>&1
status=$?
set -e
sleep 0.2
kill $tailer 2>/dev/null
wait $tailer 2>/dev/null || true
# QEMU's own complaints (an assertion, a bad option) go with the console.
[ -s "$log.qemu" ] && cat "$log.qemu" >> "$log"
rm -f "$log.qemu"
if [ "$status" = 137 ]; then
	echo "run-vm: guest killed after ${timeout}s timeout; console log: $log" >&2
	exit 124
fi
# Any other signal is QEMU's own crash (seen: SIGSEGV under TCG while the
# guest set up PCI): said in the console log, where tests/vm.py looks.
if [ "$status" -gt 128 ]; then
	echo "run-vm: QEMU died of signal $((status - 128))" >> "$log"
fi
rc=$(sed -n 's/^@@EXIT \([0-9]*\)@@$/\1/p' "$result" | tail -1)
# QEMU exits with 1 on its own errors, timeout(1) with 125-127 on its own;
# isa-debug-exit gives an odd status from 3 (values up to 49 here)
if [ -z "$rc" ] && [ "$status" -ge 3 ] && [ "$status" -lt 100 ] && [ $((status & 1)) = 1 ]; then
	msg="run-vm: power cut by the guest: isa-debug-exit value $((status >> 1))"
	echo "$msg" >> "$log"
	echo "$msg; console log: $log" >&2
	exit 123
fi
if [ -z "$rc" ]; then
	echo "run-vm: the guest ended without an exit status (crash?); console log: $log" >&2
	exit 125
fi
exit "$rc"
