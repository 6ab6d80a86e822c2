#!/bin/sh
# /init of the guest initramfs.
#
# With /test/script.sh present (added per run by run-vm.sh) it runs the
# script with its output on the virtio port "pmc.out", then writes the
# script's exit status, kmemleak's findings and the kernel log to the port
# "pmc.result", and powers off. Without it, a shell. The serial console
# carries only the kernel's own messages, so that the host never has to
# pick script lines out of kernel lines (a timer warning can land in the
# middle of any line written to a shared console).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export DM_DISABLE_UDEV=1 HOME=/root TERM=linux

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /dev/mapper
mount -t devpts devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /run/lock /var/run /root
hostname guest
ln -sf /proc/self/fd /dev/fd

echo "@@BOOTED $(uname -r) $(uname -v)@@"
if [ ! -f /test/script.sh ]; then
	echo "dm-pmemcache guest: /dev/pmem0 and /dev/vd* are here; 'poweroff -f' ends the VM."
	exec setsid cttyhack sh -l
fi

# port NAME: the device node of the virtio-serial port called NAME
port() {
	for p in /sys/class/virtio-ports/*; do
		[ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && { echo "/dev/${p##*/}"; return; }
	done
	echo "@@NO-PORT $1@@"
	poweroff -f
}
out=$(port pmc.out)
result=$(port pmc.result)

cd /test
sh /test/script.sh > "$out" 2>&1 < /dev/null
rc=$?
{
	if [ -w /sys/kernel/debug/kmemleak ]; then
		echo scan > /sys/kernel/debug/kmemleak
		echo "@@KMEMLEAK-BEGIN@@"
		cat /sys/kernel/debug/kmemleak
		echo "@@KMEMLEAK-END@@"
	fi
	echo "@@DMESG-BEGIN@@"
	dmesg
	echo "@@DMESG-END@@"
	echo "@@EXIT $rc@@"
} > "$result" 2>&1
sync
poweroff -f
