#!/bin/bash
# Check the core-patches series the way a reviewer would:
#  1. apply it, one patch at a time, to a pristine linux-source-6.1 tree
#     in its own git worktree;
#  2. for every prefix of the series (longest first, see below),
#     configure with the product config and build bzImage + modules (the
#     series must be bisectable);
#  3. run scripts/checkpatch.pl --strict on every patch: no errors, and a
#     patch with warnings must explain them in its commit message (it
#     has to mention "checkpatch");
#  4. build the C files the series touches with W=1 and report any
#     warning in them.
#
# The tree is the one qemu/kernel-tree.sh keeps ($KCACHE/linux, tag
# "pristine"); run `make kernel` once first.  The build directory lies
# inside the worktree ($KCACHE/check-linux/.build, ignored by the tree's
# .gitignore; $KCACHE/build-check links to it): kbuild then uses relative
# source paths, so ccache can reuse objects compiled in other worktrees
# that are laid out the same way.  Every kernel make runs under the
# shared build lock, one prefix at a time, so other builds can interleave.
#
# usage: check-series.sh [FRAGMENT...]   (default: qemu/kernel.config)
# env:   KCACHE (/var/cache/dm-pmemcache), JOBS (nproc), FROM (shortest
#        prefix to build, default 1: all of them)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
KCACHE=${KCACHE:-/var/cache/dm-pmemcache}
JOBS=${JOBS:-$(nproc)}
FROM=${FROM:-1}
src=$KCACHE/linux
wt=$KCACHE/check-linux
build=$wt/.build
lock=$KCACHE/kernel-build.lock
log=$KCACHE/check-series.log
export CCACHE_DIR=${CCACHE_DIR:-$KCACHE/ccache}
git_id=(-c user.name=dm-pmemcache -c user.email=dm-pmemcache@localhost)

fragments=("$@")
[ ${#fragments[@]} -gt 0 ] || fragments=("$top/qemu/kernel.config")
for i in "${!fragments[@]}"; do
	fragments[$i]=$(cd "$(dirname "${fragments[$i]}")" && pwd)/$(basename "${fragments[$i]}")
done

if ! git -C "$src" rev-parse -q --verify pristine >/dev/null 2>&1; then
	echo "check-series: $src has no 'pristine' tag; run 'make kernel' first" >&2
	exit 1
fi

mapfile -t series < <(grep -v -e '^#' -e '^[[:space:]]*$' "$here/series")
[ ${#series[@]} -gt 0 ] || { echo "check-series: empty series" >&2; exit 1; }

: > "$log"
say() { echo "$*" | tee -a "$log"; }

# A fresh worktree at pristine, keeping the build directory.
if [ ! -e "$wt/.git" ]; then
	git -C "$src" worktree prune
	git -C "$src" worktree add -q --detach "$wt" pristine
fi
git -C "$wt" am --abort >/dev/null 2>&1 || true
git -C "$wt" checkout -q --detach pristine
git -C "$wt" reset -q --hard pristine
git -C "$wt" clean -fdq
mkdir -p "$build"
ln -sfn "$build" "$KCACHE/build-check"

# Apply the whole series first, then build every prefix from the longest
# to the shortest: the full stack usually reuses a developer's ccache
# objects and the short-lived prefixes near the top only differ in a few
# files, so most results come early; the prefixes below a widely included
# header change (blk_types.h, scatterlist.h, dma-mapping.h) cost a big
# rebuild each.  A failing prefix is reported and the others still run.
commits=()
for p in "${series[@]}"; do
	git -C "$wt" "${git_id[@]}" am -q "$here/$p" || {
		say "FAIL apply   $p"
		git -C "$wt" am --abort || true
		exit 1
	}
	commits+=("$(git -C "$wt" rev-parse HEAD)")
done
say "ok   apply    ${#series[@]} patches"

fail=0

# checkpatch needs python3 with ply and GitPython for its SPDX check;
# prefer the system interpreter over a pyenv shim.
for p in "${series[@]}"; do
	out=$(PATH=/usr/bin:$PATH "$wt/scripts/checkpatch.pl" --strict --terse -q \
		"$here/$p" 2>&1 || true)
	errors=$(echo "$out" | grep -c ': ERROR:' || true)
	warnings=$(echo "$out" | grep -c ': WARNING:' || true)
	checks=$(echo "$out" | grep -c ': CHECK:' || true)
	explained=yes
	if [ "$warnings" -gt 0 ] &&
	   ! sed -n '/^---$/q;p' "$here/$p" | grep -qi checkpatch; then
		explained=no
	fi
	if [ "$errors" -gt 0 ] || [ "$explained" = no ]; then
		say "FAIL checkpatch $p: $errors errors, $warnings warnings (explained: $explained), $checks checks"
		fail=1
	else
		say "ok   checkpatch $p: $errors errors, $warnings warnings (explained: $explained), $checks checks"
	fi
	echo "$out" | grep -E ': (ERROR|WARNING|CHECK):' | sed 's/^/     /' | tee -a "$log" || true
done

for ((n = ${#series[@]}; n >= FROM; n--)); do
	p=${series[$((n - 1))]}
	git -C "$wt" checkout -q --detach "${commits[$((n - 1))]}"
	start=$(date +%s)
	if flock "$lock" "$top/qemu/kernel-config.sh" "$wt" "$build" "${fragments[@]}" >>"$log" 2>&1 &&
	   flock "$lock" make -C "$wt" O="$build" CC="ccache gcc" -j"$JOBS" bzImage modules \
		>"$build/build-$n.log" 2>&1; then
		warn=$(grep -c ' warning: ' "$build/build-$n.log" || true)
		say "ok   build   prefix $n: $p ($(( $(date +%s) - start ))s, $warn compiler warnings)"
		grep ' warning: ' "$build/build-$n.log" | sort -u | tee -a "$log" || true
		# W=1 on the C files the series touches, with the whole series.
		# Those files have W=1 warnings of their own in 6.1, so only
		# warnings on lines the series adds count.
		if [ "$n" = ${#series[@]} ]; then
			# only objects the product config builds (not e.g.
			# kernel/dma/debug.o without DMA_API_DEBUG)
			objs=()
			for o in $(git -C "$wt" diff --name-only pristine HEAD -- '*.c' |
				   sed 's/\.c$/.o/'); do
				[ -e "$build/$o" ] && objs+=("$o")
			done
			flock "$lock" make -k -C "$wt" O="$build" CC="ccache gcc" W=1 \
				KCFLAGS=-Wno-error -j"$JOBS" "${objs[@]}" >"$build/w1.log" 2>&1 || true
			git -C "$wt" diff -U0 pristine HEAD > "$build/series.diff"
			if python3 - "$build/series.diff" "$build/w1.log" >"$build/w1-new.txt" <<'PY'
import re, sys
added = {}
cur = None
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("+++ b/"):
        cur = line[6:].strip()
    m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
    if m and cur:
        start, count = int(m.group(1)), int(m.group(2) or 1)
        added.setdefault(cur, set()).update(range(start, start + count))
new = set()
for line in open(sys.argv[2], errors="replace"):
    m = re.match(r"(?:\.\./)?(\S+?):(\d+):\d+: (warning|error): ", line)
    if m and int(m.group(2)) in added.get(m.group(1), ()):
        new.add(line.rstrip())
print("\n".join(sorted(new)))
sys.exit(1 if new else 0)
PY
			then
				say "ok   W=1     ${#objs[@]} touched C files: no warning on a line the series adds ($(grep -c ' warning: ' "$build/w1.log" || true) pre-existing)"
			else
				say "FAIL W=1     warnings on lines the series adds:"
				tee -a "$log" < "$build/w1-new.txt"
				fail=1
			fi
		fi
	else
		say "FAIL build   prefix $n: $p (log: $build/build-$n.log)"
		grep -E -B2 -A6 '(error|Error)[: ]' "$build/build-$n.log" | tail -40 | tee -a "$log"
		fail=1
	fi
done
git -C "$wt" checkout -q --detach "${commits[$((${#commits[@]} - 1))]}"

[ $fail = 0 ] && say "check-series: PASS (${#series[@]} patches)" || say "check-series: FAIL"
say "log: $log"
exit $fail
