#!/bin/bash
# Keep an extracted linux-source-6.1 tree as a git repository at its
# pristine commit, and bring it to "pristine + core-patches/series".
#
# Re-applying is cheap: `git reset --hard pristine` rewrites only files
# that differ, and `git am` touches only the files in the series, so the
# O= build folder rebuilds just what the series changed.
#
# usage: kernel-tree.sh TARBALL SRC_DIR PATCH_DIR
set -euo pipefail

tarball=$1
src=$2
patches=$(cd "$3" && pwd)
git_id=(-c user.name=dm-pmemcache -c user.email=dm-pmemcache@localhost)

tar_id=$(stat -c '%s-%Y' "$tarball")
if [ ! -d "$src/.git" ] || [ "$(cat "$src/.git/pristine-from" 2>/dev/null)" != "$tar_id" ]; then
	echo "  EXTRACT $tarball -> $src"
	rm -rf "$src" "$src.new"
	mkdir -p "$src.new"
	tar -xf "$tarball" -C "$src.new" --strip-components=1
	(cd "$src.new" &&
	 git init -q &&
	 git add -A -f &&
	 git "${git_id[@]}" commit -q -m "linux-source-6.1 $(make -s kernelversion)" &&
	 git tag pristine)
	echo "$tar_id" > "$src.new/.git/pristine-from"
	mv "$src.new" "$src"
fi

cd "$src"
series=()
if [ -f "$patches/series" ]; then
	mapfile -t series < <(grep -v -e '^#' -e '^[[:space:]]*$' "$patches/series")
fi
# One "name hash" line per patch, of its diff only (a reworded commit
# message rebuilds nothing): what is applied now, what is wanted.
wanted=$(for p in "${series[@]}"; do
	echo "$p $(sed -n '/^diff --git /,$p' "$patches/$p" | sha256sum | cut -d' ' -f1)"
done)
applied=$(git config --get pmemcache.applied-list || true)
clean=$([ -z "$(git status --porcelain --untracked-files=no)" ] && echo 1 || echo 0)
if [ "$applied" = "$wanted" ] && [ $clean = 1 ]; then
	exit 0
fi

# Patches added at the end of an applied series go on top: only the
# files they touch change, so the O= build recompiles just those.
start=0
if [ $clean = 1 ] && [ -n "$applied" ] && [ "${wanted:0:${#applied}}" = "$applied" ] &&
   [ "${wanted:${#applied}:1}" = $'\n' ]; then
	start=$(echo "$applied" | wc -l)
else
	git am --abort >/dev/null 2>&1 || true
	git reset -q --hard pristine
	git clean -fdq
fi
for p in "${series[@]:$start}"; do
	echo "  APPLY   $p"
	git "${git_id[@]}" am -q "$patches/$p"
done
git config pmemcache.applied-list "$wanted"
