#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Staged descriptors across exec (issue 18 item 1): a program started with a
# staged file as stdin (or any inherited staged descriptor) reads the file's
# bytes, as natively; on a 2-node staging the remote copies too (the node
# service here is t/helpers/fake-service.c).  Where the next image has no
# shim, it reads EBADF: loud, never an empty stdin.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_lazy_prereq TOOLS 'command -v perl && command -v awk && command -v tar && command -v gzip' \
	'perl, awk, tar or gzip missing'
test_require TOOLS

test_expect_success 'setup: 2 nodes, the same inputs in 4 partitions' '
	for d in d1 d2 d3 d4 d5 d6; do
		mkdir -p src/$d/t &&
		seq 1 3000 | sed "s/^/$d line /" >src/$d/list &&
		printf "import sys\nprint(\"%s\", sum(range(1000)), sys.stdin is not None)\n" $d >src/$d/x.py &&
		printf "%s\n" "$d tar payload" >src/$d/t/member &&
		seq 1 500 >src/$d/t/numbers &&
		tar czf src/$d/a.tar.gz -C src/$d t || return 1
	done &&
	printf "{ n += NF } END { print NR, n }\n" >prog.awk &&
	touch_root src &&
	stage_tree "$TRASH/src" -N 2 -R 1 -p 6 &&
	fake_service_start --log "$TRASH/svc.log"
'

# run shell command CMD with stdin from the staged copy (the redirection
# done by a shell under the shim) and from the native copy: same stdout,
# stderr and status
same_stdin() {
	(cd src && sh -c "$2 <\"$1\"") >native.out 2>native.err; echo $? >native.rc
	(cd src && shim sh -c "$2 <\"$MOUNT/$1\"") >staged.out 2>staged.err; echo $? >staged.rc
	test_cmp native.out staged.out && test_cmp native.err staged.err &&
	test_cmp native.rc staged.rc && test -s native.out
}

for d in d1 d2 d3 d4 d5 d6; do
	test_expect_success "$d: sort, cksum, perl, awk -f, python3 - read a staged stdin" "
		same_stdin $d/list sort &&
		same_stdin $d/list cksum &&
		same_stdin $d/list 'perl -ne \"END{print \\\$.}\"' &&
		same_stdin $d/list 'awk -f ../prog.awk' &&
		same_stdin $d/x.py '\"\$PY\" -'
	"
	test_expect_success "$d: tar xzf (gzip gets the archive from tar)" "
		rm -rf out.native out.staged && mkdir out.native out.staged &&
		tar xzf src/$d/a.tar.gz -C out.native &&
		shim tar xzf \"\$MOUNT/$d/a.tar.gz\" -C out.staged &&
		(cd out.staged && shim sh -c \"gzip -dc <\\\"\$MOUNT/$d/a.tar.gz\\\" | tar xf -\") &&
		diff -r out.native out.staged
	"
done

test_expect_success 'the remote copies went through the service' '
	grep -q "^read " svc.log
'

test_expect_success 'the offset is passed: a child continues where the parent stopped' '
	shim "$PY" -c "
import os, subprocess, sys
fd = os.open(sys.argv[1] + \"/d1/list\", os.O_RDONLY)
first = os.read(fd, 100)
r = subprocess.run([\"cat\"], stdin=fd, capture_output=True, check=True)
whole = open(\"src/d1/list\", \"rb\").read()
assert first + r.stdout == whole, (len(first), len(r.stdout))
print(\"ok\")
" "$MOUNT" >out && test "$(cat out)" = ok
'

for d in d1 d2; do
	test_expect_success "$d: the offset is shared like the kernel's: { head -n1; cat; }, read; read; cat" "
		same_stdin $d/list '{ head -n1 >/dev/null; cat; }' &&
		same_stdin $d/list '{ head -c 100 >/dev/null; head -n 2; cat; }' &&
		(cd src && bash -c '{ read a; read b; cat; } <$d/list') >native.out &&
		shim bash -c '{ read a; read b; cat; } <\"\$0\"' \"\$MOUNT/$d/list\" >staged.out &&
		test_cmp native.out staged.out
	"
done

test_expect_success 'after fork, parent and child share the offset' '
	shim "$PY" -c "
import os, sys
fd = os.open(sys.argv[1] + \"/d1/list\", os.O_RDONLY)
os.read(fd, 7)
pid = os.fork()
if pid == 0:
    os.read(fd, 10); os._exit(0)
os.waitpid(pid, 0)
g = os.dup(fd)
assert os.lseek(g, 0, 1) == 17, os.lseek(g, 0, 1)
print(\"ok\")
" "$MOUNT" >out && test "$(cat out)" = ok
'

test_expect_success 'without a shim in the next image: EBADF, never an empty stdin' '
	! shim sh -c "env -u LD_PRELOAD \"$PY\" -c \"import sys; sys.stdin.buffer.read()\" <\"$MOUNT/d1/list\"" 2>err &&
	grep -q "Bad file descriptor" err
'

test_expect_success 'posix_spawn, system and popen (glibc spawns past the exec wrappers) read the file (t/2105)' '
	shim "$PY" -c "
import ctypes, os, sys
fd = os.open(sys.argv[1] + \"/d1/list\", os.O_RDONLY)
os.set_inheritable(fd, True)
r, w = os.pipe()
pid = os.posix_spawn(\"/bin/cat\", [\"cat\"], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0), (os.POSIX_SPAWN_DUP2, w, 1)])
os.close(w)
with os.fdopen(r, \"rb\") as f:
    sys.stdout.buffer.write(f.read())
assert os.waitpid(pid, 0)[1] == 0
os.lseek(fd, 0, 0)
sys.stdout.flush()
assert os.system(\"cat <&%d\" % fd) == 0
os.lseek(fd, 0, 0)
libc = ctypes.CDLL(None)
libc.popen.restype = ctypes.c_void_p
libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.pclose.argtypes = [ctypes.c_void_p]
libc.fread.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
p = libc.popen(b\"cat <&%d\" % fd, b\"r\")
buf = ctypes.create_string_buffer(1 << 20)
n = libc.fread(buf, 1, 1 << 20, p)
sys.stdout.buffer.write(buf.raw[:n])
assert libc.pclose(p) == 0
" "$MOUNT" >out 2>err && cat src/d1/list src/d1/list src/d1/list >expect && test_cmp expect out &&
	test ! -s err
'

test_expect_success 'a stale DSTAGE_FDS naming a program file is ignored' '
	echo "program data" >mine &&
	shim env DSTAGE_FDS=1:0:1:0:32768 cat <mine >out &&
	test_cmp mine out &&
	shim sh -c "exec 4<\"$MOUNT/d1/list\"; exec env DSTAGE_FDS=1\;4:1:0:32768 cat <&4" >out &&
	test_cmp src/d1/list out &&
	ino=$(stat -c %i mine) &&
	shim sh -c "exec env DSTAGE_FDS=\"\$\$;0;0;0:1:0:0:0:$ino\" cat" <mine >out &&
	test_cmp mine out
'

test_done
