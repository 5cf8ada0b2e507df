#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim's directory and stdio families against the same tree on a real
# file system: directory streams with "." and "..", d_type and d_ino;
# chdir/fchdir/getcwd inside the mount; FILE streams (glibc's fopen does
# not call the exported open).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 3 &&
	tree_paths "$TRASH/src" >paths
'

test_expect_success 'directory family: staged == source' '
	"$T/shim-dir" "$TRASH/src" <paths >native &&
	shim "$T/shim-dir" "$MOUNT" <paths >staged &&
	grep -q "^readdir .a.: n=5 end=0: ../4/1 ./4/1 b/4/1 x.txt/8/1 zero/8/1" native &&
	test_cmp native staged
'

test_expect_success 'without the shim: no directory' '
	"$T/shim-dir" "$MOUNT" <paths >bare &&
	grep -q "^opendir .a.: ENOENT" bare
'

test_expect_success 'the virtual .dstage tree is not listed in the root' '
	shim ls -a "$MOUNT" >ls &&
	! grep -q dstage ls && grep -q "^\.hidden$" ls
'

test_expect_success 'stdio family: staged == source, also zlib' '
	"$T/shim-stdio" "$TRASH/src" <paths >snative &&
	shim "$T/shim-stdio" "$MOUNT" <paths >sstaged &&
	test $(grep -c "freopen: same=1" snative) -gt 10 &&
	test_cmp snative sstaged &&
	stage_tree "$TRASH/src" -N 1 -p 3 -z &&
	shim "$T/shim-stdio" "$MOUNT" <paths >sstaged-z &&
	test_cmp snative sstaged-z
'

test_expect_success 'fopen for writing: EROFS' '
	shim "$PY" -c "
import sys, errno
for mode in (\"w\", \"a\", \"r+\", \"x\"):
    try:
        open(sys.argv[1] + \"/a/x.txt\", mode); sys.exit(mode)
    except OSError as e:
        assert e.errno in (errno.EROFS, errno.EEXIST), (mode, e)
" "$MOUNT"
'

test_expect_success 'a shell cd into the mount, and a child started there' '
	shim sh -c "cd $MOUNT/a/b && pwd && cat grep.txt && /bin/pwd && ls" >out &&
	cat >want <<-EOF &&
	$MOUNT/a/b
	one
	two
	needle three
	$MOUNT/a/b
	c
	grep.txt
	p4095
	p4096
	p4097
	up
	EOF
	test_cmp want out
'

test_done
