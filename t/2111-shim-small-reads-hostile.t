#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Small files read in a shuffled order take pread of the store through the
# shim's private descriptor (io/sread.c): hostile but ordinary programs
# around it, each as the first calls of a fresh process: closefrom loops and
# dup2 over every number between reads, subprocess.run with staged files
# open and a staged stdin at an offset, multiprocessing spawn, posix_spawn
# with a staged stdin, *at calls on a staged directory descriptor,
# `prog < staged-file`.  Every byte is compared with the source; nothing is
# written outside the mount.  1 simulated node.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'
test_require PYTHON
test_expect_success 'staged' 'make_samples src 400 2000 && pack_stage src 1 && (cd src && find . -type f | sed "s|^\./||" | sort -r) >paths && test $(wc -l <paths) -gt 100'
cat >h.py <<'PY'
import os, sys, subprocess, multiprocessing as mp, hashlib
def rd(p): return open(p, "rb").read()
if __name__ == "__main__":
    M, S = sys.argv[1], sys.argv[2]
    paths = open("paths").read().split()
    import random
    random.Random(1).shuffle(paths)
    def want(p): return open(os.path.join(S, p), "rb").read()
    def check(tag, p, got):
        if got != want(p): print("WRONG", tag, p, len(got)); sys.exit(1)
    case = sys.argv[3]
    if case == "reverse":
        for p in paths: check(case, p, open(os.path.join(M, p), "rb").read())
    elif case == "closefrom":
        for i, p in enumerate(paths):
            check(case, p, open(os.path.join(M, p), "rb").read())
            if i % 7 == 1: os.closerange(3, 4096)
    elif case == "dup2":
        keep = os.open("/dev/null", os.O_RDONLY)
        for i, p in enumerate(paths):
            check(case, p, open(os.path.join(M, p), "rb").read())
            if i == 3:
                for n in range(3, 1024):
                    if n != keep:
                        try: os.dup2(keep, n)
                        except OSError: pass
                for n in range(3, 1024):
                    if n != keep:
                        try: os.close(n)
                        except OSError: pass
    elif case == "subprocess":
        fs = [open(os.path.join(M, p), "rb") for p in paths[:5]]
        for f in fs: f.read(10)
        r = subprocess.run(["cat"] + [os.path.join(M, p) for p in paths[5:40]], stdout=subprocess.PIPE, check=True)
        if r.stdout != b"".join(want(p) for p in paths[5:40]): print("WRONG subprocess"); sys.exit(1)
        big = [i for i, p in enumerate(paths[:5]) if len(want(p)) > 8192]
        k = big[0] if big else 0
        off = os.lseek(fs[k].fileno(), 0, os.SEEK_CUR)
        # close_fds=False: the kernel's shared offset, the parent sees the
        # child's reads (close_fds=True: the child's bytes are right, but
        # the parent's offset does not follow: a known defect, docs/shim.md)
        r = subprocess.run(["cat"], stdin=fs[k], stdout=subprocess.PIPE, check=True, close_fds=False)
        if r.stdout != want(paths[k])[off:] or (big and not r.stdout): print("WRONG stdin", len(r.stdout), off); sys.exit(1)
        if os.lseek(fs[k].fileno(), 0, os.SEEK_CUR) != len(want(paths[k])): print("WRONG shared offset"); sys.exit(1)
        os.lseek(fs[k].fileno(), off, os.SEEK_SET)
        r = subprocess.run(["cat"], stdin=fs[k], stdout=subprocess.PIPE, check=True)
        if r.stdout != want(paths[k])[off:]: print("WRONG stdin, close_fds", len(r.stdout), off); sys.exit(1)
        g = os.open(os.path.join(M, paths[1]), os.O_RDONLY)
        os.read(g, 10)
        r = subprocess.run(["cat"], stdin=g, stdout=subprocess.PIPE, check=True)
        if r.stdout != want(paths[1])[10:]: print("WRONG stdin at 10", len(r.stdout)); sys.exit(1)
    elif case == "spawn":
        ctx = mp.get_context("spawn")
        with ctx.Pool(2) as pool:
            got = pool.map(rd, [os.path.join(M, p) for p in paths[::3]])
        for p, g in zip(paths[::3], got): check(case, p, g)
    elif case == "posix_spawn":
        fd = os.open(os.path.join(M, paths[7]), os.O_RDONLY)
        r, w = os.pipe()
        pid = os.posix_spawn("/bin/cat", ["cat"], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0), (os.POSIX_SPAWN_DUP2, w, 1)])
        os.close(w); out = b""
        while True:
            b = os.read(r, 65536)
            if not b: break
            out += b
        os.waitpid(pid, 0)
        check(case, paths[7], out)
    elif case == "at":
        d = os.open(os.path.join(M, os.path.dirname(paths[0])), os.O_RDONLY | os.O_DIRECTORY)
        for p in paths:
            if os.path.dirname(p) != os.path.dirname(paths[0]): continue
            fd = os.open(os.path.basename(p), os.O_RDONLY, dir_fd=d)
            b = b""
            while True:
                x = os.read(fd, 1000)
                if not x: break
                b += x
            os.close(fd); check(case, p, b)
        import ctypes, ctypes.util
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        fd = libc.syscall(257, d, os.path.basename(paths[0]).encode(), os.O_RDONLY, 0)
        print("raw SYS_openat on a staged dirfd:", fd, os.strerror(ctypes.get_errno()) if fd < 0 else "opened")
    print("ok", case)
PY
for c in reverse closefrom dup2 subprocess spawn posix_spawn at; do
	test_expect_success "$c, first call of a fresh process" "shim_on 0 \$PY h.py \$MOUNT \$TRASH/src $c"
done
test_expect_success 'prog < staged file, each a fresh process' '
	for p in $(head -n 20 paths); do shim_on 0 sh -c "cat <$MOUNT/$p" | cmp - "src/$p" || exit 1; done &&
	for p in $(head -n 20 paths); do shim_on 0 sh -c "wc -c <$MOUNT/$p" >n && test "$(cat n)" = "$(wc -c <src/$p)" || exit 1; done
'
test_expect_success STRACE 'small files read out of store order took pread of the store (the rule is exercised)' '
	shim_on 0 strace -f -qq -e trace=pread64 -o st.log $PY h.py $MOUNT $TRASH/src closefrom &&
	# preads under 4 KiB on the private descriptor of the shim (parked high): before
	# the rule, only reads of 4 KiB and more took pread
	perl -ne "print if /pread64\\((\\d+), .*, (\\d+), \\d+\\) = \\d+/ && \$1 >= 100 && \$2 < 4096" st.log >small &&
	wc -l <small >n && cat n && test "$(cat n)" -gt 5
'
test_expect_success 'nothing written outside the mount (the source tree untouched)' '
	(cd src && find . -newer ../paths -type f) >new && test_cmp /dev/null new
'
test_done
