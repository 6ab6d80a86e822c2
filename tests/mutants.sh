#!/bin/bash
# Mutation testing of the durability sites (issue 14).
#
# Each mutant removes one durability step from a copy of dm-pmemcache/ in
# a temporary folder and runs the checker that must notice it:
#   vm     the module is built against the shared kernel build and
#          tests/test_durability.py::test_power_cuts_over_a_volatile_origin
#          runs with it (MUTANT_CUTS cuts over the volatile origin, default
#          8: each mode twice); caught if that test fails with
#          "acknowledged writes lost";
#   window:POINT,...
#          the module is built with PMC_CUT_HOOKS=1 and
#          tests/test_window_cuts.py runs with it, cutting the power at
#          those points (pmc_cut.h) in that order; caught if it fails with
#          "acknowledged writes lost". These mutants break an ordering that
#          matters only inside one window, which a random cut almost never
#          hits: with MUTANT_COMPARE=1 each is also run by the vm checker
#          (random cuts), reported on a line of its own and not counted;
#   window-quiet:POINT,...
#          the same, but each boot stops its writers once armed, waits for
#          writeback to go quiet, then flushes and cuts at the 8th hit
#          (PMC_CUT_QUIET=1, PMC_CUT_AFTER=8): the batch it cuts in was
#          covered by no earlier origin flush;
#   fua    the module is built as for vm and
#          tests/test_durability.py::test_writes_past_a_full_cache_reach_the_origin_with_fua
#          runs with it: caught if the volatile layer counted fewer FUA
#          writes than the cache sent around and through it (random cuts
#          rarely catch a missing FUA there: writeback flushes the origin
#          every few milliseconds under pressure);
#   model  tests/host/crash_model is built over the mutant's pmc_meta.c and
#          runs the make-test seeds (--ops 300, seeds 1 2 3, and the
#          waitprev run --ops 600 --seed 2); caught if it reports a
#          VIOLATION (an assertion of the model that fails because, say,
#          format has one fence less than the model cuts at, is not).
# Nothing in dm-pmemcache/ itself is changed.
#
# usage: tests/mutants.sh [NAME-PATTERN]
# Prints one line per mutant and "durability sites N, mutants caught N".
# Exit status 0 if every mutant was caught.
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
KCACHE=${KCACHE:-/var/cache/dm-pmemcache}
KBUILD=${KBUILD:-$KCACHE/build}
KSRC=${KSRC:-$KCACHE/linux}
PY=${PY:-/usr/bin/python3}
ONLY=${1:-}
LOGS=${MUTANT_LOGS:-$KCACHE/test-logs/mutants}

# name|file|checker|python expression on the file's text s (must change it)
MUTANTS=(
	"origin flush before CLEAN (pmc_wb_flush_origin)|writeback.c|vm|s.replace('r = blkdev_issue_flush(pc->origin->bdev);', 'r = 0;', 1)"
	"FUA of write-around (pmc_write_around)|io.c|vm|s.replace('bio->bi_opf |= REQ_FUA;', '', 1)"
	"FUA of write-through in a full cache (pmc_through_write)|io.c|fua|s.replace('REQ_OP_WRITE | REQ_SYNC | REQ_FUA);', 'REQ_OP_WRITE | REQ_SYNC);', 1)"
	# the older copy made FREE with the data (W1), before the new record
	# exists (W3): only a cut between the two loses it
	"older copy freed before the new record (W5 before W3)|pmc_meta.c|window:over_w2,over_w2,over_w2,over_w2|s.replace('\t/* W2: the data is durable', '\tif (old != PMC_NO_SLOT)\n\t\tpmc_meta_invalidate(m, old, PMC_P_FREE);\n\t/* W2: the data is durable', 1)"
	# CLEAN stored before the origin flush (C1 before C0): one flush
	# after the batch, its result ignored (if (0): no unused function).
	# Cut at the 8th CLEAN of the first batch after the writers stopped
	# and writeback went quiet (window-quiet): no earlier flush covered
	# those blocks (random wb_c1 cuts mostly land on blocks that the
	# previous batch's flush had made durable)
	# a clean cached copy made FREE after the write-through's origin
	# write (T2 after T1): a cut between them leaves it CLEAN over the
	# newer origin data (through_t1 is armed once every block is clean)
	"clean copy freed after the write-through (T2 after T1)|io.c|window:through_t1,through_t1|s.replace('\tif (!r && slot != PMC_NO_SLOT && !(pmc_slot_flags(v) & PMC_SF_DIRTY)) {', '\tif (0 && !r && slot != PMC_NO_SLOT && !(pmc_slot_flags(v) & PMC_SF_DIRTY)) {', 1)"
	"CLEAN before the origin flush (C1 before C0)|writeback.c|window-quiet:wb_c1,wb_c1,wb_c1|s.replace('\tpmc_wb_flush_origin(pc, &list);\n', '\tif (0)\n\t\tpmc_wb_flush_origin(pc, &list);\n', 1).replace('\tpmc_free_slots(pc, freed, nf);\n\tWRITE_ONCE(pc->starved, false);', '\tblkdev_issue_flush(pc->origin->bdev);\n\tpmc_free_slots(pc, freed, nf);\n\tWRITE_ONCE(pc->starved, false);', 1)"
)
# every pmem fence of the shared metadata code, one at a time
while IFS=: read -r line text; do
	label=$(grep -o 'PMC_P_[A-Z]*' <<<"$text")
	MUTANTS+=("pmem fence pmc_meta.c:$line ($label)|pmc_meta.c|model|drop_line(s, $line)")
done < <(grep -n 'pmc_pmem_fence(PMC_P_' "$REPO/dm-pmemcache/pmc_meta.c" | grep -v '^[0-9]*:static')

# The vm checker: power cuts over the volatile origin with the module
# built in $tmp (the mutant).
volatile_cuts() {
	(cd "$REPO" && PMC_LONG=0 PMC_DURABLE_CUTS=${MUTANT_CUTS:-8} \
		PMC_MUTANT_KO="$tmp/dm-pmemcache/dm-pmemcache.ko" \
		KCACHE=$KCACHE KBUILD=$KBUILD $PY -m pytest -p no:cacheprovider -x -q \
		tests/test_durability.py::test_power_cuts_over_a_volatile_origin)
}

mkdir -p "$LOGS"
sites=0 caught=0
for m in "${MUTANTS[@]}"; do
	IFS='|' read -r name file checker expr <<<"$m"
	[ -n "$ONLY" ] && [[ $name != *"$ONLY"* ]] && continue
	sites=$((sites + 1))
	tmp=$(mktemp -d)
	cp -r "$REPO/dm-pmemcache" "$tmp/"
	rm -f "$tmp"/dm-pmemcache/*.ko "$tmp"/dm-pmemcache/*.o
	if ! "$PY" - "$tmp/dm-pmemcache/$file" "$expr" <<'EOF'
import sys
path, expr = sys.argv[1], sys.argv[2]


def drop_line(s, n):
    lines = s.split("\n")
    assert "pmc_pmem_fence(" in lines[n - 1], lines[n - 1]
    del lines[n - 1]
    return "\n".join(lines)


s = open(path).read()
t = eval(expr)
if t == s:
    sys.exit("mutant did not change %s" % path)
open(path, "w").write(t)
EOF
	then
		echo "mutant $name: could not be applied"
		rm -rf "$tmp"
		continue
	fi
	log="$LOGS/$(tr -c 'A-Za-z0-9_.-' _ <<<"$name").log"
	verdict="NOT caught"
	case $checker in
	window:* | window-quiet:*)
		: > "$log"
		quiet=0 after=0
		if [[ $checker == window-quiet:* ]]; then
			quiet=1 after=8
		fi
		if [ "${MUTANT_COMPARE:-0}" = 1 ]; then
			# the same mutant under random cuts, for comparison
			clog=${log%.log}.random.log
			cverdict="NOT caught"
			if make -s -C "$KSRC" O="$KBUILD" CC="ccache gcc" M="$tmp/dm-pmemcache" \
				modules > "$clog" 2>&1; then
				volatile_cuts >> "$clog" 2>&1
				grep -q "acknowledged writes lost" "$clog" && cverdict=caught
			fi
			echo "comparison, not counted: mutant $name under ${MUTANT_CUTS:-8} random cuts: $cverdict (log $clog)"
			make -s -C "$KSRC" O="$KBUILD" M="$tmp/dm-pmemcache" clean > /dev/null 2>&1
		fi
		if ! make -s -C "$KSRC" O="$KBUILD" CC="ccache gcc" M="$tmp/dm-pmemcache" \
			PMC_CUT_HOOKS=1 modules >> "$log" 2>&1; then
			echo "mutant $name: does not build (log $log)"
			rm -rf "$tmp"
			continue
		fi
		(cd "$REPO" && PMC_LONG=0 PMC_CUT_POINTS=${checker#*:} \
			PMC_CUT_QUIET=$quiet PMC_CUT_AFTER=$after \
			PMC_CUT_KO="$tmp/dm-pmemcache/dm-pmemcache.ko" \
			KCACHE=$KCACHE KBUILD=$KBUILD $PY -m pytest -p no:cacheprovider -x -q \
			tests/test_window_cuts.py) >> "$log" 2>&1
		grep -q "acknowledged writes lost" "$log" && verdict=caught
		;;
	vm | fua)
		if ! make -s -C "$KSRC" O="$KBUILD" CC="ccache gcc" M="$tmp/dm-pmemcache" \
			modules > "$log" 2>&1; then
			echo "mutant $name: does not build (log $log)"
			rm -rf "$tmp"
			continue
		fi
		if [ "$checker" = vm ]; then
			volatile_cuts >> "$log" 2>&1
			grep -q "acknowledged writes lost" "$log" && verdict=caught
		else
			(cd "$REPO" && PMC_LONG=0 PMC_MUTANT_KO="$tmp/dm-pmemcache/dm-pmemcache.ko" \
				KCACHE=$KCACHE KBUILD=$KBUILD $PY -m pytest -p no:cacheprovider -x -q \
				tests/test_durability.py::test_writes_past_a_full_cache_reach_the_origin_with_fua) \
				>> "$log" 2>&1
			grep -q "writes past the cache without FUA" "$log" && verdict=caught
		fi
		;;
	model)
		mkdir "$tmp/host"
		cp "$REPO"/tests/host/crash_model.c "$REPO"/tests/host/Makefile "$tmp/host/"
		if ! make -s -C "$tmp/host" SRC="$tmp/dm-pmemcache" crash_model > "$log" 2>&1; then
			echo "mutant $name: does not build (log $log)"
			rm -rf "$tmp"
			continue
		fi
		# one violation is enough: stop there (a broken recovery can make
		# a run of the model explore for many minutes after it)
		for args in "--seed 1" "--seed 2" "--seed 3" "--ops 600 --seed 2"; do
			# shellcheck disable=SC2086
			timeout 900 "$tmp/host/crash_model" --ops 300 --stop-at-first $args >> "$log" 2>&1
			grep -q "^VIOLATION" "$log" && break
		done
		# a VIOLATION line, not just a failed assertion of the model
		grep -q "^VIOLATION" "$log" && verdict=caught
		;;
	esac
	[ "$verdict" = caught ] && caught=$((caught + 1))
	echo "mutant $name: $verdict (log $log)"
	rm -rf "$tmp"
done
echo "durability sites $sites, mutants caught $caught"
[ "$sites" = "$caught" ]
