# make demo: md RAID5 over four virtio disks, the raw pmem namespace, and
# (once the module is built) a dm-pmemcache in front of the RAID with fio.
echo "== kernel: $(uname -r)"
echo "== pmem namespaces (raw = no struct page):"
ndctl list -N
echo "== /dev/pmem0 dax flag: $(cat /sys/block/pmem0/queue/dax)"
make_md raid5 4
echo "== md RAID5:"
cat /proc/mdstat
if [ -f /lib/modules/extra/dm-pmemcache.ko ]; then
	insmod /lib/modules/extra/dm-pmemcache.ko
	echo "== pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0"
	pmemcachectl create pc --origin /dev/md0 --cache /dev/pmem0 || die "pmemcachectl create"
	echo "== table: $(dmsetup table pc)"
	fio --name=demo --filename=/dev/mapper/pc --direct=1 --ioengine=psync \
		--rw=randwrite --bs=4k --size=128m --fsync=1 --runtime=20 --time_based=0 \
		--verify=crc32c --verify_fatal=1
	echo "== pmemcachectl status pc"
	pmemcachectl status pc
	echo "== pmemcachectl flush pc"
	pmemcachectl flush pc
	echo "== pmemcachectl status pc (after flush)"
	pmemcachectl status pc
	echo "== pmemcachectl remove pc"
	pmemcachectl remove pc
else
	echo "== dm-pmemcache.ko not built yet; fio on the bare RAID instead"
	fio --name=demo --filename=/dev/md0 --direct=1 --ioengine=psync \
		--rw=randwrite --bs=4k --size=64m --fsync=1 --verify=crc32c --verify_fatal=1
fi
