// SPDX-License-Identifier: GPL-2.0
/*
 * Host unit tests of pmemcachectl's pure parts: status/table parsing, the
 * status JSON schema, number parsing, the crc32c of the shim, and the
 * check verdicts on images made in memory by the module's own format code.
 * One property per case; `make -C userspace test` runs them.
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmemcachectl.h"
#include "libpmc.h"
#include "status.h"
#include "probe.h"
#include "monitor.h"

static int failures, cases;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: %s: FAILED: %s\n", __FILE__,	\
			__LINE__, __func__, #cond);			\
		failures++;						\
		return;							\
	}								\
} while (0)

#define STATUS_TAIL " 64 450 48 3 9 2 1 5 4 17 6 8 7 origin_failing,full"
#define STATUS_OK "1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 12.1 bounce -" STATUS_TAIL

static void status_parses_all_36_fields(void)
{
	struct pmc_status s;

	CHECK(!pmc_status_parse(STATUS_OK, &s));
	CHECK(s.blocks == 1000 && s.dirty == 10 && s.free == 900 && s.clean == 90);
	CHECK(s.read_hits == 5 && s.read_partial == 1 && s.read_misses == 7);
	CHECK(s.write_hits == 3 && s.write_new == 11 && s.write_around == 0);
	CHECK(s.discards == 2 && s.flushes == 4);
	CHECK(s.wb_pfn_blocks == 6 && s.wb_pfn_bytes == 24576);
	CHECK(s.wb_bounce_blocks == 8 && s.wb_bounce_bytes == 32768);
	CHECK(s.wb_errors == 1 && s.wb_notsupp == 0 && s.media_errors == 0);
	CHECK(s.ram_bytes_per_block > 12.09 && s.ram_bytes_per_block < 12.11);
	CHECK(!strcmp(s.route, "bounce") && !s.cleaner);
	CHECK(s.wb_rate == 64 && s.wb_target == 450 && s.stripe_blocks == 48);
	CHECK(s.wb_full_stripes == 3 && s.wb_flushes == 9);
	CHECK(s.full_waits == 2 && s.full_around == 1);
	CHECK(s.full_through == 5 && s.full_timeouts == 4 && s.bad_slots == 17);
	CHECK(s.mirror_reads == 6 && s.resync_left == 8 && s.crc_errors == 7);
	CHECK(!strcmp(s.health, "origin_failing,full"));
}

static void status_rejects_wrong_field_count(void)
{
	struct pmc_status s;

	CHECK(pmc_status_parse("1000 10 900", &s));
	CHECK(pmc_status_parse(STATUS_OK " extra", &s));
	CHECK(pmc_status_parse("", &s));
	/* the 35 fields of the previous layout */
	CHECK(pmc_status_parse("1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 12.1 bounce - 64 450 48 3 9 2 1 5 4 17 6 0 ok", &s));
}

static void status_rejects_bad_words(void)
{
	struct pmc_status s;

	CHECK(pmc_status_parse("1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 12.1 warp -" STATUS_TAIL, &s));
	CHECK(pmc_status_parse("1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 x bounce -" STATUS_TAIL, &s));
	CHECK(pmc_status_parse("1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 12.1 pfn turbo" STATUS_TAIL, &s));
	CHECK(pmc_status_parse("1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 12.1 pfn - 1 2 x 4 5 6 7", &s));
	CHECK(pmc_status_parse("1000 10 900 90 5 1 7 3 11 0 2 4 6 24576 8 32768 1 0 0 12.1 bounce - 64 450 48 3 9 2 1 5 4 17 0 0 0 Bad;", &s));
}

static void status_reads_cleaner_mode(void)
{
	struct pmc_status s;

	CHECK(!pmc_status_parse("8 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 16.0 pfn cleaner 0 3 1 0 0 0 0 0 0 0 0 0 0 ok", &s));
	CHECK(s.cleaner && !strcmp(s.route, "pfn"));
}

static void table_keeps_features(void)
{
	struct pmc_table t;

	CHECK(!pmc_table_parse("9:0 259:0 4096 4 high_watermark 60 low_watermark 40", &t));
	CHECK(!strcmp(t.origin, "9:0") && !strcmp(t.cache, "259:0"));
	CHECK(t.block_size == 4096);
	CHECK(!strcmp(t.features, "4 high_watermark 60 low_watermark 40"));
	CHECK(!pmc_table_parse("9:0 259:0 512", &t) && !t.features[0]);
	CHECK(pmc_table_parse("9:0", &t));
}

static void dm_line_splits(void)
{
	uint64_t a, b;
	const char *p;
	char type[32];

	CHECK(!pmc_split_dm_line("0 2048 pmemcache 1 2 3", &a, &b, type, sizeof(type), &p));
	CHECK(a == 0 && b == 2048 && !strcmp(type, "pmemcache") && !strcmp(p, "1 2 3"));
	CHECK(pmc_split_dm_line("garbage", &a, &b, type, sizeof(type), &p));
}

/* Every documented key is there, with its JSON type. */
static void json_schema_is_stable(void)
{
	static const struct { const char *key; json_type type; } keys[] = {
		{ "schema", json_type_int }, { "name", json_type_string },
		{ "dm_uuid", json_type_string },
		{ "size_sectors", json_type_int }, { "origin_dev", json_type_string },
		{ "cache_dev", json_type_string }, { "block_size", json_type_int },
		{ "features", json_type_string }, { "blocks", json_type_int },
		{ "dirty", json_type_int }, { "free", json_type_int },
		{ "clean", json_type_int }, { "dirty_fraction", json_type_double },
		{ "dirty_bytes", json_type_int }, { "read_hits", json_type_int },
		{ "read_partial", json_type_int }, { "read_misses", json_type_int },
		{ "write_hits", json_type_int }, { "write_new", json_type_int },
		{ "write_around", json_type_int }, { "discards", json_type_int },
		{ "flushes", json_type_int }, { "wb_pfn_blocks", json_type_int },
		{ "wb_pfn_bytes", json_type_int }, { "wb_bounce_blocks", json_type_int },
		{ "wb_bounce_bytes", json_type_int }, { "writeback_blocks", json_type_int },
		{ "writeback_bytes", json_type_int },
		{ "writeback_rate_bytes_per_sec", json_type_double },
		{ "wb_errors", json_type_int }, { "wb_notsupp", json_type_int },
		{ "media_errors", json_type_int }, { "errors", json_type_int },
		{ "ram_bytes_per_block", json_type_double }, { "ram_bytes", json_type_int },
		{ "route", json_type_string }, { "mode", json_type_string },
		{ "health", json_type_string },
	};
	struct pmc_status s;
	struct pmc_table t;
	json_object *j, *v;
	size_t i;

	CHECK(!pmc_status_parse(STATUS_OK, &s));
	CHECK(!pmc_table_parse("9:0 259:0 4096", &t));
	j = pmc_status_json("pc", "PMEMCACHE-x", 2048, &s, &t, "/dev/md0", "/dev/pmem0",
			    1234.5);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!json_object_object_get_ex(j, keys[i].key, &v) ||
		    !json_object_is_type(v, keys[i].type)) {
			fprintf(stderr, "key %s missing or of the wrong type\n", keys[i].key);
			json_object_put(j);
			CHECK(0);
		}
	}
	json_object_object_get_ex(j, "dirty_fraction", &v);
	CHECK(json_object_get_double(v) > 0.0099 && json_object_get_double(v) < 0.0101);
	json_object_object_get_ex(j, "dirty_bytes", &v);
	CHECK(json_object_get_int64(v) == 10 * 4096);
	json_object_object_get_ex(j, "writeback_bytes", &v);
	CHECK(json_object_get_int64(v) == 24576 + 32768);
	json_object_object_get_ex(j, "ram_bytes", &v);
	CHECK(json_object_get_int64(v) == 12100);
	json_object_put(j);
}

static void json_rate_is_null_when_not_measured(void)
{
	struct pmc_status s;
	json_object *j, *v;

	CHECK(!pmc_status_parse(STATUS_OK, &s));
	j = pmc_status_json("pc", "", 2048, &s, NULL, NULL, NULL, -1);
	CHECK(json_object_object_get_ex(j, "writeback_rate_bytes_per_sec", &v) && !v);
	/* a device without a DM UUID (made by dmsetup): null, never "" */
	CHECK(json_object_object_get_ex(j, "dm_uuid", &v) && !v);
	json_object_put(j);
}

static void numbers_parse_strictly(void)
{
	uint64_t v;
	uint32_t u;

	CHECK(!parse_u64("4096", &v, false) && v == 4096);
	CHECK(!parse_u64("4k", &v, true) && v == 4096);
	CHECK(!parse_u64("2MiB", &v, true) && v == 2 << 20);
	CHECK(parse_u64("4k", &v, false));
	CHECK(parse_u64("-1", &v, false));
	CHECK(parse_u64("", &v, false));
	CHECK(parse_u64("12x", &v, true));
	CHECK(parse_u64("99999999999999999999", &v, false));
	CHECK(parse_u64("20000000T", &v, true));
	CHECK(!parse_u32_range("100", 0, 100, &u) && u == 100);
	CHECK(parse_u32_range("101", 0, 100, &u));
	CHECK(parse_u32_range("0", 1, 100, &u));
}

/* Kernel crc32c(~0, "123456789") has no final inversion: ~0xe3069283. */
static void crc32c_matches_kernel_convention(void)
{
	CHECK(pmc_crc32c(~0U, "123456789", 9) == (u32)~0xe3069283U);
}

/* The shim's crc32c (hardware or table) against the bitwise definition. */
static u32 crc32c_bitwise(u32 crc, const u8 *b, size_t len)
{
	int k;

	while (len--) {
		crc ^= *b++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78U & -(crc & 1));
	}
	return crc;
}

static void crc32c_matches_bitwise_definition(void)
{
	u8 buf[80];
	size_t off, len;

	for (len = 0; len < sizeof(buf); len++)
		buf[len] = (u8)(len * 151 + 7);
	for (off = 0; off < 8; off++)
		for (len = 0; len + off <= 72; len++)
			CHECK(pmc_crc32c(0x1234567U, buf + off, len) ==
			      crc32c_bitwise(0x1234567U, buf + off, len));
}

static char *tmp_image(u64 bytes)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/pmc-unit-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, (off_t)bytes))
		return NULL;
	close(fd);
	return path;
}

static void check_says_blank_then_clean_after_format(void)
{
	struct pmc_origin_id oid = { .sectors = 8192 };
	struct pmc_image im;
	const char *why;
	char *p = tmp_image(1 << 20);

	CHECK(p);
	CHECK(!pmc_image_open(&im, p, false, false));
	CHECK(pmc_image_check(&im, NULL, &why) == PMC_V_BLANK);
	CHECK(!pmc_meta_format(&im.meta, im.base, im.pmem_bytes, 4096, &oid));
	CHECK(pmc_image_check(&im, NULL, &why) == PMC_V_CLEAN);
	CHECK(pmc_image_check(&im, &oid, &why) == PMC_V_CLEAN);
	oid.sectors++;
	CHECK(pmc_image_check(&im, &oid, &why) == PMC_V_MISMATCH);
	CHECK(why && strstr(why, "origin size"));
	pmc_image_close(&im);
	unlink(p);
}

static void readonly_image_never_changes(void)
{
	struct pmc_origin_id oid = { .sectors = 8192 };
	struct pmc_image im;
	char *p = tmp_image(1 << 20);

	CHECK(p);
	CHECK(!pmc_image_open(&im, p, true, false));
	CHECK(!pmc_meta_format(&im.meta, im.base, im.pmem_bytes, 4096, &oid));
	CHECK(im.dropped > 0 && im.stores == 0);
	pmc_image_close(&im);
	unlink(p);
}

/*
 * Small reads come from a read-ahead window (libpmc.c): it must show every
 * store that reached the file, and a read across its end must still be
 * right.
 */
static void small_reads_see_stores_and_cross_windows(void)
{
	u8 w[16] = "0123456789abcdef", r[16], z[16] = { 0 };
	struct pmc_image im;
	char *p = tmp_image(4 << 20);

	CHECK(p);
	CHECK(!pmc_image_open(&im, p, false, false));
	CHECK(!pmc_pmem_read(r, im.base + 64, 8) && !memcmp(r, z, 8));
	pmc_pmem_write(im.base + 96, w, 8, PMC_P_RECORD);
	CHECK(!pmc_pmem_read(r, im.base + 96, 8) && !memcmp(r, w, 8));
	pmc_pmem_write(im.base + (1 << 20) - 8, w, 16, PMC_P_RECORD);
	CHECK(!pmc_pmem_read(r, im.base + (1 << 20) - 8, 16) && !memcmp(r, w, 16));
	CHECK(!pmc_pmem_read(r, im.base + (1 << 20) - 4, 8) && !memcmp(r, w + 4, 8));
	CHECK(!pmc_pmem_read(r, im.base + (1 << 20), 8) && !memcmp(r, w + 8, 8));
	CHECK(!pmc_pmem_read(r, im.base + (4 << 20) - 8, 8) && !memcmp(r, z, 8));
	pmc_image_close(&im);
	unlink(p);
}

static void set_keys_follow_the_target(void)
{
	static const char *const live[] = {
		"high_watermark", "low_watermark", "writeback_jobs", "stripe_blocks",
		"full_wait", "seq_bypass",
	};
	const struct pmctl_key *k;
	char msg[64], why[256];
	size_t i;

	/* every live tunable of target.c is a number key */
	for (i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
		k = pmctl_key_find(live[i]);
		CHECK(k && k->kind == PMCTL_KEY_NUMBER && !strcmp(k->name, live[i]));
	}
	CHECK(pmctl_key_find("high-watermark") == pmctl_key_find("high_watermark"));
	CHECK(!pmctl_key_find("high_watermarks") && !pmctl_key_find("") &&
	      !pmctl_key_find("flush") && !pmctl_key_find("format"));
	CHECK(!pmctl_key_find("a_key_name_much_longer_than_any_key"));
	k = pmctl_key_find("full_wait");
	CHECK(!pmctl_set_message(k, "250", msg, sizeof(msg), why, sizeof(why)));
	CHECK(!strcmp(msg, "full_wait 250"));
	/* ranges are the target's: a big value goes through, a non-number not */
	CHECK(!pmctl_set_message(k, "4294967295", msg, sizeof(msg), why, sizeof(why)));
	CHECK(!strcmp(msg, "full_wait 4294967295"));
	CHECK(pmctl_set_message(k, "4294967296", msg, sizeof(msg), why, sizeof(why)));
	CHECK(strstr(why, "'4294967296' is not a number"));
	CHECK(pmctl_set_message(k, "-1", msg, sizeof(msg), why, sizeof(why)));
	CHECK(pmctl_set_message(k, "10ms", msg, sizeof(msg), why, sizeof(why)));
	CHECK(pmctl_set_message(k, "", msg, sizeof(msg), why, sizeof(why)));
	k = pmctl_key_find("cleaner");
	CHECK(k && k->kind == PMCTL_KEY_SWITCH);
	CHECK(!pmctl_set_message(k, "on", msg, sizeof(msg), why, sizeof(why)) &&
	      !strcmp(msg, "cleaner"));
	CHECK(!pmctl_set_message(k, "OFF", msg, sizeof(msg), why, sizeof(why)) &&
	      !strcmp(msg, "nocleaner"));
	CHECK(!pmctl_set_message(k, "0", msg, sizeof(msg), why, sizeof(why)) &&
	      !strcmp(msg, "nocleaner"));
	CHECK(pmctl_set_message(k, "maybe", msg, sizeof(msg), why, sizeof(why)));
	CHECK(strstr(why, "not on or off"));
	/* max_age changes by message; writeback only with a table */
	k = pmctl_key_find("max_age");
	CHECK(k && k->kind == PMCTL_KEY_NUMBER);
	CHECK(!pmctl_set_message(k, "1000", msg, sizeof(msg), why, sizeof(why)) &&
	      !strcmp(msg, "max_age 1000"));
	k = pmctl_key_find("writeback");
	CHECK(k && k->kind == PMCTL_KEY_TABLE_ONLY);
	CHECK(pmctl_set_message(k, "pfn", msg, sizeof(msg), why, sizeof(why)));
	CHECK(strstr(why, "cannot change while the cache runs"));
}

static void table_flags_are_added_once(void)
{
	char out[256];

	CHECK(!pmctl_table_add_flag("9:0 259:0 4096", "flush_on_suspend", out, sizeof(out)));
	CHECK(!strcmp(out, "9:0 259:0 4096 1 flush_on_suspend"));
	CHECK(!pmctl_table_add_flag("9:0 259:0 4096 4 high_watermark 60 low_watermark 40",
				    "cleaner", out, sizeof(out)));
	CHECK(!strcmp(out, "9:0 259:0 4096 5 high_watermark 60 low_watermark 40 cleaner"));
	CHECK(!pmctl_table_add_flag(out, "flush_on_suspend", out + 128, 128));
	CHECK(!strcmp(out + 128, "9:0 259:0 4096 6 high_watermark 60 low_watermark 40 "
		      "cleaner flush_on_suspend"));
	/* already there: the same table */
	CHECK(!pmctl_table_add_flag("9:0 259:0 4096 3 writeback pfn cleaner", "cleaner",
				    out, sizeof(out)));
	CHECK(!strcmp(out, "9:0 259:0 4096 3 writeback pfn cleaner"));
	CHECK(pmctl_table_has_flag("9:0 259:0 4096 2 cleaner flush_on_suspend",
				   "flush_on_suspend"));
	CHECK(!pmctl_table_has_flag("9:0 259:0 4096 2 max_age 9", "flush_on_suspend"));
	CHECK(!pmctl_table_has_flag("9:0 259:0 4096", "cleaner"));
	/* not a table of the target: refused, never guessed */
	CHECK(pmctl_table_add_flag("9:0 259:0", "cleaner", out, sizeof(out)));
	CHECK(pmctl_table_add_flag("9:0 259:0 4096 3 max_age 9", "cleaner", out, sizeof(out)));
	CHECK(pmctl_table_add_flag("9:0 259:0 4096 x", "cleaner", out, sizeof(out)));
	CHECK(pmctl_table_add_flag("9:0 259:0 4096", "cleaner", out, 20));
}

/* replace: the halves of a mirrored cache's table, read and set. */
static void mirror_halves_are_read_and_set(void)
{
	char a[64], b[64], out[256];

	CHECK(!pmctl_table_halves("9:0 259:0 4096 4 high_watermark 60 mirror 259:1", a, b));
	CHECK(!strcmp(a, "259:0") && !strcmp(b, "259:1"));
	CHECK(!pmctl_table_halves("9:0 259:0 4096 2 mirror -", a, b) && !strcmp(b, "-"));
	CHECK(pmctl_table_halves("9:0 259:0 4096 2 max_age 9", a, b));
	CHECK(pmctl_table_halves("9:0 259:0 4096 1 mirror", a, b));
	CHECK(!pmctl_table_set_halves("9:0 259:1 4096 4 cleaner mirror 259:0 degraded",
				      "259:1", "/dev/pmem2", out, sizeof(out)));
	CHECK(!strcmp(out, "9:0 259:1 4096 3 cleaner mirror /dev/pmem2"));
	CHECK(!pmctl_table_set_halves("9:0 259:0 4096 2 mirror 259:1", "259:1", "/dev/pmem0",
				      out, sizeof(out)));
	CHECK(!strcmp(out, "9:0 259:1 4096 2 mirror /dev/pmem0"));
	CHECK(pmctl_table_set_halves("9:0 259:0 4096 1 cleaner", "a", "b", out, sizeof(out)));
	CHECK(pmctl_table_set_halves("9:0 259:0 4096 2 mirror -", "259:0", "/dev/pmem2", out, 20));
}

/* The names a cache gets: DM UUID and default device name (probe.c). */
static void dm_uuid_and_default_name_come_from_the_cache_uuid(void)
{
	static const uint8_t u[16] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
				       0, 1, 2, 3, 4, 5, 6, 0xff };
	char s[PMCTL_DM_UUID_LEN + 1], n[64];

	pmctl_dm_uuid(u, s, sizeof(s));
	CHECK(!strcmp(s, "PMEMCACHE-01234567-89ab-cdef-0001-0203040506ff"));
	CHECK(strlen(s) == PMCTL_DM_UUID_LEN && PMCTL_DM_UUID_LEN < 129);
	pmctl_default_name(u, n, sizeof(n));
	CHECK(!strcmp(n, "pmemcache-01234567"));
}

/* A 4 KiB superblock area from the module's own format code. */
static int formatted_area(u8 *area, const struct pmc_origin_id *oid, u8 uuid[16])
{
	struct pmc_image im;
	char *p = tmp_image(1 << 20);
	int fd, r = -1;

	if (!p || pmc_image_open(&im, p, false, false))
		return -1;
	if (!pmc_meta_format(&im.meta, im.base, im.pmem_bytes, 2048, oid)) {
		memcpy(uuid, im.meta.cache_uuid, 16);
		fd = open(p, O_RDONLY);
		r = fd >= 0 && pread(fd, area, 4096, 0) == 4096 ? 0 : -1;
		if (fd >= 0)
			close(fd);
	}
	pmc_image_close(&im);
	unlink(p);
	return r;
}

static void sb_probe_reads_what_format_recorded(void)
{
	struct pmc_origin_id oid = { .sectors = 123456, .kind = PMC_ORIGIN_ID_MD,
				     .uuid = { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6 } };
	static u8 area[4096];
	struct pmctl_sb sb;
	u8 uuid[16];

	CHECK(!formatted_area(area, &oid, uuid));
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_CACHE && !sb.kept_dirty);
	CHECK(!memcmp(sb.cache_uuid, uuid, 16) && sb.block_size == 2048);
	CHECK(sb.origin_kind == PMC_ORIGIN_ID_MD && sb.origin_sectors == 123456);
	CHECK(!memcmp(sb.origin_uuid, oid.uuid, 16));
	area[72] ^= 1;			/* origin_sectors: checksum fails */
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_BAD);
	area[72] ^= 1;
	memcpy(area, "PMEMfmt!", 8);
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_FORMATTING);
	memset(area, 0, sizeof(area));
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_NONE);
}

/*
 * The origin a cache opens with (pmc_meta_open()): an md array that grew
 * since is its origin still; a smaller one, another UUID, or a bigger
 * origin without a UUID is not (the size is told first).
 */
static void an_md_origin_may_grow_never_shrink(void)
{
	struct pmc_origin_id md = { .sectors = 123456, .kind = PMC_ORIGIN_ID_MD,
				    .uuid = { 1, 2, 3 } };
	struct pmc_origin_id other = md, none = { .sectors = 123456 };
	struct pmc_image im;
	const char *why;
	char *p = tmp_image(1 << 20);

	CHECK(p && !pmc_image_open(&im, p, false, false));
	if (!p)
		return;
	CHECK(!pmc_meta_format(&im.meta, im.base, im.pmem_bytes, 4096, &md));
	other.sectors = 200000;
	CHECK(!pmc_meta_open(&im.meta, im.base, im.pmem_bytes, 4096, &other, &why));
	other.sectors = 100000;
	CHECK(pmc_meta_open(&im.meta, im.base, im.pmem_bytes, 4096, &other, &why) == -EINVAL &&
	      strstr(why, "origin size differs"));
	other.sectors = 200000;
	other.uuid[0] = 9;
	CHECK(pmc_meta_open(&im.meta, im.base, im.pmem_bytes, 4096, &other, &why) == -EINVAL &&
	      strstr(why, "origin size differs"));
	other.sectors = 123456;
	CHECK(pmc_meta_open(&im.meta, im.base, im.pmem_bytes, 4096, &other, &why) == -EINVAL &&
	      strstr(why, "origin UUID differs"));
	CHECK(!pmc_meta_format(&im.meta, im.base, im.pmem_bytes, 4096, &none));
	none.sectors = 200000;
	CHECK(pmc_meta_open(&im.meta, im.base, im.pmem_bytes, 4096, &none, &why) == -EINVAL &&
	      strstr(why, "origin size differs"));
	pmc_image_close(&im);
	unlink(p);
}

/* The kept-dirty mark: only a whole, matching mark counts. */
static void kept_dirty_mark_counts_only_for_its_cache(void)
{
	struct pmc_origin_id oid = { .sectors = 8192 };
	static u8 area[4096];
	struct pmctl_sb sb;
	u8 uuid[16], other[16];

	CHECK(!formatted_area(area, &oid, uuid));
	pmctl_mark_build(area + PMCTL_MARK_OFFSET, uuid, true, 1700000000);
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_CACHE && sb.kept_dirty && sb.kept_time == 1700000000);
	area[PMCTL_MARK_OFFSET + 9] ^= 1;	/* torn: checksum fails */
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_CACHE && !sb.kept_dirty);
	memcpy(other, uuid, 16);
	other[0] ^= 0xff;			/* left by an older format */
	pmctl_mark_build(area + PMCTL_MARK_OFFSET, other, true, 1700000000);
	pmctl_sb_parse(area, &sb);
	CHECK(!sb.kept_dirty);
	pmctl_mark_build(area + PMCTL_MARK_OFFSET, uuid, false, 0);
	pmctl_sb_parse(area, &sb);
	CHECK(!sb.kept_dirty && sb.state == PMCTL_SB_CACHE);
	/* the mark never touches the superblock the module checks */
	CHECK(PMCTL_MARK_OFFSET >= PMC_SUPER_SIZE &&
	      PMCTL_MARK_OFFSET + 512 <= PMC_SUPER_AREA);
}

/* settings: the newer valid slot counts; a torn one leaves the older */
static void settings_survive_a_torn_update(void)
{
	struct pmc_origin_id oid = { .sectors = 8192 };
	static u8 area[4096];
	u8 *slot0 = area + PMCTL_SETTINGS_OFFSET, *slot1 = slot0 + PMCTL_SETTINGS_SLOT;
	struct pmctl_sb sb;
	u8 uuid[16], other[16];

	CHECK(!formatted_area(area, &oid, uuid));
	pmctl_sb_parse(area, &sb);
	CHECK(sb.state == PMCTL_SB_CACHE && !sb.settings.valid);	/* format zeroes them */
	pmctl_settings_build(slot0, uuid, 1, "db", "high_watermark 60");
	pmctl_settings_build(slot1, uuid, 2, "db", "high_watermark 60 max_age 5000");
	pmctl_sb_parse(area, &sb);
	CHECK(sb.settings.valid && sb.settings.slot == 1 && sb.settings.seq == 2);
	CHECK(!strcmp(sb.settings.name, "db") &&
	      !strcmp(sb.settings.features, "high_watermark 60 max_age 5000"));
	slot1[200] ^= 1;			/* a cut inside the update of slot 1 */
	pmctl_sb_parse(area, &sb);
	CHECK(sb.settings.valid && sb.settings.slot == 0 &&
	      !strcmp(sb.settings.features, "high_watermark 60"));
	memcpy(other, uuid, 16);
	other[3] ^= 0x10;			/* left by an older format */
	pmctl_settings_build(slot0, other, 3, "old", "");
	pmctl_sb_parse(area, &sb);
	CHECK(!sb.settings.valid);
	/* between the mirror info and the kept-dirty mark, off the superblock */
	CHECK(PMCTL_SETTINGS_OFFSET >= PMC_SUPER_SIZE &&
	      PMCTL_SETTINGS_OFFSET + 2 * PMCTL_SETTINGS_SLOT <= PMCTL_MARK_OFFSET);
}

/* settings: only the tunables of a table's features are kept */
static void settings_keep_only_the_tunables(void)
{
	char out[PMCTL_SETTINGS_FEATURES];

	CHECK(!pmctl_settings_filter("4 high_watermark 10 low_watermark 1", out, sizeof(out)));
	CHECK(!strcmp(out, "high_watermark 10 low_watermark 1"));
	CHECK(!pmctl_settings_filter("5 format mirror 259:1 data_crc degraded", out,
				     sizeof(out)));
	CHECK(!strcmp(out, ""));
	CHECK(!pmctl_settings_filter("6 writeback pfn flush_on_suspend cleaner max_age 5000",
				     out, sizeof(out)));
	CHECK(!strcmp(out, "writeback pfn flush_on_suspend cleaner max_age 5000"));
	CHECK(!pmctl_settings_filter("", out, sizeof(out)) && !strcmp(out, ""));
	CHECK(pmctl_settings_filter("2 full_wait 250", out, 8) == -1);
}

/* monitor: the first health seen is told only when it is not "ok" */
static void health_first_seen(void)
{
	struct pmctl_health h = { 0 };
	struct pmctl_hchange c;

	CHECK(pmctl_health_step(&h, "ok", &c) == PMCTL_EV_NONE && h.known);
	memset(&h, 0, sizeof(h));
	CHECK(pmctl_health_step(&h, "pmem_gone", &c) == PMCTL_EV_DEGRADED);
	CHECK(!strcmp(c.began, "pmem_gone") && !c.ended[0] && !c.old[0]);
	/* a device gone before it was read once: nothing to tell */
	memset(&h, 0, sizeof(h));
	CHECK(pmctl_health_step(&h, NULL, &c) == PMCTL_EV_NONE);
}

/* monitor: each kind of change, with what began and what ended */
static void health_changes_are_classified(void)
{
	struct pmctl_health h = { 0 };
	struct pmctl_hchange c;

	pmctl_health_step(&h, "ok", &c);
	CHECK(pmctl_health_step(&h, "ok", &c) == PMCTL_EV_NONE);
	CHECK(pmctl_health_step(&h, "origin_failing", &c) == PMCTL_EV_DEGRADED);
	CHECK(!strcmp(c.old, "ok") && !strcmp(c.now, "origin_failing"));
	CHECK(!strcmp(c.began, "origin_failing") && !c.ended[0]);
	CHECK(pmctl_health_step(&h, "origin_failing,full", &c) == PMCTL_EV_CHANGED);
	CHECK(!strcmp(c.began, "full") && !c.ended[0]);
	/* the same set in another order is no change */
	CHECK(pmctl_health_step(&h, "full,origin_failing", &c) == PMCTL_EV_NONE);
	CHECK(pmctl_health_step(&h, "full,media_errors", &c) == PMCTL_EV_CHANGED);
	CHECK(!strcmp(c.began, "media_errors") && !strcmp(c.ended, "origin_failing"));
	CHECK(pmctl_health_step(&h, "ok", &c) == PMCTL_EV_RECOVERED);
	CHECK(!c.began[0] && !strcmp(c.ended, "full,media_errors"));
	CHECK(pmctl_health_step(&h, NULL, &c) == PMCTL_EV_GONE && !h.known);
	CHECK(!strcmp(c.old, "ok") && !c.now[0]);
	/* a word that is a prefix of another is its own condition */
	pmctl_health_step(&h, "full_x", &c);
	CHECK(pmctl_health_step(&h, "full", &c) == PMCTL_EV_CHANGED);
	CHECK(!strcmp(c.began, "full") && !strcmp(c.ended, "full_x"));
}

/* monitor: the event names PROG gets, the priorities and the log line */
static void health_line_and_names(void)
{
	struct pmctl_health h = { 0 };
	struct pmctl_hchange c;
	char line[256];

	CHECK(!strcmp(pmctl_hevent_name(PMCTL_EV_DEGRADED), "degraded"));
	CHECK(!strcmp(pmctl_hevent_name(PMCTL_EV_CHANGED), "changed"));
	CHECK(!strcmp(pmctl_hevent_name(PMCTL_EV_RECOVERED), "recovered"));
	CHECK(!strcmp(pmctl_hevent_name(PMCTL_EV_GONE), "gone"));
	CHECK(pmctl_hevent_priority(PMCTL_EV_DEGRADED) < pmctl_hevent_priority(PMCTL_EV_RECOVERED));
	pmctl_health_step(&h, "ok", &c);
	pmctl_health_step(&h, "origin_failing", &c);
	pmctl_hchange_line("pc", &c, line, sizeof(line));
	CHECK(!strcmp(line, "pc: degraded: health origin_failing (was ok; began origin_failing)"));
	pmctl_health_step(&h, "ok", &c);
	pmctl_hchange_line("pc", &c, line, sizeof(line));
	CHECK(!strcmp(line, "pc: recovered: health ok (was origin_failing; ended origin_failing)"));
	memset(&h, 0, sizeof(h));
	pmctl_health_step(&h, "full", &c);
	pmctl_hchange_line("pc", &c, line, sizeof(line));
	CHECK(!strcmp(line, "pc: degraded: health full (at start; began full)"));
	pmctl_health_step(&h, NULL, &c);
	pmctl_hchange_line("pc", &c, line, sizeof(line));
	CHECK(!strcmp(line, "pc: gone: removed or detached (health was full)"));
}

int main(void)
{
	void (*tests[])(void) = {
		status_parses_all_36_fields, status_rejects_wrong_field_count,
		status_rejects_bad_words, status_reads_cleaner_mode,
		table_keeps_features, dm_line_splits, json_schema_is_stable,
		json_rate_is_null_when_not_measured, numbers_parse_strictly,
		crc32c_matches_kernel_convention, crc32c_matches_bitwise_definition,
		check_says_blank_then_clean_after_format,
		readonly_image_never_changes,
		small_reads_see_stores_and_cross_windows,
		set_keys_follow_the_target, table_flags_are_added_once,
		mirror_halves_are_read_and_set,
		dm_uuid_and_default_name_come_from_the_cache_uuid,
		sb_probe_reads_what_format_recorded,
		an_md_origin_may_grow_never_shrink,
		kept_dirty_mark_counts_only_for_its_cache,
		health_first_seen, health_changes_are_classified,
		health_line_and_names,
		settings_survive_a_torn_update, settings_keep_only_the_tunables,
	};
	size_t i;

	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int before = failures;

		cases++;
		tests[i]();
		if (failures == before)
			printf("ok %zu\n", i + 1);
	}
	printf("%d cases, %d failed\n", cases, failures);
	return failures ? 1 : 0;
}
