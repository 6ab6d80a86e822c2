"""Where dm-pmemcache's instructions go (issue 33): a profiling copy.

A copy of dm-pmemcache/ (in a temporary folder; the module itself is not
changed) gets time stamps, rdtsc(), at the boundaries of the phases of
the write path (pmc_map, pmc_map_write, pmc_write.c's commit,
pmc_meta_write_over) and of a
read hit (pmc_map_read, pmc_io_read, pmc_read_either_half).  Under -icount the TSC counts
guest instructions, so the difference of two stamps is the instructions
between them (a stamp costs a few itself).  The sums per phase, for new
writes, overwrites and read hits, are printed by pmc_dtr() as
"pmc-prof KIND n=N S1 S2 ..." kernel lines, which guest_cpu.sh copies to
its output as "PROF KIND n=N S1 S2 ...".

Every edit must match its text exactly once (vm_mutants.apply_edits): a
change of the code that moves a boundary makes build() fail, and
run_cpu_bench.py then leaves the profile out, saying why.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# phase names, by stamp index (stamp 0 is pmc_map's entry; phase i runs
# from stamp i-1 to stamp i)
WRITE_PHASES = [
    "pmc_map: flush check, pmc_note_foreground, pmc_pmem_enter",
    "pmc_map_write: block, mask; cleaner and sequential checks; pmc_write()",
    "pmc_env_alloc_slot (free list, spinlock), the write's epoch",
    "stripe lock (down_write), index lookup",
    "pmc_meta_write_over: the kept sectors' mask",
    "W1: data copy into pmem (memcpy_flushcache 4 KiB)",
    "W2: fence",
    "W3: seq atomic, record, record checksum",
    "W3: record store; W4: fence",
    "index inflight check; overwrite: W5 old record FREE (read, checksum, store), W6 fence, unlink",
    "index insert",
    "index ref, dirty and epoch counters, up_write",
    "old slot back to the free list (overwrite: spinlock, wake_up_all), stats, pmc_writeback_note_dirty",
    "bio_endio (dm's completion, the caller woken)",
    "pmc_pmem_exit, return",
]
READ_PHASES = [
    "pmc_map: flush check, pmc_note_foreground, pmc_pmem_enter",
    "pmc_map_read: block, mask; pmc_io_read: down_read, index lookup",
    "pmc_read_either_half: which half, badblocks check",
    "copy to the bio (copy_mc from pmem, 4 KiB)",
    "index ref, up_read, back in pmc_map_read",
    "stats",
    "bio_endio (dm's completion, the caller woken)",
    "pmc_pmem_exit, return",
]
COPY_PHASE = {"write": 6, "read": 4}      # the data copy: the floor copies too

IO_HEAD = r'''#include "pmemcache.h"
#include <asm/msr.h>

/* profiling copy (tests/bench/cpu_profile.py) */
u64 pmc_prof_t[32];
static u64 pmc_prof_sum[3][32], pmc_prof_n[3];
static int pmc_prof_kind = -1, pmc_prof_last;
#define PMC_STAMP(i) (pmc_prof_t[i] = rdtsc())

void pmc_prof_dump(void);
void pmc_prof_dump(void)
{
	static const char * const kind[] = { "new", "overwrite", "read" };
	char line[640];
	int k, i, n;

	for (k = 0; k < 3; k++) {
		n = 0;
		for (i = 1; i < 32; i++)
			n += scnprintf(line + n, sizeof(line) - n, " %llu",
				       pmc_prof_sum[k][i]);
		pr_info("pmc-prof %s n=%llu%s\n", kind[k], pmc_prof_n[k], line);
	}
	memset(pmc_prof_sum, 0, sizeof(pmc_prof_sum));
	memset(pmc_prof_n, 0, sizeof(pmc_prof_n));
}
'''

EDITS = {
    "io.c": [
        ('#include "pmemcache.h"\n', IO_HEAD),
        # pmc_map
        ("\tbio->bi_iter.bi_sector = dm_target_offset(ti, bio->bi_iter.bi_sector);\n"
         "\t*pmc_bio_around(bio) = NULL;\n",
         "\tPMC_STAMP(0);\n\tpmc_prof_kind = -1;\n"
         "\tbio->bi_iter.bi_sector = dm_target_offset(ti, bio->bi_iter.bi_sector);\n"
         "\t*pmc_bio_around(bio) = NULL;\n"),
        ("\tswitch (bio_op(bio)) {\n\tcase REQ_OP_READ:",
         "\tPMC_STAMP(1);\n\tswitch (bio_op(bio)) {\n\tcase REQ_OP_READ:"),
        ("\t\tr = DM_MAPIO_KILL;\n\t}\n\tpmc_pmem_exit(id);\n",
         "\t\tr = DM_MAPIO_KILL;\n\t}\n\tpmc_pmem_exit(id);\n"
         "\tif (pmc_prof_kind >= 0) {\n\t\tint i;\n\n"
         "\t\tPMC_STAMP(pmc_prof_last + 1);\n"
         "\t\tfor (i = 1; i <= pmc_prof_last + 1; i++)\n"
         "\t\t\tpmc_prof_sum[pmc_prof_kind][i] += pmc_prof_t[i] - pmc_prof_t[i - 1];\n"
         "\t\tpmc_prof_n[pmc_prof_kind]++;\n\t\tpmc_prof_kind = -1;\n\t}\n"),
        # pmc_map_write (the decisions and the commit are pmc_write.c's)
        ("\t\tpmc_writeback_note_dirty(pc);\n\t\tbio_endio(bio);\n\t\tbreak;\n",
         "\t\tpmc_writeback_note_dirty(pc);\n\t\tPMC_STAMP(13);\n\t\tbio_endio(bio);\n"
         "\t\tPMC_STAMP(14);\n\t\tpmc_prof_kind = w.hit;\n\t\tpmc_prof_last = 14;\n"
         "\t\tbreak;\n"),
        # pmc_map_read: pmc_io_read() (pmc_io.h) looks the block up and
        # calls pmc_read_copy(), then pmc_read_either_half() checks the
        # badblocks list and calls pmc_slot_copy()
        ("\tstruct pmc_read_ctx *rc = ctx;\n\n\treturn pmc_read_slot(",
         "\tstruct pmc_read_ctx *rc = ctx;\n\n\tPMC_STAMP(2);\n\treturn pmc_read_slot("),
        ("\tstruct pmc_slot_copy *c = ctx;\n\n"
         "\treturn pmc_copy_to_bio(c->bio, half + c->off, c->first, c->mask);\n",
         "\tstruct pmc_slot_copy *c = ctx;\n\tint r;\n\n\tPMC_STAMP(3);\n"
         "\tr = pmc_copy_to_bio(c->bio, half + c->off, c->first, c->mask);\n"
         "\tPMC_STAMP(4);\n\treturn r;\n"),
        ("\thave = pmc_io_read(pc, &pc->idx, oblock, need, pmc_read_copy, &rc, &r);\n",
         "\thave = pmc_io_read(pc, &pc->idx, oblock, need, pmc_read_copy, &rc, &r);\n"
         "\tPMC_STAMP(5);\n"),
        ("\tif (have == need || r) {\n\t\tbio_endio(bio);\n",
         "\tif (have == need || r) {\n\t\tPMC_STAMP(6);\n\t\tbio_endio(bio);\n\t\tPMC_STAMP(7);\n"
         "\t\tif (have == need && !r) {\n\t\t\tpmc_prof_kind = 2;\n\t\t\tpmc_prof_last = 7;\n\t\t}\n"),
    ],
    "pmc_write.c": [
        ('#include "pmc_write.h"\n',
         '#include "pmc_write.h"\n#include <asm/msr.h>\n'
         "extern u64 pmc_prof_t[32];\n#define PMC_STAMP(i) (pmc_prof_t[i] = rdtsc())\n"),
        ("\tslot = pmc_env_alloc_slot(pc, true);\n",
         "\tPMC_STAMP(2);\n\tslot = pmc_env_alloc_slot(pc, true);\n"),
        ("\tint r;\n\n\tpmc_write_lock_block(pc, w->oblock);\n",
         "\tint r;\n\n\tPMC_STAMP(3);\n\tpmc_write_lock_block(pc, w->oblock);\n"),
        ("\tov = old != PMC_NO_SLOT ? idx->slot[old] : 0;\n",
         "\tov = old != PMC_NO_SLOT ? idx->slot[old] : 0;\n\tPMC_STAMP(4);\n"),
        ("\t}\n\tpmc_env_stripe_unlock(pc, w->oblock);\n\tif (r) {",
         "\t}\n\tpmc_env_stripe_unlock(pc, w->oblock);\n\tPMC_STAMP(12);\n\tif (r) {"),
    ],
    "pmc_meta.c": [
        ('#include "pmc_meta.h"\n',
         '#include "pmc_meta.h"\n#include <asm/msr.h>\n'
         "extern u64 pmc_prof_t[32];\n#define PMC_STAMP(i) (pmc_prof_t[i] = rdtsc())\n"),
        ("\t\tkeep = pmc_slot_mask(idx->slot[old]) & ~mask;\n\n\t/* W1:",
         "\t\tkeep = pmc_slot_mask(idx->slot[old]) & ~mask;\n\tPMC_STAMP(5);\n\n\t/* W1:"),
        ("\tret = fill(ctx, pmc_meta_data(m, new_slot), crcs);\n\tif (ret)\n\t\treturn ret;\n",
         "\tret = fill(ctx, pmc_meta_data(m, new_slot), crcs);\n\tif (ret)\n\t\treturn ret;\n"
         "\tPMC_STAMP(6);\n"),
        ("\tpmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W2 : PMC_CUT_OVER_W2);\n",
         "\tpmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W2 : PMC_CUT_OVER_W2);\n\tPMC_STAMP(7);\n"),
        ("\tr.csum = cpu_to_le32(pmc_meta_record_csum(m->record_seed, new_slot, &r));\n",
         "\tr.csum = cpu_to_le32(pmc_meta_record_csum(m->record_seed, new_slot, &r));\n\tPMC_STAMP(8);\n"),
        ("\tpmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W4 : PMC_CUT_OVER_W4);\n",
         "\tpmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W4 : PMC_CUT_OVER_W4);\n\tPMC_STAMP(9);\n"),
        ("\tpmc_index_insert(idx, new_slot, oblock, mask | keep, flags);\n\treturn 0;\n",
         "\tPMC_STAMP(10);\n\tpmc_index_insert(idx, new_slot, oblock, mask | keep, flags);\n"
         "\tPMC_STAMP(11);\n\treturn 0;\n"),
    ],
    "target.c": [
        ("static void pmc_dtr(struct dm_target *ti)\n{\n\tstruct pmemcache *pc = ti->private;\n\n",
         "void pmc_prof_dump(void);\n\nstatic void pmc_dtr(struct dm_target *ti)\n{\n"
         "\tstruct pmemcache *pc = ti->private;\n\n\tpmc_prof_dump();\n"),
    ],
}


def build(workdir):
    """The profiling copy's .ko in @workdir; raises vm_mutants.MutantError
    if an edit no longer applies, RuntimeError if it does not build."""
    import vm_mutants
    from vm import KBUILD, KCACHE, KSRC
    src = vm_mutants.copy_module(workdir)
    for name, edits in EDITS.items():
        f = src / name
        f.write_text(vm_mutants.apply_edits(f.read_text(), edits))
    p = subprocess.run(["flock", str(KCACHE / "kernel-build.lock"), "make", "-s", "-C", str(KSRC),
                        "O=%s" % KBUILD, "CC=ccache gcc", "M=%s" % src, "modules"],
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("the profiling copy did not build:\n" + p.stderr[-3000:])
    return src / "dm-pmemcache.ko"


def parse(output):
    """{kind: {"n": N, "phases": [mean instructions of phase 1, 2, ...]}}
    from the guest's PROF lines."""
    out = {}
    for l in output.splitlines():
        if not l.startswith("PROF "):
            continue
        words = l.split()
        kind, n = words[1], int(words[2].split("=")[1])
        if not n:
            continue
        names = READ_PHASES if kind == "read" else WRITE_PHASES
        sums = [int(x) for x in words[3:3 + len(names)]]
        out[kind] = {"n": n, "phases": [round(s / n, 1) for s in sums]}
    return out


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(build(Path(tmp)))
