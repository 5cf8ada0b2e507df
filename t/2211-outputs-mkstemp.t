#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs (docs/outputs.md): temporary files in the outputs.
# mkstemp, mkostemp, mkstemps, mkdtemp (glibc makes their files with its
# internal open, which the shim does not see) go through the service like
# any other create: the temp-then-rename checkpoint idiom and `sed -i` give
# every node the same file, and the drain copies it.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

outputs_up 4 --drain-rate 0

cat >tmp.py <<'EOF2'
import ctypes, errno, fcntl, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]

def call(fn, t, *args):
    buf = ctypes.create_string_buffer(t.encode())
    r = fn(buf, *args)
    if r is None or r == -1:
        return None, errno.errorcode[ctypes.get_errno()]
    return r, buf.value.decode()

# the C checkpoint idiom: a temporary name, then rename(2) into place
fd, tmp = call(libc.mkstemp, d + "/model.ckpt.XXXXXX")
assert fd is not None, tmp
assert tmp.startswith(d + "/model.ckpt.") and not tmp.endswith("XXXXXX"), tmp
assert (os.fstat(fd).st_mode & 0o777) == 0o600 & ~0o022
os.write(fd, b"weights " * 1000)
os.close(fd)
os.rename(tmp, d + "/model.ckpt")

fd, tmp = call(libc.mkstemps, d + "/shard.XXXXXX.pt", 3)
assert fd is not None and tmp.endswith(".pt"), tmp
os.write(fd, b"shard\n"); os.close(fd)
os.rename(tmp, d + "/shard.pt")

fd, tmp = call(libc.mkostemp, d + "/log.XXXXXX", os.O_APPEND | os.O_CLOEXEC)
assert fd is not None, tmp
assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
os.write(fd, b"log\n"); os.close(fd)
os.rename(tmp, d + "/log.txt")

libc.mkdtemp.restype = ctypes.c_char_p
r, tdir = call(libc.mkdtemp, d + "/run.XXXXXX")
assert r is not None, tdir
assert (os.stat(tdir).st_mode & 0o777) == 0o700 & ~0o022
with open(tdir + "/f", "w") as f:
    f.write("in the temporary directory\n")
os.rename(tdir, d + "/run")

# libc's own checks come first, as without the shim
print(call(libc.mkstemp, d + "/badXXXX")[1])
print(call(libc.mkstemp, d + "/nodir/x.XXXXXX")[1])
EOF2

test_expect_success 'mkstemp, mkstemps, mkostemp, mkdtemp, then rename into place' '
	shim_on 0 sh -c "umask 022 && exec $PY tmp.py $MOUNT/out" >out &&
	printf "EINVAL\nENOENT\n" >want && test_cmp want out
'

test_expect_success 'the other node sees the same files, no temporary name is left' '
	$PY -c "import sys; sys.stdout.write(\"weights \" * 1000)" >want &&
	shim_on 1 cat "$MOUNT/out/model.ckpt" >got && test_cmp want got &&
	test "$(shim_on 1 cat "$MOUNT/out/shard.pt")" = shard &&
	test "$(shim_on 1 cat "$MOUNT/out/log.txt")" = log &&
	test "$(shim_on 1 cat "$MOUNT/out/run/f")" = "in the temporary directory" &&
	shim_on 1 ls "$MOUNT/out" >ls1 && shim_on 0 ls "$MOUNT/out" >ls0 &&
	printf "log.txt\nmodel.ckpt\nrun\nshard.pt\n" >want && test_cmp want ls1 && test_cmp want ls0
'

test_expect_success 'sed -i on one node: every node has the new bytes' '
	shim_on 0 sh -c "printf \"lr=0.1\nepochs=10\n\" >$MOUNT/out/conf.txt" &&
	shim_on 1 sed -i "s/lr=0.1/lr=0.01/" "$MOUNT/out/conf.txt" &&
	printf "lr=0.01\nepochs=10\n" >want &&
	shim_on 0 cat "$MOUNT/out/conf.txt" >got0 && test_cmp want got0 &&
	shim_on 1 cat "$MOUNT/out/conf.txt" >got1 && test_cmp want got1 &&
	shim_on 0 ls "$MOUNT/out" >ls0 && ! grep -q "^sed" ls0
'

# The mode a writer sets on its descriptor is the output's: fchmod, and
# sed -i's copy of the old file's permissions (an fsetxattr of its ACL on
# the new file's descriptor); before, the publish took the open's mode
# (sed -i's mkstemp: 0600) and dropped them.
test_expect_success 'sed -i keeps the file'"'"'s mode; an fchmod on the descriptor is the output'"'"'s mode' '
	shim_on 0 sh -c "umask 022 && printf \"a\nb\n\" >$MOUNT/out/mode.txt" &&
	shim_on 1 sed -i s/a/A/ "$MOUNT/out/mode.txt" &&
	test "$(shim_on 0 stat -c %a "$MOUNT/out/mode.txt")" = 644 &&
	shim_on 1 perl -e "open(my \$f, \">\", \$ARGV[0]) or die; print \$f \"x\";
		chmod(0640, \$f) or die; close(\$f) or die" "$MOUNT/out/fchmod.txt" &&
	test "$(shim_on 0 stat -c %a "$MOUNT/out/fchmod.txt")" = 640 &&
	shim_on 1 sh -c "umask 0222 && echo x >$MOUNT/out/ro.txt" &&
	test "$(shim_on 0 stat -c %a "$MOUNT/out/ro.txt")" = 444 &&
	shim_on 1 rm "$MOUNT/out/mode.txt" "$MOUNT/out/fchmod.txt" "$MOUNT/out/ro.txt"
'

test_expect_success 'sed -i by a relative name from a cwd in the outputs' '
	shim_on 0 sh -c "cd $MOUNT/out && sed -i s/epochs=10/epochs=20/ conf.txt" &&
	printf "lr=0.01\nepochs=20\n" >want &&
	shim_on 1 cat "$MOUNT/out/conf.txt" >got1 && test_cmp want got1 &&
	shim_on 1 ls "$MOUNT/out" >ls1 && ! grep -q "^sed" ls1
'

test_expect_success 'a program started from a cwd in the outputs creates through the service' '
	cat >incwd.sh <<-\EOF2 &&
	cd "$1" && cp ../out/conf.txt copy.txt && mkdir sub &&
	"$2" -c "open(\"sub/p.txt\", \"w\").write(\"py\")"
	EOF2
	shim_on 0 sh incwd.sh "$MOUNT/out" "$PY" &&
	shim_on 1 cat "$MOUNT/out/copy.txt" >got1 && test_cmp want got1 &&
	test "$(shim_on 1 cat "$MOUNT/out/sub/p.txt")" = py
'

test_expect_success 'drain --wait: the files under their final names, nothing else' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	shim_on 0 cat "$MOUNT/out/model.ckpt" | cmp - "$DR/model.ckpt" &&
	printf "lr=0.01\nepochs=20\n" >want && test_cmp want "$DR/conf.txt" &&
	test "$(cat "$DR/run/f")" = "in the temporary directory" &&
	(cd "$DR" && find . -type f | sort) >files &&
	printf "./conf.txt\n./copy.txt\n./log.txt\n./model.ckpt\n./run/f\n./shard.pt\n./sub/p.txt\n" >want &&
	test_cmp want files
'
serve_stop
test_expect_success 'stop: exit 0' '
	cat serve.log &&
	test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0
'
test_done
