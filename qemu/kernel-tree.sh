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
want=$( (cat "$patches/series" 2>/dev/null; for p in "${series[@]}"; do cat "$patches/$p"; done) | sha256sum | cut -d' ' -f1)
if [ "$(git config --get pmemcache.applied || true)" = "$want" ] &&
   [ -z "$(git status --porcelain --untracked-files=no)" ]; then
	exit 0
fi

git am --abort >/dev/null 2>&1 || true
git reset -q --hard pristine
git clean -fdq
for p in "${series[@]}"; do
	echo "  APPLY   $p"
	git "${git_id[@]}" am -q "$patches/$p"
done
git config pmemcache.applied "$want"
