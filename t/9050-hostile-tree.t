#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hostile plain trees staged as they are (issue 28): the names pack refuses
# are refused, links out and special files are skipped as pack skips them,
# and a file that vanishes, changes (even with its size and mtime put
# back: its ctime), turns into a FIFO or is reached through
# a swapped-in symlink between the walk and its read fails the stage, named,
# every rank ending with exit 1 and nothing left in the node stores.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)

mktree() {
	rm -rf "$1" && mkdir -p "$1/a" "$1/b" && seq 1 2000 >"$1/a/f1" && echo two >"$1/a/f2" &&
	seq 1 500 >"$1/b/f3"
}

test_expect_code 1 'a name with a newline is refused, named' '
	mktree nl && : >"nl/a/bad
name" &&
	mpirun_n 2 "$DSTAGE" stage nl --to "$SHM" --job nl --node-per-rank 2>err; rc=$?
	cat err; test_grep "nl/a/bad.x0aname" err || exit 9
	test ! -e "$SHM/dstage.$uid.nl" || exit 9
	exit $rc
'

test_expect_code 1 'a name that is not UTF-8 is refused, named' '
	mktree u8 && : >"u8/b/$(printf "\377x")" &&
	mpirun_n 2 "$DSTAGE" stage u8 --to "$SHM" --job u8 --node-per-rank 2>err; rc=$?
	cat err; test_grep "u8/b/.xffx" err || exit 9
	exit $rc
'

test_expect_success 'a symlink out of the tree and a FIFO are skipped with a warning, as pack does' '
	mktree sk && echo secret >outside && ln -s ../../outside sk/a/out && mkfifo sk/b/fifo &&
	mpirun_n 2 "$DSTAGE" stage sk --to "$SHM" --job sk --node-per-rank -q 2>err &&
	test_grep "sk/a/out.: symlink points outside the source tree" err &&
	test_grep "sk/b/fifo.: FIFO, skipped" err &&
	"$T/storecheck" "$SHM/dstage.$uid.sk" sk >holders &&
	printf "a/f1 1\na/f2 1\nb/f3 1\n" >want && test_cmp want holders
'

# stage_hooked NAME HOOK: stage tree NAME, HOOK run between the walk and the reads
stage_hooked() {
	mktree "$1" &&
	(export DSTAGE_TEST_AFTER_SCAN="$2"
	 mpirun_n 3 "$DSTAGE" stage "$1" --to "$SHM" --job "$1" -R 2 --node-per-rank 2>err); rc=$?
	cat err
	test ! -e "$SHM/dstage.$uid.$1" || { echo "a store was left"; return 9; }
	return $rc
}

test_expect_code 1 'a file that vanishes during the stage: named, every rank exits 1' '
	stage_hooked gone "rm gone/a/f2"; rc=$?
	test_grep "gone/a/f2.: vanished during the stage" err || exit 9
	exit $rc
'

test_expect_code 1 'a file that grows during the stage: named' '
	stage_hooked grew "echo more >>grew/b/f3"; rc=$?
	test_grep "grew/b/f3.: changed during the stage" err || exit 9
	exit $rc
'

test_expect_code 1 'a file rewritten during the stage, size and mtime kept (touch -r): its ctime names it' '
	stage_hooked same "cp -p same/a/f1 ref && sed -i s/^1\\\$/9/ same/a/f1 && touch -r ref same/a/f1 &&
		! cmp -s ref same/a/f1"; rc=$?
	test_grep "same/a/f1.: changed during the stage" err || exit 9
	exit $rc
'

test_expect_code 1 'a file swapped for a FIFO during the stage: named, no hang' '
	stage_hooked fifo "rm fifo/a/f2 && mkfifo fifo/a/f2"; rc=$?
	test_grep "fifo/a/f2.: no longer a regular file" err || exit 9
	exit $rc
'

test_expect_code 1 'a directory swapped for a symlink out of the tree during the stage: not followed' '
	mkdir -p away/b && seq 1 500 >away/b/f3 &&
	stage_hooked swap "mv swap/b swap/b.old && ln -s ../away/b swap/b"; rc=$?
	test_grep "swap/b/f3.: is now reached through a symlink" err || exit 9
	exit $rc
'

test_done
