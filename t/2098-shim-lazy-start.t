#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim's lazy start (io/init.c, io/zlib.c): a process with the shim
# loaded maps the node store (index, store, stats) only when it first names
# a path that may be under the mount, and libz only when it first reads a
# zlib file; libc functions are looked up at their first use.  A process
# that never names the mount (a shell's /bin/true) maps none of it.  Each
# way a process can first reach the mount still finds it: an absolute path,
# a relative path climbing in from the real cwd, an *at call on a real
# directory, stat, opendir, fopen, many threads at once, a fork child
# before and after; and a staged cwd or staged descriptors inherited across
# exec still work from the start.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_lazy_prereq PYTHON3 'command -v python3' "no python3 on PATH"
test_require PYTHON3

test_expect_success 'setup: a tree staged, zlib' '
	make_tree src &&
	stage_tree src -N 1 -z
'

# maps_of CMD...: run CMD under the shim; it prints its own /proc/self/maps
test_expect_success 'a process that never names the mount maps neither the store nor libz' '
	shim cat /proc/self/maps >maps &&
	grep -q libdstage-preload maps &&
	! grep -q "$JOBDIR" maps &&
	! grep -q "libz\.so" maps
'

test_expect_success 'the first path under the mount maps the store' '
	shim python3 -c "
import os, sys
m = sys.argv[1]
def maps():
    return open(\"/proc/self/maps\").read()
assert sys.argv[2] not in maps()
os.stat(m + \"/a/zero\")
after = maps()
assert sys.argv[2] + \"/0/store\" in after and sys.argv[2] + \"/0/index\" in after, after
" "$MOUNT" "$JOBDIR"
'

test_expect_success 'libz is mapped at the first zlib file read, and inflates it right' '
	shim sh -c "test \$(grep -c libz.so /proc/\$\$/maps) = 0 && read l <$MOUNT/a/x.txt &&
		test \$(grep -c libz.so /proc/\$\$/maps) = 0 && read l <$MOUNT/a/b/c/seq.txt && echo \$l &&
		grep -q libz.so /proc/\$\$/maps" >out &&
	test "$(cat out)" = 1 &&
	shim cat "$MOUNT/a/b/c/seq.txt" | cmp - src/a/b/c/seq.txt
'

test_expect_success 'first contact by a relative path climbing in from a real cwd' '
	top=$(dirname "$MOUNT") && base=$(basename "$MOUNT") &&
	(cd "$top" && shim cat "$base/a/x.txt") >out &&
	cmp out src/a/x.txt
'

test_expect_success 'first contact by an *at call on a real directory, by opendir, by fopen' '
	shim python3 -c "
import os, sys
m, top, base = sys.argv[1], os.path.dirname(sys.argv[1]), os.path.basename(sys.argv[1])
d = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
fd = os.open(base + \"/a/x.txt\", os.O_RDONLY, dir_fd=d)
assert os.read(fd, 100) == b\"hello\\n\"
" "$MOUNT" &&
	shim ls "$MOUNT/a/b" >ls.out && (cd src/a/b && ls) >ls.want && cmp ls.out ls.want &&
	shim awk "END { print NR }" "$MOUNT/a/b/c/seq.txt" >awk.out && test "$(cat awk.out)" = 50000
'

test_expect_success '16 threads name the mount first, at once: every read right' '
	shim python3 -c "
import sys, threading
m = sys.argv[1]
want = open(\"src/a/b/c/r128k\", \"rb\").read()
bad = []
go = threading.Barrier(16)
def run():
    go.wait()
    for _ in range(20):
        if open(m + \"/a/b/c/r128k\", \"rb\").read() != want:
            bad.append(1)
ts = [threading.Thread(target=run) for _ in range(16)]
[t.start() for t in ts]
[t.join() for t in ts]
assert not bad
" "$MOUNT"
'

test_expect_success 'a fork child before first contact, and after it, both read the mount' '
	shim python3 -c "
import os, sys
m = sys.argv[1]
want = open(\"src/a/x.txt\", \"rb\").read()
pid = os.fork()
if pid == 0:
    os._exit(0 if open(m + \"/a/x.txt\", \"rb\").read() == want else 1)
_, st = os.waitpid(pid, 0)
assert st == 0
assert open(m + \"/a/x.txt\", \"rb\").read() == want
pid = os.fork()
if pid == 0:
    os._exit(0 if open(m + \"/a/b/p4097\", \"rb\").read() == open(\"src/a/b/p4097\", \"rb\").read() else 1)
_, st = os.waitpid(pid, 0)
assert st == 0
" "$MOUNT"
'

test_expect_success 'started in a staged directory, or with a staged stdin: the store is there from the start' '
	shim sh -c "cd $MOUNT/a/b && exec cat grep.txt" >cwd.out && cmp cwd.out src/a/b/grep.txt &&
	shim sh -c "exec sort <$MOUNT/a/b/c/seq.txt" >sort.out && sort src/a/b/c/seq.txt >sort.want &&
	cmp sort.out sort.want
'

test_done
