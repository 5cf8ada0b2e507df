#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Large reads of local files take pread from a kept descriptor of the node
# store (io/sread.c, issue 13), and that descriptor is the shim's own: the
# program cannot close it or lose a dup2 onto it, a raw close_range that
# hands its number to a file of the program never makes the shim read that
# file (nor touch it), fork children use it, exec does not pass it on, and a
# bad buffer gives EFAULT as the kernel's read does.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: large and small files, one node' '
	mkdir -p src/big src/small &&
	for s in 65535 65536 65537 131072 200000 524288 1500000 2097152; do
		head -c $s /dev/urandom >src/big/f$s || return 1
	done &&
	for i in 1 2 3 4 5 6 7 8; do head -c 4096 /dev/urandom >src/small/s$i || return 1; done &&
	touch_root src &&
	stage_tree src -N 1 -p 4 &&
	(cd src && find . -type f | sed "s,^\./,," | sort) >files
'

test_expect_success 'setup: raw system calls without libc (x86_64)' 'make_raw_so raw.so'

# common code of the Python checks: the store descriptor(s) of this process,
# and every staged file compared with its source through read, pread, readv
cat >lib.py <<'PY'
import ctypes, os, sys
mount, src, jobdir = sys.argv[1], sys.argv[2], sys.argv[3]
files = open("files").read().splitlines()
store = os.path.realpath(jobdir + "/0/store")
def store_fds():
    out = []
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + n) == store: out.append(int(n))
        except OSError: pass
    return out
def same_all():
    for f in files:
        want = open(src + "/" + f, "rb").read()
        fd = os.open(mount + "/" + f, os.O_RDONLY)
        got = b""
        while True:
            b = os.read(fd, 1 << 20)
            if not b: break
            got += b
        assert got == want, ("read", f)
        n = len(want)
        for off, k in ((0, n), (1, n), (12345, 100000), (n - 7, 4096), (n // 2, 1 << 20)):
            assert os.pread(fd, k, off) == want[off:off + k], ("pread", f, off, k)
        os.lseek(fd, 3, 0)
        a, b2 = bytearray(70000), bytearray(300000)
        k = os.readv(fd, [a, b2])
        assert bytes(a + b2)[:k] == want[3:3 + 370000], ("readv", f)
        os.close(fd)
PY

test_expect_success 'a large read opens the store once, a small one does not' '
	shim "$PY" -c "
exec(open(\"lib.py\").read())
assert os.read(os.open(mount + \"/small/s1\", os.O_RDONLY), 9999) == open(src + \"/small/s1\", \"rb\").read()
assert store_fds() == [], store_fds()
same_all()
fds = store_fds()
assert len(fds) == 1, fds
assert fds[0] > 1000, fds        # parked high, out of the way
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok
'

test_expect_success 'the same bytes with pread off (DSTAGE_PREAD_MIN=0) and always on (=4096)' '
	for m in 0 4096; do
		DSTAGE_PREAD_MIN=$m shim "$PY" -c "
exec(open(\"lib.py\").read())
same_all()
print(len(store_fds()))
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out.$m || return 1
	done &&
	test "$(cat out.0)" = 0 && test "$(cat out.4096)" = 1
'

test_expect_success 'the program cannot close it (EBADF), closefrom and close_range keep it' '
	shim "$PY" -c "
import errno
exec(open(\"lib.py\").read())
same_all()
s = store_fds()[0]
try:
    os.close(s); raise SystemExit(\"closed\")
except OSError as e:
    assert e.errno == errno.EBADF, e
libc = ctypes.CDLL(None, use_errno=True)
libc.closefrom(3)
assert store_fds() == [s], store_fds()
os.closerange(3, 20000)
assert store_fds() == [s], store_fds()
same_all()
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok
'

test_expect_success 'dup2 onto its number: the program gets its file there, large reads stay right' '
	printf "program bytes\n" >mine &&
	shim "$PY" -c "
exec(open(\"lib.py\").read())
same_all()
s = store_fds()[0]
m = os.open(\"mine\", os.O_RDWR)
assert os.dup2(m, s) == s
assert os.pread(s, 100, 0) == b\"program bytes\\n\"
same_all()                             # opens the store again elsewhere
assert s not in store_fds() and len(store_fds()) == 1, store_fds()
assert os.pread(s, 100, 0) == b\"program bytes\\n\"
os.close(s)                            # the program closes its own copy
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok &&
	printf "program bytes\n" >expect && test_cmp expect mine
'

test_expect_success 'raw close_range, then the program file takes the number: never read as the store' '
	head -c 3000000 /dev/zero >victim &&
	shim "$PY" -c "
exec(open(\"lib.py\").read())
raw = ctypes.CDLL(os.path.abspath(\"raw.so\"), use_errno=True); raw.sc.restype = ctypes.c_long
same_all()
s = store_fds()[0]
assert raw.sc(436, s, s, 0) == 0        # SYS_close_range, past the shim
v = os.open(\"victim\", os.O_RDWR)
assert raw.sc(33, v, s, 0) == s         # SYS_dup2, past the shim: its number now
same_all()                              # bytes of the store, not zeros
assert os.fstat(s).st_size == 3000000 and os.lseek(s, 0, 1) == 0
os.close(s)
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok &&
	cmp victim /dev/zero 2>&1 | grep -q EOF
'

test_expect_success 'fork children read through it; exec does not pass it on' '
	shim "$PY" -c "
import subprocess
exec(open(\"lib.py\").read())
same_all()
pid = os.fork()
if pid == 0:
    same_all()
    os._exit(0 if len(store_fds()) == 1 else 3)
_, st = os.waitpid(pid, 0)
assert st == 0, st
# a program without the shim: no descriptor of the store
out = subprocess.run([\"sh\", \"-c\", \"ls -l /proc/self/fd/\"], env={\"PATH\": os.environ[\"PATH\"]},
                     capture_output=True, text=True).stdout
assert store not in out, out
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok
'

test_expect_success 'a large read into a bad buffer: EFAULT, like the kernel' '
	shim "$PY" -c "
import errno
exec(open(\"lib.py\").read())
libc = ctypes.CDLL(None, use_errno=True)
libc.read.restype = ctypes.c_ssize_t
fd = os.open(mount + \"/big/f524288\", os.O_RDONLY)
r = libc.read(fd, ctypes.c_void_p(4096), ctypes.c_size_t(524288))
assert r == -1 and ctypes.get_errno() == errno.EFAULT, (r, ctypes.get_errno())
assert os.read(fd, 10) == open(src + \"/big/f524288\", \"rb\").read(10)   # offset unmoved
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok
'

test_expect_success '16 threads at the first large read: one descriptor, every byte right' '
	shim "$PY" -c "
import threading
exec(open(\"lib.py\").read())
errs = []
def run():
    try: same_all()
    except Exception as e: errs.append(e)
ts = [threading.Thread(target=run) for _ in range(16)]
for t in ts: t.start()
for t in ts: t.join()
assert not errs, errs
assert len(store_fds()) == 1, store_fds()
print(\"ok\")
" "$MOUNT" "$TRASH/src" "$JOBDIR" >out && test "$(cat out)" = ok
'

test_done
