#!/bin/sh
# /init of the guest initramfs.
#
# With /test/script.sh present (added per run by run-vm.sh) it runs the
# script, prints the kernel log and the script's exit status between
# markers that the host parses, and powers off. Without it, a shell.
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

cd /test
sh /test/script.sh
rc=$?
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan > /sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak
fi
echo "@@DMESG-BEGIN@@"
dmesg
echo "@@DMESG-END@@"
echo "@@EXIT $rc@@"
sync
poweroff -f
