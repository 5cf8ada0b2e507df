#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Relative names from a real directory that lead into the mount (issue 18.4):
# `cd / && tar cf - dstage/...`, `wc -c ../dstage/...` from /tmp, find and ls
# from /, rsync (which opens "/" and calls fstatat(fd, "dstage/...")), *at()
# calls on a real directory descriptor with "..".  Each is run through the
# shim and natively on a real copy of the tree placed under the same name one
# level down (nroot/<mount name>), from the matching directory, and stdout,
# stderr and the exit status must agree.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"
test_lazy_prereq RSYNC 'command -v rsync' 'rsync is not installed'

M=${MOUNT#/}

test_expect_success 'setup: a tree, its store, a native copy under nroot/<mount name>' '
	make_tree "$TRASH/src" &&
	rm "$TRASH/src/links/loop1" "$TRASH/src/links/loop2" "$TRASH/src/links/dangling" \
		"$TRASH/src/links/self" "$TRASH/src/a/b/up" &&
	touch_root "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 3 &&
	mkdir -p nroot/tmp nroot/x/y &&
	cp -a "$TRASH/src" "nroot/$M"
'

# same NATIVE_DIR STAGED_DIR CMD: CMD from NATIVE_DIR (a directory under
# nroot), and through the shim from STAGED_DIR (the real one on the way to
# the mount); output and status must agree
same() {
	(cd "$TRASH/nroot/$1" && eval "$3") >native.out 2>&1
	echo "exit $?" >>native.out
	(cd "$2" && shim sh -c "$3") >staged.out 2>&1
	echo "exit $?" >>staged.out
	test_cmp native.out staged.out
}

test_expect_success 'tar from /: the archive is byte for byte the native one' '
	same . / "tar cf - $M/a/x.txt $M/a/b/c/seq.txt $M/a/b/p4097 | md5sum" &&
	same . / "tar cf - $M/a | tar tvf - | sort -k6" &&
	test $(wc -l <staged.out) -gt 8
'
test_expect_success 'wc and cat through ../ from /tmp, ../../ from two levels down' '
	same tmp /tmp "wc -c ../$M/a/b/c/seq.txt ../$M/a/x.txt; cat ../$M/./a//x.txt" &&
	same x/y "$TRASH" "wc -l ../../$M/a/b/c/seq.txt; ls ../../$M/a/b/../b/c" &&
	test_grep 50000 staged.out
'
test_expect_success 'a missing name and a file used as a directory: the native errors' '
	same . / "cat $M/a/missing; cat $M/a/x.txt/y; stat -c %s ./$M/links/todir/../x.txt"
'
test_expect_success 'find from / restricted to the mount' '
	same . / "find $M -printf \"%p %s %m %y %l\n\" | sort" &&
	same . / "find ./$M/a -name \"*.txt\" | sort" &&
	test $(wc -l <staged.out) -ge 3
'
test_expect_success 'ls -la from / and from /tmp' '
	same . / "ls -la --time-style=full-iso $M/a $M/modes | grep -v ^total" &&
	same tmp /tmp "ls -l --time-style=full-iso ../$M/a/b | grep -v ^total"
'
test_expect_success '*at() on a real directory descriptor, with and without ..' '
	cat >at.py <<-\EOF &&
	import os, sys
	m = sys.argv[1]
	root = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
	tmp = os.open("tmp", os.O_RDONLY | os.O_DIRECTORY)
	for fd, p in ((root, m + "/a/x.txt"), (tmp, "../" + m + "/a/b/c/seq.txt"),
	              (root, "./" + m + "/links/tofile"), (tmp, "../" + m + "/a/missing")):
	    try:
	        st = os.stat(p, dir_fd=fd)
	        f = os.open(p, os.O_RDONLY, dir_fd=fd)
	        print(p, st.st_size, oct(st.st_mode), len(os.read(f, 1 << 20)))
	    except OSError as e:
	        print(p, e.strerror)
	print(sorted(os.listdir(os.open(m + "/a", os.O_RDONLY, dir_fd=root))))
	EOF
	(cd nroot && "$PY" "$TRASH/at.py" "$M") >native.out 2>&1 &&
	(cd / && shim "$PY" "$TRASH/at.py" "$M") >staged.out 2>&1 &&
	test_cmp native.out staged.out
'

test_expect_success RSYNC 'rsync -a from the mount by a name relative to /, then again: nothing to copy' '
	(cd / && shim rsync -a "$M/" "$TRASH/copy/") &&
	diff -r src copy &&
	(cd / && shim rsync -ai "$M/" "$TRASH/copy/") >again &&
	test_cmp /dev/null again &&
	shim rsync -ai "$MOUNT/" "$TRASH/copy/" >again &&
	test_cmp /dev/null again
'
test_expect_success RSYNC 'rsync with the mount as destination: up to date as natively; a change is EROFS' '
	rsync -ai src/ "nroot/$M/" >native.out 2>&1 &&
	shim rsync -ai src/ "$MOUNT/" >staged.out 2>&1 &&
	test_cmp native.out staged.out &&
	cp -a src src2 && echo new >src2/a/new.txt &&
	! shim rsync -a src2/ "$MOUNT/" 2>err &&
	test_grep "Read-only file system" err
'

test_done
