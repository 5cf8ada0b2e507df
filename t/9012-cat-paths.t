#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `dstage cat` and `dstage ls` resolve PATH the way the shim resolves
# MOUNT/PATH: "a//b", "./a", ".." inside the pack, symlinks in inner
# components (and in the last one for cat), chains of links, ENOTDIR for a
# '/' after a file, ELOOP for a loop.  Each name is asked of both, and both
# must give the same bytes, or both fail.  A name that leaves the pack
# (".." above its root), which the shim hands to the real file system, is
# refused by cat and ls.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
MOUNT=/dstage-test-$$
[ -e "$MOUNT" ] && { echo "Bail out! $MOUNT exists"; exit 1; }
STORE="$SHM/dstage.$uid.p"
shim() { env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$STORE" DSTAGE_NODE=0 DSTAGE_MOUNT="$MOUNT" "$@"; }

test_expect_success 'a tree with inner symlinks, packed and staged' '
	mkdir -p src/a/b src/c/d src/e && echo one >src/a/b/f && echo two >src/c/d/g &&
	ln -s a/b src/dl && ln -s ../dl src/c/l2 && ln -s f src/a/b/fl &&
	ln -s ../../c/d src/a/b/up && ln -s loop2 src/e/loop1 && ln -s loop1 src/e/loop2 &&
	ln -s ../c src/e/cl &&
	"$DSTAGE" pack -q src pack &&
	mpirun_n 1 "$DSTAGE" stage pack --to "$SHM" --job p -q
'

cat >names <<'EOF2'
a/b/f
a//b/f
./a/b/f
a/./b//./f
a/b/../b/f
dl/f
dl//f
./dl/./f
c/l2/f
c/l2/fl
a/b/fl
dl/fl
a/b/up/g
dl/up/g
dl/up/../d/g
e/cl/d/g
e/cl/l2/up/g
dl/../b/f
c/l2/../b/f
a/b/f/
dl/f/
a/b/nosuch
nosuch/f
dl/nosuch
a/b/f/x
e/loop1
e/loop1/x
a
dl
a/b/up
EOF2

test_expect_success 'cat: the same answer as the shim for every name' '
	while read -r n; do
		rc=0 && "$DSTAGE" cat pack "$n" >got.cat 2>err.cat || rc=$?
		src=0 && shim cat "$MOUNT/$n" >got.shim 2>err.shim || src=$?
		if [ $src = 0 ]; then
			[ $rc = 0 ] && cmp -s got.cat got.shim ||
				{ echo "$n: shim read it, dstage cat: rc=$rc $(cat err.cat)"; exit 1; }
		else
			[ $rc = 1 ] && test -s err.cat ||
				{ echo "$n: shim failed ($(cat err.shim)), dstage cat: rc=$rc"; exit 1; }
		fi
		echo "$n: shim $src, cat $rc $(cat err.cat)" || exit 1
	done <names
'

test_expect_success 'cat names the reason like the kernel would' '
	! "$DSTAGE" cat pack a/b/f/ 2>err && test_grep "Not a directory" err &&
	! "$DSTAGE" cat pack e/loop1 2>err && test_grep "Too many levels of symbolic links" err &&
	! "$DSTAGE" cat pack dl/nosuch 2>err && test_grep "not in the pack" err &&
	! "$DSTAGE" cat pack dl 2>err && test_grep "is a directory" err
'

test_expect_success 'ls: a directory name lists what the shim lists there' '
	for n in a//b dl/ ./c/l2/ dl/up/ e/cl/d c/d/../d ./; do
		"$DSTAGE" ls pack "$n" >ls.out 2>err || { echo "$n: $(cat err)"; exit 1; }
		shim ls -A "$MOUNT/$n" >shim.out 2>&1 || { echo "$n: shim: $(cat shim.out)"; exit 1; }
		# dstage ls: the directory, then its subtree as pack paths; keep
		# its children by name
		if [ "$n" = ./ ]; then cat ls.out; else
			d=$(head -n 1 ls.out) && sed -n "2,\$p" ls.out | sed "s|^$d||"; fi |
			sed "s|/\$||" | grep -v / | sort >a &&
		sort shim.out >b &&
		echo "$n: $(tr "\n" " " <b)" &&
		test -s b && test_cmp b a || { echo "$n differs"; exit 1; }
	done
'

test_expect_success 'ls: the last symlink is listed as itself; inner ones followed' '
	"$DSTAGE" ls -l pack dl >out && test_grep "^l.* dl -> a/b$" out && test $(wc -l <out) = 1 &&
	"$DSTAGE" ls pack c/l2/f >out && echo a/b/f >want && test_cmp want out
'

test_expect_success 'a name leaving the pack: refused by cat and ls, nothing read from outside' '
	for n in ../etc/hostname a/../../etc/hostname dl/../../../etc/hostname; do
		! "$DSTAGE" cat pack "$n" >out 2>err && test_cmp /dev/null out &&
		test_grep "leaves the pack" err &&
		! "$DSTAGE" ls pack "$n" >out 2>err && test_grep "leaves the pack" err || exit 1
	done
'
test_done
