#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim's metadata family on a staged tree against the same tree on a
# real file system: stat, lstat, the 64-bit and __xstat forms, fstat,
# fstatat, statx, access, readlink, realpath, from absolute paths, relative
# paths after chdir and directory descriptors.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a tree and its node store' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 3 &&
	tree_paths "$TRASH/src" >"$TRASH/paths" &&
	test ! -e "$MOUNT"
'

test_expect_success 'stat family: staged tree == source tree' '
	"$T/shim-stat" "$TRASH/src" <paths >native &&
	shim "$T/shim-stat" "$MOUNT" <paths >staged &&
	test $(wc -l <native) -gt 1000 &&
	test_cmp native staged
'

test_expect_success 'stat family: the same with zlib-compressed files' '
	
	stage_tree "$TRASH/src" -N 1 -p 3 -z &&
	shim "$T/shim-stat" "$MOUNT" <paths >staged-z &&
	test_cmp native staged-z
'

test_expect_success 'st_ino unique and stable, one st_dev for the dataset' '
	shim "$T/shim-stat" --ino "$MOUNT" <paths >ino1 &&
	shim "$T/shim-stat" --ino "$MOUNT" <paths >ino2 &&
	test_cmp ino1 ino2 &&
	awk "{print \$2}" ino1 | sort -u >devs && test $(wc -l <devs) = 1 &&
	(cd src && find . -mindepth 1 | sed "s,^\./,," | sort) >entries &&
	shim "$T/shim-stat" --ino "$MOUNT" <entries | awk "{print \$1}" | sort | uniq -d >dups &&
	test_cmp /dev/null dups &&
	test $(shim "$T/shim-stat" --ino "$MOUNT" <entries | wc -l) = $(wc -l <entries)
'

test_expect_success 'without the shim the same calls fail (no pass-through)' '
	"$T/shim-stat" "$MOUNT" <paths >bare &&
	! test_cmp native bare >/dev/null &&
	grep -q "^stat .a/x.txt.: -1 ENOENT" bare
'

test_expect_success 'with the node store moved away the shim stays out of the way' '
	mv "$JOBDIR" "$JOBDIR.away" &&
	rc=0 && { shim "$T/shim-stat" "$MOUNT" <paths >moved || rc=$?; } &&
	mv "$JOBDIR.away" "$JOBDIR" && test $rc = 0 &&
	grep -q "^stat .a/x.txt.: -1 ENOENT" moved &&
	! grep -q "^stat .a/x.txt.: 0" moved
'

test_expect_success 'one warning when the store cannot be mapped, with DSTAGE_LOG=info' '
	! DSTAGE_LOG=info LD_PRELOAD="$PRELOAD" DSTAGE_STORE=/nonexistent DSTAGE_MOUNT="$MOUNT" \
		cat "$MOUNT/a/x.txt" 2>err &&
	test $(grep -c "dstage: shim:.*staying out of the way" err) = 1 &&
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE=/nonexistent DSTAGE_MOUNT="$MOUNT" true 2>err2 &&
	test_cmp /dev/null err2
'

test_expect_success 'statfs, statvfs: read-only, one file system' '
	shim stat -f -c "%t %l" "$MOUNT" >fs1 &&
	shim stat -f -c "%t %l" "$MOUNT/a/b/p4096" >fs2 &&
	test_cmp fs1 fs2 && grep -q "^64737467 255" fs1 &&
	shim "$PY" -c "import os,sys; s=os.statvfs(sys.argv[1]); sys.exit(0 if s.f_flag & os.ST_RDONLY else 1)" "$MOUNT/a"
'

test_expect_success 'access W_OK is EROFS; xattrs: ENODATA, empty list' '
	shim "$PY" -c "
import os, sys, errno
m = sys.argv[1]
for p in (m + \"/a/x.txt\", m + \"/a\", m):
    try: os.access(p, os.W_OK) and sys.exit(\"W_OK allowed\")
    except OSError: pass
    assert not os.access(p, os.W_OK)
try:
    os.getxattr(m + \"/a/x.txt\", \"user.x\"); sys.exit(\"xattr\")
except OSError as e: assert e.errno == errno.ENODATA, e
assert os.listxattr(m + \"/a/x.txt\") == []
try:
    os.getxattr(m + \"/a/nope\", \"user.x\"); sys.exit(\"xattr\")
except OSError as e: assert e.errno == errno.ENOENT, e
" "$MOUNT" &&
	shim "$T/shim-io" access "$MOUNT/a/x.txt" W_OK >out && grep -q "= -1 EROFS" out
'

test_done
