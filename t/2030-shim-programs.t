#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Real, unmodified programs through the shim see exactly the source tree:
# find, ls -lR, du, sha256sum, tar, cp -r, grep -r, Python os.walk + hashlib,
# h5py (HDF5 locks and may mmap), Pillow.  Then the store is moved away and
# the same runs fail: nothing passes through to a real directory.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a tree with an HDF5 file and images' '
	make_tree "$TRASH/src" &&
	rm "$TRASH/src/links/loop1" "$TRASH/src/links/loop2" "$TRASH/src/links/dangling" \
		"$TRASH/src/links/self" "$TRASH/src/a/b/up" &&
	mkdir -p "$TRASH/src/h5" "$TRASH/src/img" &&
	"$PY" -c "
import sys, numpy as np, h5py
from PIL import Image
d = sys.argv[1]
with h5py.File(d + \"/h5/data.h5\", \"w\") as f:
    f.create_dataset(\"x\", data=np.arange(100000, dtype=\"f8\").reshape(1000, 100), chunks=(100, 100), compression=\"gzip\")
    f.create_dataset(\"y\", data=np.arange(5000, dtype=\"i4\"))
    f.attrs[\"note\"] = \"staged\"
rng = np.random.default_rng(1)
for i in range(3):
    a = rng.integers(0, 255, (32 + i, 40, 3), dtype=np.uint8)
    Image.fromarray(a).save(d + \"/img/p%d.png\" % i)
    Image.fromarray(a).save(d + \"/img/j%d.jpg\" % i, quality=90)
" "$TRASH/src" &&
	touch_root "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 4 &&
	ln -s "$TRASH/src" native
'

# run CMD on the source tree and through the shim on the mount; outputs
# must be identical once the root path is replaced
same() {
	(cd "$TRASH/src" && eval "$1") >native.out 2>&1 &&
	shim sh -c "cd $MOUNT && $1" >staged.out 2>&1 &&
	test_cmp native.out staged.out
}

test_expect_success 'find -printf' '
	same "find . -printf \"%p %s %m %y %l\n\" | sort" &&
	test $(wc -l <staged.out) -gt 30
'
test_expect_success 'find with absolute paths' '
	(find "$TRASH/src" -printf "%P %s %m %y %T@\n" | sort) >n &&
	(shim find "$MOUNT" -printf "%P %s %m %y %T@\n" | sort) >s &&
	test_cmp n s
'
test_expect_success 'ls -lR (without the total lines)' '
	same "ls -lR --time-style=full-iso . | grep -v ^total"
'
test_expect_success 'ls -la of a directory, stat(1)' '
	same "ls -la --time-style=full-iso a a/b modes links | grep -v ^total" &&
	same "stat -c \"%n %s %a %F %h %U %y %N\" a/x.txt links/* modes/*"
'
test_expect_success 'du -ab' '
	same "du -ab . | sort -k2"
'
test_expect_success 'sha256sum of every file' '
	same "find . -type f | sort | xargs -d \"\\n\" sha256sum" &&
	test $(wc -l <staged.out) -gt 20
'
test_expect_success 'cat, head, tail, wc, cmp' '
	same "cat a/b/c/seq.txt | wc; head -c 5000 a/b/c/r1500k | md5sum; tail -n 3 a/b/c/seq.txt; wc -c a/b/p*" &&
	shim cmp "$MOUNT/a/b/c/r1500k" "$TRASH/src/a/b/c/r1500k"
'
test_expect_success 'tar cf - | tar tvf - (sorted: tar keeps directory order)' '
	(tar cf - -C "$TRASH/src" . | tar tvf - | sort -k6) >n &&
	(shim tar cf - -C "$MOUNT" . | tar tvf - | sort -k6) >s &&
	test_cmp n s
'
test_expect_success 'cp -r out of the mount, then diff -r' '
	shim cp -r "$MOUNT" "$TRASH/copy" &&
	diff -r "$TRASH/src" "$TRASH/copy" &&
	shim cp -a "$MOUNT/a" "$TRASH/copy-a" && diff -r "$TRASH/src/a" "$TRASH/copy-a"
'
test_expect_success 'grep -r' '
	same "grep -rn needle . ; grep -rlc 9999 . | sort"
'
test_expect_success 'python: os.walk + open().read() + hashlib, scandir, realpath' '
	cat >walk.py <<-\EOF &&
	import os, sys, hashlib
	root = sys.argv[1]
	out = []
	for d, dirs, files in os.walk(root):
	    dirs.sort()
	    for f in sorted(files):
	        p = os.path.join(d, f)
	        with open(p, "rb") as fh:
	            out.append("%s %s" % (os.path.relpath(p, root), hashlib.sha256(fh.read()).hexdigest()))
	for e in sorted(os.scandir(os.path.join(root, "a")), key=lambda e: e.name):
	    out.append("%s %s %s" % (e.name, e.is_dir(), e.stat().st_size))
	out.append(os.path.relpath(os.path.realpath(os.path.join(root, "links/chain")), root))
	os.chdir(os.path.join(root, "a"))
	out.append(os.path.relpath(os.getcwd(), root) + " " + open("x.txt").read().strip())
	print("\n".join(out))
	EOF
	"$PY" walk.py "$TRASH/src" >n &&
	shim "$PY" walk.py "$MOUNT" >s &&
	test_cmp n s && test $(wc -l <s) -gt 20
'
test_expect_success 'h5py opens an HDF5 file inside the dataset' '
	cat >h5.py <<-\EOF &&
	import sys, h5py, hashlib
	with h5py.File(sys.argv[1] + "/h5/data.h5", "r") as f:
	    x = f["x"][...]; y = f["y"][100:200]
	    print(x.shape, float(x.sum()), int(y.sum()), f.attrs["note"], sorted(f.keys()))
	EOF
	"$PY" h5.py "$TRASH/src" >n &&
	shim "$PY" h5.py "$MOUNT" >s &&
	test_cmp n s && grep -q staged s
'
test_expect_success 'Pillow opens PNG and JPEG files' '
	cat >img.py <<-\EOF &&
	import sys, glob, hashlib
	from PIL import Image
	for p in sorted(glob.glob(sys.argv[1] + "/img/*")):
	    im = Image.open(p); im.load()
	    print(p.rsplit("/", 1)[1], im.format, im.size, hashlib.md5(im.tobytes()).hexdigest())
	EOF
	"$PY" img.py "$TRASH/src" >n &&
	shim "$PY" img.py "$MOUNT" >s &&
	test_cmp n s && test $(wc -l <s) = 6
'
test_expect_success 'the store moved away: the same programs fail' '
	mv "$JOBDIR" "$JOBDIR.away" &&
	! shim cat "$MOUNT/a/x.txt" &&
	! shim "$PY" h5.py "$MOUNT" &&
	test $(shim find "$MOUNT" 2>/dev/null | wc -l) = 0 &&
	! shim sha256sum "$MOUNT/a/b/p4096" &&
	mv "$JOBDIR.away" "$JOBDIR" &&
	shim cat "$MOUNT/a/x.txt" >/dev/null &&
	test ! -e "$MOUNT"
'
test_done
