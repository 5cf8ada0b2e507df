#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim's descriptor family against the same tree on a real file system:
# open flags, read/pread/readv/preadv, lseek, dup/dup2/dup3/fcntl sharing an
# offset, mmap, flock, fadvise, sendfile, copy_file_range; writes and
# unemulated operations fail loudly (EROFS, EBADF), never silently.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 3 &&
	tree_paths "$TRASH/src" >paths && mkdir scratch
'

test_expect_success 'descriptor family: staged == source' '
	"$T/shim-fd" "$TRASH/src" "$TRASH/scratch" <paths >native &&
	shim "$T/shim-fd" "$MOUNT" "$TRASH/scratch" <paths >staged &&
	test $(grep -c "^read(4096)" native) -gt 10 &&
	test_cmp native staged
'

test_expect_success 'descriptor family: zlib-compressed store' '
	stage_tree "$TRASH/src" -N 1 -p 3 -z &&
	shim "$T/shim-fd" "$MOUNT" "$TRASH/scratch" <paths >staged-z &&
	test_cmp native staged-z
'

test_expect_success 'without the shim nothing of it works' '
	"$T/shim-fd" "$MOUNT" "$TRASH/scratch" <paths >bare &&
	! grep -q "^read(4096)" bare
'

# What a read-only file system answers; the same with the shim.
test_expect_success 'writes through names: EROFS (or EEXIST, EISDIR, EXDEV as the kernel)' '
	m=$MOUNT &&
	for c in \
		"open $m/a/x.txt wronly:EROFS" "open $m/a/x.txt rdwr:EROFS" \
		"open $m/a/x.txt rdonly,trunc:EROFS" "open $m/a/new creat,wronly:EROFS" \
		"open $m/a/new rdonly,creat:EROFS" "open $m/a/x.txt rdonly,creat:0" \
		"open $m/a/x.txt creat,excl,wronly:EEXIST" "open $m/a wronly:EISDIR" \
		"open $m/a rdonly,creat:EISDIR" "open $m/a/x.txt rdonly,directory:ENOTDIR" \
		"open $m/links/tofile rdonly,nofollow:ELOOP" "open $m/links/loop1 rdonly:ELOOP" \
		"open $m/a tmpfile,wronly:EROFS" "open $m/nope/x creat,wronly:ENOENT" \
		"creat $m/a/x.txt:EROFS" "creat $m/a/new:EROFS" \
		"mkdir $m/a:EEXIST" "mkdir $m/a/new:EROFS" "mkdir $m/nope/new:ENOENT" \
		"rmdir $m/empty:EROFS" "rmdir $m/a/nope:EROFS" "unlink $m/a/x.txt:EROFS" \
		"unlink $m/nope/x:ENOENT" "chmod $m/a/x.txt:EROFS" "chmod $m/a/nope:ENOENT" \
		"chown $m/a/x.txt:EROFS" "lchown $m/links/tofile:EROFS" "truncate $m/a/x.txt:EROFS" \
		"utimes $m/a:EROFS" "mknod $m/a/fifo:EROFS" "setxattr $m/a/x.txt:EROFS" \
		"removexattr $m/a/x.txt:EROFS" \
		"rename $m/a/x.txt $m/a/y:EROFS" "rename $m/a/x.txt $TRASH/y:EXDEV" \
		"rename $TRASH/paths $m/a/y:EXDEV" "link $m/a/x.txt $m/a/y:EROFS" \
		"link $m/a/x.txt $TRASH/y:EXDEV" "symlink x $m/a/y:EROFS" "symlink x $m/a/x.txt:EEXIST"
	do
		want=${c##*:} && args=${c%:*} &&
		shim "$T/shim-io" $args >out &&
		if test "$want" = 0; then grep -q "= 0 0" out; else grep -q "= -1 $want\$" out; fi ||
		{ echo "$args: want $want, got $(cat out)"; exit 1; }
	done &&
	test -e paths
'

test_expect_success 'operations not emulated on a staged descriptor fail loudly' '
	m=$MOUNT &&
	for c in write:EBADF pwrite:EBADF ftruncate:EBADF fchmod:EBADF fchown:EBADF \
		futimens:EBADF ioctl:EBADF getdents:ENOTDIR splice-in:EBADF \
		mmap-shared-write:EACCES setlk-write:EBADF lockf:EBADF
	do
		shim "$T/shim-io" fdop "$m/a/b/p4096" ${c%:*} >out &&
		grep -q "= -1 ${c#*:}\$" out || { echo "$c: $(cat out)"; exit 1; }
	done &&
	for c in fsync fdatasync flock-ex setlk-read fadvise mmap-private-write; do
		shim "$T/shim-io" fdop "$m/a/b/p4096" $c >out &&
		grep -q "= 0 0" out || { echo "$c: $(cat out)"; exit 1; }
	done
'

test_expect_success 'close-on-exec staged descriptors are closed on exec, others kept (t/2096)' '
	shim "$PY" -c "
import os, sys, subprocess
fd = os.open(sys.argv[1] + \"/a/x.txt\", os.O_RDONLY)
r = subprocess.run([\"/bin/sh\", \"-c\", \"cat <&%d\" % fd], capture_output=True)
assert r.stdout == b\"\" and r.returncode != 0, r
os.set_inheritable(fd, True)
r = subprocess.run([\"/bin/sh\", \"-c\", \"cat <&%d\" % fd], pass_fds=(fd,), capture_output=True)
assert r.stdout == b\"hello\\n\", r
print(\"ok\")
" "$MOUNT" >out && grep -q ok out
'

test_done
