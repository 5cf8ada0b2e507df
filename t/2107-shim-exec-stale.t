#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A stale DSTAGE_FDS (issue 25 item 4): a program without the shim between
# two images of one process moves descriptor numbers (`exec 3<&4`), then
# execs a program with the shim.  The list the first image passed still
# says what each number held before; the next image must take over each
# number as the open file it holds now (or leave it alone: EBADF, loud),
# never as the file the list names (silent wrong bytes).  Every case runs
# on the staged tree and on the native copy: the same output.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: three files, staged' '
	mkdir -p src &&
	seq 1 3000 | sed "s/^/a /" >src/a &&
	seq 1 2000 | sed "s/^/b /" >src/b &&
	seq 1 1000 | sed "s/^/c /" >src/c &&
	printf "native file\n" >plain &&
	touch_root src &&
	stage_tree "$TRASH/src"
'

# read.py N...: print what each descriptor N reads (or its error)
cat >read.py <<'EOF2'
import os, sys
for a in sys.argv[1:]:
    fd = int(a)
    try:
        data = os.read(fd, 1 << 20)
        print(fd, len(data), data[:12], data[-8:])
    except OSError as e:
        print(fd, "error", e.strerror)
EOF2

# same_moves MOVES N...: the first image (under the shim for the staged run)
# opens a, b, c on 3, 4, 5; a shell without the shim does MOVES, then
# execs read.py (with the shim) on descriptors N...
same_moves() {
	moves=$1
	shift
	inner="$moves; exec env LD_PRELOAD=\"\$P\" \"$PY\" \"$TRASH/read.py\" $*"
	P= sh -c "exec 3<\"\$1/a\" 4<\"\$1/b\" 5<\"\$1/c\"; exec sh -c '$inner'" sh src \
		>native.out 2>&1 &&
	P="$PRELOAD" shim sh -c "exec 3<\"\$1/a\" 4<\"\$1/b\" 5<\"\$1/c\";
		exec env -u LD_PRELOAD sh -c '$inner'" sh "$MOUNT" >staged.out 2>&1 &&
	test_cmp native.out staged.out
}

test_expect_success 'no moves: 3, 4, 5 read a, b, c' '
	same_moves ":" 3 4 5 &&
	test_grep "^3 19893 b.a 1" staged.out
'

test_expect_success 'exec 3<&4: descriptor 3 reads b, not a' '
	same_moves "exec 3<&4" 3 4 5 &&
	test_grep "^3 .*b.b 1.n" staged.out
'

test_expect_success 'a swap: exec 6<&3 3<&5 5<&6 6<&-' '
	same_moves "exec 6<&3 3<&5 5<&6 6<&-" 3 4 5
'

test_expect_success 'a number reopened on a native file, one closed' '
	same_moves "exec 3<&- 4<&- 3<plain" 3 4 5 &&
	test_grep "^3 12 b.native file" staged.out &&
	test_grep "^4 error Bad file descriptor" staged.out
'

test_expect_success 'stdin moved from a staged number (prog <&4): read as b' '
	same_moves "exec 0<&4 4<&-" 0 3 4 &&
	test_grep "^0 .*b.b 1.n" staged.out
'

test_expect_success 'a forked child with the shim reads a moved number; the offset follows the open file' '
	same_moves "exec 3<&4; env LD_PRELOAD=\$P head -c 100 <&3 >/dev/null" 3 4 &&
	test_grep "^3 12793 " staged.out
'

test_done
