#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The program owns its descriptors (docs/design.md section 5, issue 11 items 1-3 and 5):
# vfork children that close descriptors before exec leave the parent's
# staged files alone; the shim's own descriptors (the reservation template,
# the service socket) survive closefrom loops and are never closed or
# written through once the program has the number; the reservation is inert
# (calls the shim does not emulate fail loudly, nothing real is reached); a
# function this libc lacks gives ENOSYS, never a call through NULL.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: 2 nodes, the service of node 0 (half the files are remote)' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 2 -R 1 -p 4 &&
	fake_service_start --log "$TRASH/svc.log" &&
	(cd src && find . -type f ! -name m000 | sed "s,^\./,," | sort) >files
'

# A system call that goes past libc's syscall() (which the shim wraps for
# the file-system numbers it emulates, t/2082): what a static binary,
# inline assembly or io_uring does.
test_expect_success 'setup: raw system calls without libc (x86_64)' 'make_raw_so raw.so'

test_expect_success 'vfork: subprocess.run between open and read (CPython closes fds in a vfork child)' '
	shim "$PY" -c "
import subprocess, sys
f = open(sys.argv[1] + \"/a/b/c/seq.txt\", \"rb\")
subprocess.run([\"true\"], check=True)
subprocess.run([\"true\"], close_fds=True, check=True)
sys.stdout.buffer.write(f.read())
" "$MOUNT" >out &&
	test_cmp src/a/b/c/seq.txt out
'

cat >mp.py <<'PY'
import multiprocessing as mp, os, sys
def work(p): return len(open(p, "rb").read())
if __name__ == "__main__":
    p = sys.argv[1] + "/a/b/c/r128k"
    f = open(p, "rb")
    for m in ("spawn", "forkserver"):
        with mp.get_context(m).Pool(1) as pool:
            assert pool.map(work, [p]) == [131072]
    pid = os.posix_spawn("/bin/true", ["true"], os.environ)
    os.waitpid(pid, 0)
    assert len(f.read()) == 131072
    print("ok")
PY

test_expect_success 'vfork: multiprocessing spawn and forkserver, posix_spawn' '
	shim timeout 60 "$PY" mp.py "$MOUNT" >out &&
	test "$(cat out)" = ok
'

# a program that closes everything, then opens its own file: it takes the
# number of the shim socket or template; the shim must not touch it
cat >closeall.py <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.CDLL(os.path.abspath("raw.so"), use_errno=True); raw.sc.restype = ctypes.c_long
mount, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
files = open("files").read().splitlines()
def read_all():    # local and remote files: the service socket is used
    return sum(len(open(mount + "/" + f, "rb").read()) for f in files)
total = read_all()
a = open(mount + "/a/b/c/seq.txt", "rb"); first = a.read(10)
def link(n):
    try: return os.readlink("/proc/self/fd/%d" % n)
    except OSError: return ""
socks = [int(n) for n in os.listdir("/proc/self/fd") if link(int(n)).startswith("socket:")]
assert socks, "no service socket"
if mode == "closefrom":
    libc.closefrom(3)
elif mode == "loop":
    for fd in range(3, 1024):
        try: os.close(fd)
        except OSError: pass
elif mode == "raw":
    raw.sc(436, 3, 0xffffffff, 0)   # SYS_close_range, past the shim
# the program's own file on the socket's old number (if the kernel gives it)
mine = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
while mine < socks[0]:
    mine = os.open(out, os.O_WRONLY)
assert read_all() == total           # opens, remote reads, maybe reconnects
os.write(mine, b"program bytes\n")
os.close(mine)
sys.stdout.write("%d\n" % len(files))
PY

for mode in closefrom loop raw; do
	test_expect_success "$mode of every descriptor, then the program's own file: only its bytes" "
		shim \"\$PY\" closeall.py \"\$MOUNT\" $mode mine.$mode >n &&
		test \"\$(cat n)\" = \"\$(wc -l <files)\" &&
		printf 'program bytes\n' >expect &&
		test_cmp expect mine.$mode
	"
done

cat >threadexit.py <<'PY'
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.CDLL(os.path.abspath("raw.so"), use_errno=True); raw.sc.restype = ctypes.c_long
mount, out = sys.argv[1], sys.argv[2]
files = open("files").read().splitlines()
socks = []
def reader():   # its own connection to the service, closed at thread exit
    for f in files: open(mount + "/" + f, "rb").read()
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + n).startswith("socket:"): socks.append(int(n))
        except OSError: pass
    raw.sc(436, 3, 0xffffffff, 0)              # raw close_range: all gone
    mine = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    while mine < max(socks): mine = os.open(out, os.O_WRONLY)
    socks.append(mine)
t = threading.Thread(target=reader); t.start(); t.join()   # thread exit: conn dropped
os.write(socks[-1], b"program bytes\n")
PY

test_expect_success 'thread exit after a raw close_range: the program file on the socket number stays open' '
	shim "$PY" threadexit.py "$MOUNT" mine.thread &&
	printf "program bytes\n" >expect && test_cmp expect mine.thread
'

test_expect_success 'close of a shim-private number is EBADF for the program; dup2 onto it works' '
	shim "$PY" -c "
import os, sys, errno
f = os.open(sys.argv[1] + \"/a/x.txt\", os.O_RDONLY)
def link(n):
    try: return os.readlink(\"/proc/self/fd/\" + n)
    except OSError: return \"\"
priv = [int(n) for n in os.listdir(\"/proc/self/fd\") if link(n).endswith(\"/reserved\")]
assert priv, os.listdir(\"/proc/self/fd\")
for p in priv:
    try: os.close(p); raise SystemExit(\"closed %d\" % p)
    except OSError as e: assert e.errno == errno.EBADF
r, w = os.pipe()
os.dup2(w, priv[0])
os.write(priv[0], b\"x\"); assert os.read(r, 1) == b\"x\"
g = os.open(sys.argv[1] + \"/a/b/p4096\", os.O_RDONLY)
assert len(os.read(g, 8192)) == 4096 and os.read(f, 100) == b\"hello\\n\"
print(\"ok\")
" "$MOUNT" >out && test "$(cat out)" = ok
'

test_expect_success 'the reservation is inert: mkfifoat, raw openat, /proc/self/fd/N; readlink names the staged path' '
	shim "$PY" -c "
import ctypes, os, sys, errno
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.CDLL(\"$TRASH/raw.so\", use_errno=True); raw.sc.restype = ctypes.c_long
d = os.open(sys.argv[1] + \"/a\", os.O_RDONLY | os.O_DIRECTORY)
f = os.open(sys.argv[1] + \"/a/x.txt\", os.O_RDONLY)
assert libc.mkfifoat(d, b\"dstage-fifo-test-$$\", 0o600) == -1 and ctypes.get_errno() in (errno.ENOTDIR, errno.EROFS), ctypes.get_errno()
assert not os.path.exists(\"/dstage-fifo-test-$$\")
fd = raw.sc(257, d, b\"etc/hostname\", 0)   # SYS_openat, past the shim
assert fd == -1 and ctypes.get_errno() == errno.ENOTDIR, (fd, ctypes.get_errno())
assert raw.sc(0, f, ctypes.create_string_buffer(10), 10) == -1 and ctypes.get_errno() == errno.EBADF
assert raw.sc(77, f, 0) == -1            # SYS_ftruncate
for fd in (d, f):
    try: os.open(\"/proc/self/fd/%d\" % fd, os.O_RDONLY); raise SystemExit(\"reopened\")
    except OSError as e: assert e.errno in (errno.ELOOP, errno.ENXIO), e
try: os.listdir(\"/proc/self/fd/%d\" % d); raise SystemExit(\"listed\")
except OSError as e: pass
for p in (\"/proc/self/fd/%d\", \"/dev/fd/%d\", \"/proc/\" + str(os.getpid()) + \"/fd/%d\"):
    print(os.readlink(p % f))
import stat
assert stat.S_ISLNK(os.stat(\"/proc/self/fd/%d\" % d).st_mode)   # the reservation, not /
" "$MOUNT" >out && printf "%s\n" "$MOUNT/a/x.txt" "$MOUNT/a/x.txt" "$MOUNT/a/x.txt" >expect &&
	test_cmp expect out
'

test_expect_success 'closefrom between opens never makes a program file the template' '
	printf "keep me\n" >victim &&
	shim "$PY" -c "
import ctypes, os, sys, errno
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.CDLL(\"$TRASH/raw.so\", use_errno=True); raw.sc.restype = ctypes.c_long
import fcntl
a = os.open(sys.argv[1] + \"/a/x.txt\", os.O_RDONLY)
t = max(int(n) for n in os.listdir(\"/proc/self/fd\"))   # the template sits high
raw.sc(436, t, t, 0)                        # raw close_range: template gone
v = os.open(\"victim\", os.O_RDWR)
assert fcntl.fcntl(v, fcntl.F_DUPFD, t) == t      # the program takes its number
b = os.open(sys.argv[1] + \"/a/b/p4096\", os.O_RDONLY)
assert raw.sc(77, b, 0) == -1               # ftruncate on the staged fd
assert len(os.read(b, 10000)) == 4096
print(\"ok\")
" "$MOUNT" >out && test "$(cat out)" = ok &&
	printf "keep me\n" >expect && test_cmp expect victim
'

test_expect_success 'raw close_range leaves a stale entry: the next real file reads its own bytes' '
	printf "real bytes\n" >real &&
	shim "$PY" -c "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.CDLL(\"$TRASH/raw.so\", use_errno=True); raw.sc.restype = ctypes.c_long
a = os.open(sys.argv[1] + \"/a/b/c/seq.txt\", os.O_RDONLY)
raw.sc(436, a, a, 0)
b = os.open(\"real\", os.O_RDONLY)
r, w = os.pipe()
assert b == a or r == a or w == a, (a, b, r, w)
fd = a
os.write(w, b\"pipe bytes\\n\") if fd in (r, w) else None
sys.stdout.buffer.write(os.read(fd, 100) if fd != w else b\"real bytes\\n\")
" "$MOUNT" >out && test_cmp real out
'

test_expect_success 'raw close_range, then pipe() takes the number: the pipe bytes' '
	shim "$PY" -c "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
raw = ctypes.CDLL(\"$TRASH/raw.so\", use_errno=True); raw.sc.restype = ctypes.c_long
a = os.open(sys.argv[1] + \"/a/b/c/seq.txt\", os.O_RDONLY)
raw.sc(436, a, a, 0)
r, w = os.pipe()
assert r == a, (a, r)
os.write(w, b\"pipe bytes\\n\")
sys.stdout.buffer.write(os.read(r, 100))
" "$MOUNT" >out && echo "pipe bytes" >expect && test_cmp expect out
'

test_expect_success 'remote reads went through the service' '
	grep -q "^read " svc.log
'

test_expect_success 'a function this libc lacks: ENOSYS, not a call through NULL' '
	cat >nullcall.c <<-\EOC &&
	#define _GNU_SOURCE
	#include <errno.h>
	#include <fcntl.h>
	#include <stdio.h>
	#include <sys/stat.h>
	#include <unistd.h>
	int main(void)
	{
		struct statx sx;
		int a = statx(AT_FDCWD, "/", 0, STATX_BASIC_STATS, &sx), ea = errno;
		off64_t o = 0;
		ssize_t b = copy_file_range(0, &o, 1, NULL, 1, 0);
		int eb = errno;
		int c = renameat2(AT_FDCWD, "/x-none", AT_FDCWD, "/y-none", 0), ec = errno;
		printf("%d %d %zd %d %d %d\n", a, ea, b, eb, c, ec);
		return 0;
	}
	EOC
	cc -o nullcall nullcall.c &&
	DSTAGE_TEST_NOREAL=statx,copy_file_range,renameat2 shim ./nullcall </dev/null >out &&
	e=$("$PY" -c "import errno; print(errno.ENOSYS)") &&
	test "$(cat out)" = "-1 $e -1 $e -1 $e"
'

test_done
