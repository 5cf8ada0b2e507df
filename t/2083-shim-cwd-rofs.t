#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# After a chdir into the mount, programs that make files relative to the cwd
# through libc's own internal calls (the mkstemp family, mkdtemp, mkfifo;
# sed -i, perl -i, Python's tempfile) fail with EROFS like on a read-only
# mount, and the job directory (the store and the cwd shadows the shim keeps
# there) does not change (issue 11.4).  A name that leads out of the mount
# still works.  (perl -i only warns and exits 0 when it cannot edit in place,
# natively too.)
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a tree on one node, a first cd into it (the shadow exists)' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 2 &&
	shim sh -c "cd $MOUNT/a && cd $MOUNT/a/b && cd $MOUNT" &&
	mkdir out
'

# a checksum of the whole job directory: names, modes, sizes, contents
jobsum() {
	(cd "$JOBDIR" && find . -printf "%p %m %s %y\n" | sort &&
		find . -type f -exec cat {} + | md5sum) | md5sum
}

# in_mount DIR CMD: CMD in a shell whose cwd is the staged DIR
in_mount() {
	shim sh -c "cd \"$MOUNT/$1\" && $2"
}

test_expect_success 'the mkstemp family, mkdtemp, mkfifo in a staged cwd: EROFS, nothing made' '
	jobsum >before &&
	for k in mkstemp mkstemp64 mkostemp mkdtemp mkfifo; do
		! in_mount a "\"$T/shim-mktemp\" $k tmpXXXXXX" >>out/o 2>>out/e || exit 1
	done &&
	! in_mount a/b "\"$T/shim-mktemp\" mkstemps tmpXXXXXX.txt 4" 2>>out/e &&
	! in_mount a/b "\"$T/shim-mktemp\" mkostemps ./tmpXXXXXX.txt 4" 2>>out/e &&
	! shim "$T/shim-mktemp" mkstemp "$MOUNT/a/tmpXXXXXX" 2>>out/e &&
	test $(grep -c "Read-only file system" out/e) = 8 &&
	test_cmp /dev/null out/o &&
	jobsum >after && test_cmp before after
'
test_expect_success 'bad templates: EINVAL as without the shim' '
	{ "$T/shim-mktemp" mkstemp tmpXXXX 2>native.err || echo $? >>native.err; } &&
	{ in_mount a "\"$T/shim-mktemp\" mkstemp tmpXXXX" 2>staged.err || echo $? >>staged.err; } &&
	test_cmp native.err staged.err && test_grep "Invalid argument" staged.err
'
test_expect_success 'a template that leads out of the mount makes a real file there' '
	in_mount a "\"$T/shim-mktemp\" mkstemp ../..$TRASH/out/realXXXXXX" >made &&
	name=$(sed -n "s/^ok //p" made) &&
	case $name in ../..$TRASH/out/real??????) ;; *) false ;; esac &&
	test -f "$TRASH/out/${name##*/}" &&
	jobsum >after && test_cmp before after
'
test_expect_success 'mkfifo(1), sed -i, perl -pi, Python tempfile in a staged cwd: EROFS' '
	! in_mount a "mkfifo ff" 2>e1 && test_grep "Read-only file system" e1 &&
	! in_mount a "sed -i s/hello/bye/ x.txt" 2>e2 && test_grep "Read-only file system" e2 &&
	# perl -i warns and goes on (exit 0) when it cannot make its temporary
	{ in_mount a "perl -pi -e s/hello/bye/ x.txt" 2>e3 || :; } && test_grep "Read-only file system" e3 &&
	! in_mount a "\"$PY\" -c \"import tempfile; tempfile.mkstemp(dir=\\\".\\\")\"" 2>e4 &&
	test_grep "Read-only file system" e4 &&
	! in_mount a "\"$PY\" -c \"import tempfile; tempfile.NamedTemporaryFile(dir=\\\"b\\\")\"" 2>e5 &&
	test_grep "Read-only file system" e5 &&
	! in_mount a "\"$PY\" -c \"import tempfile; tempfile.mkdtemp(dir=\\\".\\\")\"" 2>e6 &&
	test_grep "Read-only file system" e6 &&
	test "$(shim cat "$MOUNT/a/x.txt")" = hello &&
	jobsum >after && test_cmp before after
'
test_expect_success 'the cwd shadows are empty and not writable (0500)' '
	test -d "$JOBDIR/cwd" &&
	find "$JOBDIR/cwd" -mindepth 1 -maxdepth 1 >shadows &&
	test $(wc -l <shadows) -ge 3 &&
	find "$JOBDIR/cwd" -mindepth 2 >inside && test_cmp /dev/null inside &&
	find "$JOBDIR/cwd" -mindepth 1 ! -perm 0500 >notro && test_cmp /dev/null notro
'
test_expect_success !ROOT 'a raw creat in the shadow is refused by the kernel' '
	! in_mount a "\"$PY\" -c \"import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(85, b\\\"raw\\\", 0o600); import sys; sys.exit(0 if r >= 0 else 1)\"" &&
	jobsum >after && test_cmp before after
'

test_done
