// SPDX-License-Identifier: GPL-2.0
/*
 * A namespace full of live records (issue 29, item 7), for the test of a
 * table load's loops over every record: format a (sparse) NVDIMM backing
 * file of any size with the module's pmc_meta_format(), then give every
 * slot a DIRTY record of block <slot> with a correct checksum (seq slot +
 * 1).  No crash makes such a namespace, but a large cache that was full
 * of dirty blocks at a power cut looks the same to recovery.  The data
 * blocks stay zero and take no space.  pmem is the mmap()ed file, as plain
 * memory (pmem_plain.c), made durable by one msync() at the end.
 *
 * usage: forge_full FILE ORIGIN_SECTORS
 * Prints "forge_full: blocks=N records=N".
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pmc_meta.h"

#define BS	4096U

int main(int argc, char **argv)
{
	struct pmc_origin_id oid = { 0 };
	struct pmc_meta m;
	struct stat st;
	u64 slot;
	u8 *base;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: forge_full FILE ORIGIN_SECTORS\n");
		return 2;
	}
	oid.sectors = strtoull(argv[2], NULL, 0);
	fd = open(argv[1], O_RDWR);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 2;
	}
	base = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	if (pmc_meta_format(&m, base, st.st_size, BS, &oid)) {
		fprintf(stderr, "forge_full: format failed\n");
		return 1;
	}
	if (m.n_blocks * (BS / PMC_SECTOR_SIZE) > oid.sectors) {
		fprintf(stderr, "forge_full: an origin of %llu sectors is too small\n",
			(unsigned long long)oid.sectors);
		return 2;
	}
	for (slot = 0; slot < m.n_blocks; slot++) {
		struct pmc_record r = {
			.oblock = cpu_to_le64(slot),
			.seq = cpu_to_le64(slot + 1),
			.valid = cpu_to_le32(m.full_mask),
			.state = cpu_to_le32(PMC_REC_DIRTY),
		};

		r.csum = cpu_to_le32(pmc_meta_record_csum(m.record_seed, slot, &r));
		memcpy(base + PMC_RECORDS_OFFSET + slot * PMC_RECORD_SIZE, &r, sizeof(r));
	}
	if (msync(base, st.st_size, MS_SYNC)) {
		perror("msync");
		return 1;
	}
	printf("forge_full: blocks=%llu records=%llu\n", (unsigned long long)m.n_blocks,
	       (unsigned long long)slot);
	return 0;
}
