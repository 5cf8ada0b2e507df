#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Staged descriptors across posix_spawn (issue 25 item 2): CPython's
# subprocess spawns with posix_spawn when close_fds=False and the program is
# a path; glibc does the dup2 and the exec in its child, past the exec
# wrappers, and a staged stdin used to read as an empty input (perl -ne,
# python3 -, bash read: exit 0 with nothing; diff - aborted).  Each case
# runs on the staged tree and on the native copy: the same output.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_lazy_prereq TOOLS 'command -v perl && command -v bash && command -v diff' \
	'perl, bash or diff missing'
test_require TOOLS

test_expect_success 'setup: a list, a script, staged' '
	mkdir -p src/d &&
	seq 1 3000 | sed "s/^/line /" >src/d/list &&
	printf "import sys\nprint(\"script\", sum(range(1000)))\n" >src/d/x.py &&
	touch_root src &&
	stage_tree "$TRASH/src"
'

cat >spawn.py <<'EOF2'
import os, subprocess, sys
root, native = sys.argv[1], sys.argv[2]
assert subprocess._USE_POSIX_SPAWN, "this python does not spawn with posix_spawn"
perl, py, bash, diff, cat = ("/usr/bin/perl", "/usr/bin/python3", "/bin/bash",
                             "/usr/bin/diff", "/bin/cat")
def run(what, args, path, **kw):
    with open(os.path.join(root, path), "rb") as f:
        r = subprocess.run(args, stdin=f, close_fds=False, capture_output=True, **kw)
    print(what, r.returncode, r.stdout[-60:], r.stderr[-200:])
run("perl -ne", [perl, "-ne", "END { print $. }"], "d/list")
run("python3 -", [py, "-"], "d/x.py")
run("bash read", [bash, "-c", "read a b; echo \"$b\"; read a b; echo \"$b\""], "d/list")
run("diff -", [diff, "-", os.path.join(native, "d/list")], "d/list")
run("cat", [cat], "d/list")
# the offset: the parent read 100 bytes first
with open(os.path.join(root, "d/list"), "rb", buffering=0) as f:
    head = f.read(100)
    r = subprocess.run([cat], stdin=f, close_fds=False, capture_output=True)
    print("offset", len(head), len(r.stdout), r.stdout[:20], "parent after", f.read(10))

# os.posix_spawn with file actions, and attributes glibc must still apply
def spawn(what, args, actions, **kw):
    rfd, wfd = os.pipe()
    acts = actions + [(os.POSIX_SPAWN_DUP2, wfd, 1), (os.POSIX_SPAWN_CLOSE, rfd)]
    pid = os.posix_spawn(args[0], args, os.environ, file_actions=acts, **kw)
    os.close(wfd)
    out = b""
    while True:
        b = os.read(rfd, 65536)
        if not b:
            break
        out += b
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    print(what, os.waitstatus_to_exitcode(st), out[-80:])
fd = os.open(os.path.join(root, "d/list"), os.O_RDONLY)  # close-on-exec (PEP 446)
spawn("dup2 to 0 from a cloexec fd", [cat], [(os.POSIX_SPAWN_DUP2, fd, 0)])
os.lseek(fd, 0, 0)
spawn("dup2 to 7", [perl, "-e", "open(F, \"<&=7\") or die; my $n = 0; $n++ while <F>; print $n"],
      [(os.POSIX_SPAWN_DUP2, fd, 7)])
os.lseek(fd, 0, 0)
spawn("addopen on 0", [perl, "-ne", "END { print $. }"],
      [(os.POSIX_SPAWN_OPEN, 0, os.path.join(root, "d/list"), os.O_RDONLY, 0)])
spawn("addopen twice, fresh offsets", [bash, "-c", "head -c 30; cat <&11 | wc -c"],
      [(os.POSIX_SPAWN_OPEN, 0, os.path.join(root, "d/list"), os.O_RDONLY, 0),
       (os.POSIX_SPAWN_OPEN, 11, os.path.join(root, "d/list"), os.O_RDONLY, 0)])
spawn("a swap, then close", [perl, "-e", "open(F, \"<&=0\") or die; print scalar <F>"],
      [(os.POSIX_SPAWN_DUP2, fd, 9), (os.POSIX_SPAWN_DUP2, 9, 0), (os.POSIX_SPAWN_CLOSE, 9)])
os.lseek(fd, 0, 0)
spawn("setpgroup, setsigmask kept", [bash, "-c",
      "test $(ps -o pgid= $$) = $$ && grep SigBlk /proc/self/status; head -n1"],
      [(os.POSIX_SPAWN_DUP2, fd, 0)], setpgroup=0, setsigmask=[10])
# system(): sh -c with an inherited staged descriptor, its status
fd2 = os.open(os.path.join(root, "d/list"), os.O_RDONLY)
os.set_inheritable(fd2, True)
sys.stdout.flush()
st = os.system("wc -l <&%d; head -n 1 <&%d; exit 3" % (fd2, fd2))
print("system status", os.waitstatus_to_exitcode(st))
# popen(): "r" from a command reading the staged descriptor, "w" into one
import ctypes
libc = ctypes.CDLL(None)
libc.popen.restype = ctypes.c_void_p
libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.pclose.argtypes = [ctypes.c_void_p]
libc.fread.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
os.lseek(fd2, 0, 0)
p = libc.popen(b"tail -n 2 <&%d; exit 4" % fd2, b"r")
buf = ctypes.create_string_buffer(65536)
n = libc.fread(buf, 1, 65536, p)
print("popen r", buf.raw[:n], os.waitstatus_to_exitcode(libc.pclose(p)))
os.lseek(fd2, 0, 0)
sys.stdout.flush()
p = libc.popen(b"cat - <&0; head -c 20 <&%d; echo" % fd2, b"we")
libc.fwrite(b"written\n", 1, 8, p)
print("popen w", os.waitstatus_to_exitcode(libc.pclose(p)), flush=True)
os.close(fd2)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
os.lseek(fd, 0, 0)
pid = os.posix_spawn(cat, [cat], env, file_actions=[
    (os.POSIX_SPAWN_DUP2, fd, 0), (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
_, st = os.waitpid(pid, 0)
print("no shim in the child: cat status", os.waitstatus_to_exitcode(st) != 0 or root == native)
EOF2

test_expect_success 'subprocess (posix_spawn) with a staged stdin: perl -ne, python3 -, bash read, diff -, cat; os.posix_spawn file actions and attributes; system()' '
	"$PY" spawn.py "$TRASH/src" "$TRASH/src" >native.out 2>native.err &&
	shim "$PY" spawn.py "$MOUNT" "$TRASH/src" >staged.out 2>staged.err &&
	test_cmp native.out staged.out &&
	test_grep "^perl -ne 0 b.3000" staged.out &&
	test_grep "^bash read 0 b.1.n2.n" staged.out &&
	test_grep "^diff - 0 b.. b.." staged.out &&
	test_grep "^dup2 to 7 0 b.3000" staged.out &&
	test_grep "^system status 3" staged.out && test_grep "^3000$" staged.out &&
	test_grep "^popen r b.line 2999.nline 3000.n. 4" staged.out &&
	test_grep "^written$" staged.out && test_grep "^popen w 0$" staged.out &&
	test_grep "^addopen twice, fresh offsets 0 b.line 1.nline 2.nline 3.nline 4.nli28893" staged.out &&
	test ! -s staged.err
'

# in DIR (relative to src or the mount) by a spawn file action: the child
# (a shell with the shim) lists it and reads a file by a relative name
same_spawn_cwd() {
	how=$1 dir=$2
	shift 2
	(cd "$TRASH" && "$T/shim-spawn" $how "src/$dir" "$@") >native.out 2>&1
	echo $? >>native.out
	(cd "$TRASH" && shim "$T/shim-spawn" $how "$MOUNT/$dir" "$@") >staged.out 2>&1
	echo $? >>staged.out
	test_cmp native.out staged.out
}

test_expect_success 'posix_spawn_file_actions_addchdir_np, addfchdir_np into a staged directory; posix_spawnp' '
	same_spawn_cwd -c d /bin/sh -c "ls; wc -l <list; cat x.py; basename \$(pwd)" &&
	test_grep "^3000$" staged.out &&
	same_spawn_cwd -f d /bin/sh -c "ls -a; wc -c list" &&
	same_spawn_cwd "-p -c" d sh -c "sort -r list | head -n 2" &&
	same_spawn_cwd -c d/missing /bin/true &&
	test_grep "No such file or directory" staged.out
'

# same_spawn 'ARGS': shim-spawn ARGS (eval'd with $R the root: src, or the
# mount) natively and under the shim: the same output and status
same_spawn() {
	(R="$TRASH/src" && cd "$TRASH" && eval "\"\$T/shim-spawn\" $1") >native.out 2>&1
	echo $? >>native.out
	(R="$MOUNT" && cd "$TRASH" && eval "shim \"\$T/shim-spawn\" $1") >staged.out 2>&1
	echo $? >>staged.out
	test_cmp native.out staged.out
}

test_expect_success 'posix_spawn file actions: addopen, adddup2 (onto itself too), addclose, addclosefrom_np, relative addopen after addchdir_np' '
	same_spawn "-o 0:\$R/d/list -o 8:\$R/d/x.py -C 3 /bin/sh -c \"wc -l; cat <&8\"" &&
	test_grep "^3000$" staged.out &&
	same_spawn "-O 7:\$R/d/list -d 7:7 /bin/sh -c \"head -n 2 <&7\"" &&
	test_grep "^line 2$" staged.out &&
	same_spawn "-O 7:\$R/d/list -d 7:9 -x 7 /bin/sh -c \"tail -n 1 <&9; test -e /dev/fd/7 || echo 7 closed\"" &&
	test_grep "^line 3000$" staged.out && test_grep "^7 closed$" staged.out &&
	same_spawn "-c \$R -c d -o 0:list -o 5:../d/x.py /bin/sh -c \"wc -l; wc -c <&5\"" &&
	test_grep "^3000$" staged.out &&
	same_spawn "-f \$R/d -o 0:./list /bin/sh -c \"wc -l\"" &&
	test_grep "^3000$" staged.out
'

test_done
