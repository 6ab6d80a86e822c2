#!/bin/bash
# Can tests/test_fault_injection.py fail? (issue 29)
#
# Each mutant makes the target acknowledge a write whose origin write
# failed, in a copy of dm-pmemcache/ in a temporary folder, built against
# the shared kernel build; the fault-injection round runs with it
# (PMC_MUTANT_KO) and must fail with "acknowledged writes lost". Then the
# model itself: PMC_FAULT_STRICT=1 takes every failed write as
# acknowledged, which the real module must be caught at (its failed
# writes leave old data). Nothing in dm-pmemcache/ itself is changed.
#
# usage: tests/fault_mutants.sh [NAME-PATTERN]
# Prints one line per mutant and "fault mutants N, caught N".
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
KCACHE=${KCACHE:-/var/cache/dm-pmemcache}
KBUILD=${KBUILD:-$KCACHE/build}
KSRC=${KSRC:-$KCACHE/linux}
PY=${PY:-/usr/bin/python3}
ONLY=${1:-}
LOGS=${MUTANT_LOGS:-$KCACHE/test-logs/fault-mutants}
TEST=tests/test_fault_injection.py::test_faults_injected_while_writing_through_a_full_cache

# name|file|python expression on the file's text s (must change it)
MUTANTS=(
	"failed write-around acknowledged (pmc_end_io)|io.c|s.replace('\tif (*error)\n\t\tpmc_health_set(pc, PMC_H_ORIGIN, blk_status_to_errno(*error));', '\tif (*error) {\n\t\tpmc_health_set(pc, PMC_H_ORIGIN, blk_status_to_errno(*error));\n\t\t*error = BLK_STS_OK;\n\t}', 1)"
	"failed write-through acknowledged (pmc_write_through_done)|pmc_write.c|s.replace('\tr = pmc_env_through_write(pc, t);\n', '\tr = pmc_env_through_write(pc, t);\n\tr = 0;\n', 1)"
	"model: failed writes taken as acknowledged|-|strict"
)

run_test() {
	(cd "$REPO" && KCACHE=$KCACHE KBUILD=$KBUILD $PY -m pytest -p no:cacheprovider -x -q "$TEST")
}

mkdir -p "$LOGS"
n=0 caught=0
for m in "${MUTANTS[@]}"; do
	IFS='|' read -r name file expr <<<"$m"
	[ -n "$ONLY" ] && [[ $name != *"$ONLY"* ]] && continue
	n=$((n + 1))
	log="$LOGS/$(tr -c 'A-Za-z0-9_.-' _ <<<"$name").log"
	if [ "$file" = - ]; then
		PMC_FAULT_STRICT=1 run_test > "$log" 2>&1
	else
		tmp=$(mktemp -d)
		cp -r "$REPO/dm-pmemcache" "$tmp/"
		rm -f "$tmp"/dm-pmemcache/*.ko "$tmp"/dm-pmemcache/*.o
		if ! "$PY" - "$tmp/dm-pmemcache/$file" "$expr" <<'EOF'
import sys
path, expr = sys.argv[1], sys.argv[2]
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
		if ! make -s -C "$KSRC" O="$KBUILD" CC="ccache gcc" M="$tmp/dm-pmemcache" \
			modules > "$log" 2>&1; then
			echo "mutant $name: does not build (log $log)"
			rm -rf "$tmp"
			continue
		fi
		PMC_MUTANT_KO="$tmp/dm-pmemcache/dm-pmemcache.ko" run_test > "$log" 2>&1
		rm -rf "$tmp"
	fi
	if grep -q "acknowledged writes lost" "$log"; then
		caught=$((caught + 1))
		echo "mutant $name: caught ($(grep -m1 -o '[A-Z]* CHECK sectors=[0-9]* ok=[0-9]* bad=[0-9]*' "$log"))"
	else
		echo "mutant $name: NOT caught (log $log)"
	fi
done
echo "fault mutants $n, caught $caught"
[ "$caught" = "$n" ]
