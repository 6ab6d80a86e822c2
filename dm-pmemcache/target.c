// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: a write-back cache in persistent memory without struct
 * page (a raw NFIT namespace) in front of an origin such as md RAID.
 *
 * Table:
 *   pmemcache <origin_dev> <pmem_dev> <block_size> [<#feature args> <feature>...]
 * See docs/dm-pmemcache.rst.  This file: constructor, destructor, status,
 * messages, suspend and resume.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/blkdev.h>
#include <linux/reboot.h>

#include "pmemcache.h"

/* Where each tunable of pmc_tunables[] (pmc_table.c) lives. */
static const size_t pmc_tunable_off[PMC_NR_TUNABLES] = {
	[PMC_T_HIGH_WM] = offsetof(struct pmemcache, high_wm),
	[PMC_T_LOW_WM] = offsetof(struct pmemcache, low_wm),
	[PMC_T_WB_JOBS] = offsetof(struct pmemcache, wb_jobs),
	[PMC_T_MAX_AGE] = offsetof(struct pmemcache, max_age_ms),
	[PMC_T_STRIPE] = offsetof(struct pmemcache, stripe_cfg),
	[PMC_T_FULL_WAIT] = offsetof(struct pmemcache, full_wait_ms),
	[PMC_T_SEQ_BYPASS] = offsetof(struct pmemcache, seq_bypass_kb),
	[PMC_T_RESYNC_RATE] = offsetof(struct pmemcache, mirror.resync_rate),
};

static unsigned int *pmc_tunable_ptr(struct pmemcache *pc, unsigned int i)
{
	return (unsigned int *)((char *)pc + pmc_tunable_off[i]);
}

/* Parse and range-check the value of tunable @i; set it if valid. */
static int pmc_tunable_set(struct pmemcache *pc, unsigned int i,
			   const char *arg, char **error)
{
	const char *why;
	unsigned int v;

	if (pmc_tunable_parse(i, arg, &v, &why)) {
		*error = (char *)why;
		return -EINVAL;
	}
	WRITE_ONCE(*pmc_tunable_ptr(pc, i), v);
	pc->tunables_set |= BIT(i);
	return 0;
}

/*
 * Every constructed cache, for the reboot notifier.  Ours runs before
 * md's (core-patches: md's notifier gives way to the drivers stacked on
 * it), so writeback has stopped before md stops its arrays' writes.
 */
static LIST_HEAD(pmc_live);
static DEFINE_MUTEX(pmc_live_lock);

static void pmc_live_add(struct pmemcache *pc)
{
	mutex_lock(&pmc_live_lock);
	list_add(&pc->live, &pmc_live);
	mutex_unlock(&pmc_live_lock);
}

static void pmc_live_del(struct pmemcache *pc)
{
	mutex_lock(&pmc_live_lock);
	if (!list_empty(&pc->live))
		list_del_init(&pc->live);
	mutex_unlock(&pmc_live_lock);
}

static int pmc_reboot(struct notifier_block *nb, unsigned long code, void *x)
{
	struct pmemcache *pc;

	mutex_lock(&pmc_live_lock);
	list_for_each_entry(pc, &pmc_live, live)
		pmc_writeback_shutdown(pc);
	mutex_unlock(&pmc_live_lock);
	return NOTIFY_DONE;
}

static struct notifier_block pmc_reboot_nb = {
	.notifier_call = pmc_reboot,
	.priority = INT_MAX,	/* before md (INT_MAX - 1) */
};

static const char *pmc_route_name(enum pmc_route r)
{
	switch (r) {
	case PMC_ROUTE_PFN:
		return "pfn";
	case PMC_ROUTE_BOUNCE:
		return "bounce";
	default:
		return "auto";
	}
}

/*
 * The feature words (pmc_features_parse(), pmc_table.c) into @pc.
 * *@mirror: the second half's device word, or NULL.
 */
static int pmc_parse_features(struct pmemcache *pc, struct dm_arg_set *as,
			      const char **mirror, char **error)
{
	struct pmc_features f = {
		.set = pc->tunables_set,
		.route = pc->route,
		.flush_on_suspend = pc->flush_on_suspend,
		.cleaner = pc->cleaner,
		.format = pc->format,
		.data_crc = pc->data_crc,
	};
	const char *why;
	unsigned int i;

	for (i = 0; i < PMC_NR_TUNABLES; i++)
		f.val[i] = *pmc_tunable_ptr(pc, i);
	if (pmc_features_parse(&f, as->argc, as->argv, &why)) {
		*error = (char *)why;
		return -EINVAL;
	}
	for (i = 0; i < PMC_NR_TUNABLES; i++)
		*pmc_tunable_ptr(pc, i) = f.val[i];
	pc->tunables_set = f.set;
	pc->route = f.route;
	pc->flush_on_suspend = f.flush_on_suspend;
	pc->cleaner = f.cleaner;
	pc->format = f.format;
	pc->data_crc = f.data_crc;
	pc->mirror.degraded_ok = f.degraded;
	*mirror = f.mirror;
	return 0;
}

/* "mirror <pmem_dev2>": open and map the second half, then check it. */
static int pmc_mirror_open(struct pmemcache *pc, const char *path,
			   char **error)
{
	struct dm_target *ti = pc->ti;
	int r;

	pc->mirror.on = true;
	if (!strcmp(path, "-"))
		return 0;	/* a missing half: mirror.c decides */
	r = dm_get_device(ti, path, dm_table_get_mode(ti->table),
			  &pc->mirror.dev);
	if (r) {
		*error = "mirror: pmem device lookup failed";
		return r;
	}
	if (pc->mirror.dev->bdev == pc->pmem_dev->bdev) {
		*error = "mirror: both halves are the same pmem device";
		return -EINVAL;
	}
	if (pc->mirror.dev->bdev == pc->origin->bdev) {
		*error = "mirror: origin and pmem device are the same device";
		return -EINVAL;
	}
	return pmc_mirror_claim(pc, error);
}

static void pmc_dtr(struct dm_target *ti)
{
	struct pmemcache *pc = ti->private;

	pmc_live_del(pc);
	if (pc->wq)
		pmc_writeback_stop(pc);
	pmc_mirror_exit(pc);
	if (pc->kaddr)
		pmem_wmb();
	pmc_writeback_exit(pc);
	pmc_health_exit(pc);	/* after the last origin write completed */
	pmc_io_exit(pc);
	pmc_index_destroy(&pc->idx);
	pmc_pmem_release(pc);
	kvfree(pc->stripes);
	pmc_unclaim(pc);
	if (pc->mirror.dev)
		dm_put_device(ti, pc->mirror.dev);
	if (pc->pmem_dev)
		dm_put_device(ti, pc->pmem_dev);
	if (pc->origin)
		dm_put_device(ti, pc->origin);
	kfree(pc);
}

static int pmc_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	const char *mirror;
	struct pmemcache *pc;
	unsigned int bs, i;
	int id, r;

	if (argc < 3) {
		ti->error = "Not enough arguments (need origin_dev pmem_dev block_size)";
		return -EINVAL;
	}
	pc = kzalloc(sizeof(*pc), GFP_KERNEL);
	if (!pc) {
		ti->error = "Cannot allocate the cache context";
		return -ENOMEM;
	}
	ti->private = pc;
	pc->ti = ti;
	pmc_health_init(pc);
	INIT_LIST_HEAD(&pc->live);
	INIT_LIST_HEAD(&pc->claim.list);
	pc->high_wm = PMC_DEF_HIGH_WM;
	pc->low_wm = PMC_DEF_LOW_WM;
	pc->wb_jobs = PMC_DEF_WB_JOBS;
	pc->stripe_cfg = PMC_STRIPE_AUTO;
	pc->full_wait_ms = PMC_DEF_FULL_WAIT_MS;
	pc->route = PMC_ROUTE_AUTO;
	spin_lock_init(&pc->free_lock);
	pmc_mirror_init(pc);
	init_waitqueue_head(&pc->free_wait);
	mutex_init(&pc->evict_lock);

	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &pc->origin);
	if (r) {
		ti->error = "Origin device lookup failed";
		goto bad;
	}
	r = dm_get_device(ti, dm_shift_arg(&as), dm_table_get_mode(ti->table),
			  &pc->pmem_dev);
	if (r) {
		ti->error = "pmem device lookup failed";
		goto bad;
	}
	r = -EINVAL;
	if (pc->origin->bdev == pc->pmem_dev->bdev) {
		ti->error = "Origin and pmem device are the same device";
		goto bad;
	}
	r = -EINVAL;
	if (kstrtouint(dm_shift_arg(&as), 10, &bs) ||
	    bs < PMC_MIN_BLOCK_SIZE || bs > PMC_MAX_BLOCK_SIZE ||
	    !is_power_of_2(bs)) {
		ti->error = "Invalid block size (power of two, 512-4096)";
		goto bad;
	}
	if (bs < bdev_logical_block_size(pc->origin->bdev)) {
		ti->error = "Block size is smaller than the origin's logical block size";
		goto bad;
	}
	pc->block_size = bs;
	pc->spb_shift = ilog2(bs >> SECTOR_SHIFT);

	r = pmc_parse_features(pc, &as, &mirror, &ti->error);
	if (r)
		goto bad;
	r = -EINVAL;
	if (ti->len > bdev_nr_sectors(pc->origin->bdev)) {
		ti->error = "Target is larger than the origin device";
		goto bad;
	}
	if ((bdev_nr_sectors(pc->origin->bdev) >> pc->spb_shift) > PMC_OBLOCK_MAX) {
		ti->error = "Origin device is too large";
		goto bad;
	}
	if (pc->route == PMC_ROUTE_PFN && !pmc_origin_takes_pfn(pc)) {
		ti->error = "writeback pfn: the origin does not take page-less bios";
		goto bad;
	}

	r = pmc_pmem_claim(pc, &ti->error);
	if (r)
		goto bad;
	if (mirror) {
		r = pmc_mirror_open(pc, mirror, &ti->error);
		if (r)
			goto bad;
	}
	r = pmc_claim(pc, &ti->error);
	if (r)
		goto bad;
	id = pmc_pmem_enter(pc);
	if (id < 0) {
		ti->error = "pmem namespace is gone";
		r = id;
		goto bad;
	}
	r = pmc_load_check(pc, &ti->error);
	pmc_pmem_exit(id);
	if (r)
		goto bad;

	r = -ENOMEM;
	pc->stripes = kvcalloc(PMC_NR_STRIPES, sizeof(*pc->stripes), GFP_KERNEL);
	if (!pc->stripes) {
		ti->error = "Cannot allocate index locks";
		goto bad;
	}
	for (i = 0; i < PMC_NR_STRIPES; i++) {
		init_rwsem(&pc->stripes[i].lock);
		atomic_set(&pc->stripes[i].around, 0);
		atomic_set(&pc->stripes[i].through, 0);
	}
	r = pmc_io_init(pc);
	if (r) {
		ti->error = "Cannot allocate the read bioset, write-through pool or slot caches";
		goto bad;
	}
	r = pmc_writeback_init(pc);
	if (r) {
		ti->error = "Cannot allocate the writeback context";
		goto bad;
	}

	r = dm_set_target_max_io_len(ti, 1U << pc->spb_shift);
	if (r)
		goto bad;
	ti->num_flush_bios = 1;
	ti->flush_supported = true;
	ti->per_io_data_size = sizeof(struct pmc_bio_data);
	ti->num_discard_bios = 1;
	ti->discards_supported = true;
	pmc_live_add(pc);
	return 0;
bad:
	pmc_dtr(ti);
	return r;
}

/* DRAM that grows with the cache: the index and its bitmaps. */
static u64 pmc_ram_bytes(const struct pmemcache *pc)
{
	return pmc_index_ram_bytes(&pc->idx);
}

static void pmc_status(struct dm_target *ti, status_type_t type,
		       unsigned int status_flags, char *result,
		       unsigned int maxlen)
{
	struct pmemcache *pc = ti->private;
	struct pmc_stats *s = &pc->st;
	unsigned int sz = 0, nf, i;
	u64 n = pc->meta.n_blocks, ram10;
	u64 dirty = atomic64_read(&pc->n_dirty);
	u64 nfree = pmc_free_count(pc);
	u64 bad = atomic64_read(&pc->bad_slots);
	u64 used = n - min(n, nfree + bad);

	switch (type) {
	case STATUSTYPE_INFO:
		ram10 = div64_u64(pmc_ram_bytes(pc) * 10 + n - 1, n);
		DMEMIT("%llu %llu %llu %llu ", n, dirty, nfree,
		       used - min(used, dirty));
		DMEMIT("%lld %lld %lld ", atomic64_read(&s->read_hits),
		       atomic64_read(&s->read_partial),
		       atomic64_read(&s->read_misses));
		DMEMIT("%lld %lld %lld %lld %lld ", atomic64_read(&s->write_hits),
		       atomic64_read(&s->write_new),
		       atomic64_read(&s->write_around),
		       atomic64_read(&s->discards), atomic64_read(&s->flushes));
		DMEMIT("%lld %lld %lld %lld ", atomic64_read(&s->wb_pfn_blocks),
		       atomic64_read(&s->wb_pfn_bytes),
		       atomic64_read(&s->wb_bounce_blocks),
		       atomic64_read(&s->wb_bounce_bytes));
		DMEMIT("%lld %lld %lld ", atomic64_read(&s->wb_errors),
		       atomic64_read(&s->wb_notsupp),
		       atomic64_read(&s->media_errors));
		DMEMIT("%llu.%llu %s %s ", ram10 / 10, ram10 % 10,
		       pc->route == PMC_ROUTE_BOUNCE || !pc->pfn_capable ||
		       READ_ONCE(pc->pfn_failed) ? "bounce" : "pfn",
		       READ_ONCE(pc->cleaner) ? "cleaner" : "-");
		DMEMIT("%llu %llu %u %lld %lld %lld %lld ",
		       READ_ONCE(pc->rc.rate), pmc_rate_target(pc),
		       pc->stripe_blocks,
		       atomic64_read(&s->wb_full_stripes),
		       atomic64_read(&s->wb_flushes),
		       atomic64_read(&s->full_waits),
		       atomic64_read(&s->full_around));
		DMEMIT("%lld %lld %llu %lld %llu %lld ",
		       atomic64_read(&s->full_through),
		       atomic64_read(&s->full_timeouts), bad,
		       atomic64_read(&s->mirror_reads),
		       READ_ONCE(pc->mirror.syncing) ?
		       n - min(n, READ_ONCE(pc->mirror.resync_next)) : 0,
		       atomic64_read(&s->crc_errors));
		pmc_health_emit(pc, result, maxlen, &sz);
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s %s %u", pc->origin->name, pc->pmem_dev->name,
		       pc->block_size);
		nf = 2 * hweight_long(pc->tunables_set) +
		     (pc->route != PMC_ROUTE_AUTO ? 2 : 0) +
		     pc->flush_on_suspend + READ_ONCE(pc->cleaner) +
		     (pc->mirror.on ? 2 : 0) + pmc_data_crc_on(pc);
		if (!nf)
			break;
		DMEMIT(" %u", nf);
		for (i = 0; i < PMC_NR_TUNABLES; i++)
			if (pc->tunables_set & BIT(i))
				DMEMIT(" %s %u", pmc_tunables[i].name,
				       READ_ONCE(*pmc_tunable_ptr(pc, i)));
		if (pc->route != PMC_ROUTE_AUTO)
			DMEMIT(" " PMC_OPT_WRITEBACK " %s", pmc_route_name(pc->route));
		if (pc->flush_on_suspend)
			DMEMIT(" " PMC_OPT_FLUSH_SUSPEND);
		if (READ_ONCE(pc->cleaner))
			DMEMIT(" " PMC_OPT_CLEANER);
		if (pmc_data_crc_on(pc))
			DMEMIT(" " PMC_OPT_DATA_CRC);
		/* "degraded" is one-shot, as "format": never shown */
		if (pc->mirror.on)
			DMEMIT(" " PMC_OPT_MIRROR " %s",
			       pc->mirror.dev ? pc->mirror.dev->name : "-");
		break;
	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
}

static void pmc_clear_stats(struct pmemcache *pc)
{
	struct pmc_stats *s = &pc->st;

	atomic64_set(&s->read_hits, 0);
	atomic64_set(&s->read_partial, 0);
	atomic64_set(&s->read_misses, 0);
	atomic64_set(&s->write_hits, 0);
	atomic64_set(&s->write_new, 0);
	atomic64_set(&s->write_around, 0);
	atomic64_set(&s->discards, 0);
	atomic64_set(&s->flushes, 0);
	atomic64_set(&s->wb_pfn_blocks, 0);
	atomic64_set(&s->wb_pfn_bytes, 0);
	atomic64_set(&s->wb_bounce_blocks, 0);
	atomic64_set(&s->wb_bounce_bytes, 0);
	atomic64_set(&s->wb_errors, 0);
	atomic64_set(&s->wb_notsupp, 0);
	atomic64_set(&s->media_errors, 0);
	atomic64_set(&s->wb_full_stripes, 0);
	atomic64_set(&s->wb_flushes, 0);
	atomic64_set(&s->full_waits, 0);
	atomic64_set(&s->full_around, 0);
	atomic64_set(&s->full_through, 0);
	atomic64_set(&s->full_timeouts, 0);
	atomic64_set(&s->mirror_reads, 0);
	atomic64_set(&s->crc_errors, 0);
}

/* "<tunable> <value>": change a feature while the cache runs. */
static int pmc_message_tunable(struct pmemcache *pc, unsigned int argc,
			       char **argv)
{
	unsigned int low = pc->low_wm, high = pc->high_wm;
	int t = pmc_tunable_find(argv[0]);
	char *error;

	if (t < 0 || !pmc_tunables[t].live || argc != 2) {
		DMERR("unrecognised message '%.32s' (%u words)", argv[0], argc);
		return -EINVAL;
	}
	if (pmc_tunable_set(pc, t, argv[1], &error)) {
		DMERR("message %s: %s", pmc_tunables[t].name, error);
		return -EINVAL;
	}
	if (pc->low_wm > pc->high_wm) {
		WRITE_ONCE(pc->low_wm, low);
		WRITE_ONCE(pc->high_wm, high);
		DMERR("message %s: low_watermark would be above high_watermark",
		      pmc_tunables[t].name);
		return -EINVAL;
	}
	if (t == PMC_T_STRIPE)
		DMINFO("stripe_blocks takes effect at the next resume");
	if (t == PMC_T_MAX_AGE)
		pmc_writeback_age_changed(pc);
	if (t == PMC_T_RESYNC_RATE)
		pmc_mirror_resync_kick(pc);
	pmc_writeback_kick(pc);
	return 0;
}

static int pmc_message(struct dm_target *ti, unsigned int argc, char **argv,
		       char *result, unsigned int maxlen)
{
	struct pmemcache *pc = ti->private;

	if (argc == 2)
		return pmc_message_tunable(pc, argc, argv);
	if (argc != 1) {
		DMERR("messages: flush, scrub, clear_stats, cleaner, nocleaner, <feature> <value>");
		return -EINVAL;
	}
	if (!strcasecmp(argv[0], "flush")) {
		if (READ_ONCE(pc->suspended))
			return -EBUSY;
		return pmc_writeback_all(pc);
	}
	if (!strcasecmp(argv[0], "scrub")) {
		if (READ_ONCE(pc->suspended))
			return -EBUSY;
		return pmc_scrub(pc, result, maxlen);
	}
	if (!strcasecmp(argv[0], "clear_stats")) {
		pmc_clear_stats(pc);
		return 0;
	}
	if (!strcasecmp(argv[0], "cleaner")) {
		WRITE_ONCE(pc->cleaner, true);
		pmc_writeback_kick(pc);
		return 0;
	}
	if (!strcasecmp(argv[0], "nocleaner")) {
		WRITE_ONCE(pc->cleaner, false);
		return 0;
	}
	DMERR("unrecognised message '%.32s'", argv[0]);
	return -EINVAL;
}

static void pmc_postsuspend(struct dm_target *ti)
{
	struct pmemcache *pc = ti->private;

	if (pc->flush_on_suspend && pmc_writeback_all(pc))
		DMWARN("flush_on_suspend: dirty blocks remain in pmem");
	pmc_writeback_stop(pc);
	pmc_mirror_stop(pc);
}

static int pmc_preresume(struct dm_target *ti)
{
	struct pmemcache *pc = ti->private;
	int id, r;

	if (pc->loaded)
		return 0;
	id = pmc_pmem_enter(pc);
	if (id < 0) {
		r = id;
	} else {
		r = pmc_load(pc);
		pmc_pmem_exit(id);
	}
	if (r)
		DMERR("%s: cannot load the cache (%d)", pc->pmem_dev->name, r);
	return r;
}

static void pmc_resume(struct dm_target *ti)
{
	pmc_writeback_start(ti->private);
	pmc_mirror_resync_kick(ti->private);
}

static int pmc_iterate_devices(struct dm_target *ti,
			       iterate_devices_callout_fn fn, void *data)
{
	struct pmemcache *pc = ti->private;

	return fn(ti, pc->origin, 0, ti->len, data);
}

static void pmc_io_hints(struct dm_target *ti, struct queue_limits *limits)
{
	struct pmemcache *pc = ti->private;

	/* Only whole blocks are dropped on discard. */
	limits->discard_granularity = max(limits->discard_granularity,
					  pc->block_size);
	if (!limits->max_discard_sectors)
		limits->max_discard_sectors = UINT_MAX >> SECTOR_SHIFT;
	if (!limits->max_hw_discard_sectors)
		limits->max_hw_discard_sectors = UINT_MAX >> SECTOR_SHIFT;
}

static struct target_type pmemcache_target = {
	.name = "pmemcache",
	.version = {1, 1, 0},
	.module = THIS_MODULE,
	.ctr = pmc_ctr,
	.dtr = pmc_dtr,
	.map = pmc_map,
	.end_io = pmc_end_io,
	.status = pmc_status,
	.message = pmc_message,
	.postsuspend = pmc_postsuspend,
	.preresume = pmc_preresume,
	.resume = pmc_resume,
	.iterate_devices = pmc_iterate_devices,
	.io_hints = pmc_io_hints,
};

static int __init dm_pmemcache_init(void)
{
	int r = dm_register_target(&pmemcache_target);

	if (r < 0) {
		DMERR("register failed %d", r);
		return r;
	}
	register_reboot_notifier(&pmc_reboot_nb);
	return 0;
}

static void __exit dm_pmemcache_exit(void)
{
	unregister_reboot_notifier(&pmc_reboot_nb);
	dm_unregister_target(&pmemcache_target);
}

module_init(dm_pmemcache_init);
module_exit(dm_pmemcache_exit);

MODULE_DESCRIPTION(DM_NAME " write-back cache on pfn-only persistent memory");
MODULE_AUTHOR("dm-pmemcache developers");
MODULE_LICENSE("GPL");
