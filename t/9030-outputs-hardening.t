#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hardening of write-once outputs (docs/outputs.md): the staged dataset stays
# read-only; ".." and links cannot take a write out of the outputs subtree
# (a closed output changes only as a new version: truncate(2) by name is
# EPERM, while `truncate` the command opens it for writing, which is fine);
# the service checks every name it is sent (a crafted client gets EINVAL and
# nothing outside AREA/ns changes); another user can neither read nor write
# a job's outputs, directly or through the shim or the socket.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

uid=$(id -u)
OTHER=
# USERADD: the tests as another user (a failing useradd fails them)
if test_have_prereq USERADD; then
	OTHER=dstage-t-$$
	test_atexit 'userdel "$OTHER"'
	useradd -M -N -s /bin/sh "$OTHER" || echo "# useradd $OTHER failed"
fi
as_other() { setpriv --reuid="$OTHER" --regid="$(id -g "$OTHER")" --clear-groups "$@"; }

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
serve_start 2 --outputs out --drain-to "$TRASH/drain" --drain-rate 0
test_expect_success 'served with outputs' 'serve_up 2'
AREA="$JOBDIR/0/outputs"

test_expect_success 'the dataset stays read-only, outputs or not' '
	for how in "echo x >$MOUNT/val/labels.txt" "echo x >$MOUNT/val/new" "mkdir $MOUNT/val/d" \
	           "rm $MOUNT/val/labels.txt" "touch $MOUNT/newfile" "truncate -s0 $MOUNT/val/labels.txt"; do
		! shim_on 0 sh -c "$how" 2>err || { echo "worked: $how"; exit 1; }
		grep -qi "read-only" err || { cat err; exit 1; }
	done &&
	test "$(shim_on 0 cat "$MOUNT/val/labels.txt")" = val
'

test_expect_success 'rename between the outputs and the dataset: EXDEV, the dataset unchanged' '
	shim_on 0 sh -c "echo o >$MOUNT/out/o.txt" &&
	! shim_on 0 mv -T "$MOUNT/out/o.txt" "$MOUNT/val/o.txt" 2>err && cat err &&
	test_grep "val/o.txt.*Read-only file system" err && test "$(shim_on 0 cat "$MOUNT/out/o.txt")" = o &&
	cat >ren.py <<-\EOF2 &&
	# ren.py MOUNT A B [A B ...]: rename MOUNT/A to MOUNT/B for each pair
	import os, sys, errno
	m = sys.argv[1]
	for a, b in zip(sys.argv[2::2], sys.argv[3::2]):
	    try:
	        os.rename(m + "/" + a, m + "/" + b)
	        print("renamed")
	    except OSError as e:
	        print(errno.errorcode[e.errno])
	EOF2
	shim_on 0 $PY ren.py "$MOUNT" out/o.txt val/o.txt val/labels.txt out/l.txt >out && cat out &&
	printf "EXDEV\nEXDEV\n" >want && test_cmp want out &&
	test "$(shim_on 1 cat "$MOUNT/val/labels.txt")" = val
'

test_expect_success 'directory renames never leave the outputs, nor move their root' '
	shim_on 0 mkdir "$MOUNT/out/dd" && shim_on 0 sh -c "echo d >$MOUNT/out/dd/f" &&
	shim_on 0 $PY ren.py "$MOUNT" out/dd val/dd out/dd out/../dd val out/val out out2 \
		out/dd out/dd/../../out2 out/dd out/dd/x >out && cat out &&
	printf "EXDEV\nEXDEV\nEXDEV\nEXDEV\nEXDEV\nEINVAL\n" >want && test_cmp want out &&
	test "$(shim_on 1 cat "$MOUNT/out/dd/f")" = d && test "$(shim_on 1 cat "$MOUNT/val/labels.txt")" = val &&
	! test -e "$AREA/dd" && ! test -e "$AREA/../dd"
'

test_expect_success '".." never leaves the outputs for the node store' '
	ls -a "$AREA" >before &&
	! shim_on 0 sh -c "echo x >$MOUNT/out/../val/esc" 2>err && grep -qi "read-only" err &&
	! shim_on 0 sh -c "echo x >$MOUNT/out/a/../../ns/esc" 2>err && cat err &&
	shim_on 0 sh -c "echo back >$MOUNT/out/../out/./back.txt" &&
	test "$(shim_on 1 cat "$MOUNT/out/back.txt")" = back &&
	ls -a "$AREA" >after && test_cmp before after &&
	! test -e "$AREA/esc" && ! test -e "$JOBDIR/0/esc" &&
	ls "$AREA/ns" >ns && ! grep -q esc ns
'

test_expect_success 'symlinks, hard links, FIFOs and truncate by name: refused in the outputs' '
	! shim_on 0 ln -s /etc/passwd "$MOUNT/out/pw" 2>err && grep -qi "not permitted" err &&
	! shim_on 0 ln "$MOUNT/out/o.txt" "$MOUNT/out/hard" 2>err && grep -qi "not permitted" err &&
	! shim_on 0 mkfifo "$MOUNT/out/fifo" 2>err && grep -qi "not permitted" err &&
	test "$(shim_on 0 $PY -c "
import os, sys, errno
try:
    os.truncate(sys.argv[1], 0)
except OSError as e:
    print(errno.errorcode[e.errno])" "$MOUNT/out/o.txt")" = EPERM &&
	test "$(shim_on 1 cat "$MOUNT/out/o.txt")" = o &&
	! find "$AREA" -type l -o -type p | grep -q .
'

test_expect_success 'a crafted client: names with "..", "/" or empty get EINVAL, nothing is made' '
	cat >craft.py <<-\EOF2 &&
	import socket, struct, sys
	def ask(op, path, path2=b"", flags=0o101, mode=0o600):
	    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	    s.connect(sys.argv[1])
	    s.sendall(struct.pack("<IIiIQ", 0x44534f31, op, flags, mode, 0) +
	              path.ljust(4096, b"\0") + path2.ljust(4096, b"\0"))
	    a = b""
	    while len(a) < 16:
	        c = s.recv(16 - len(a))
	        if not c:
	            break
	        a += c
	    return struct.unpack("<IiQ", a)[1]
	for op, p, p2 in ((1, b"../../esc", b""), (1, b"/etc/esc", b""), (6, b"../esc", b""),
	                  (4, b"o.txt", b"../../esc"), (5, b"../sock", b""), (1, b"a//b", b""),
	                  (7, b"", b""), (3, b"../../index", b"")):
	    print(op, ask(op, p, p2))
	EOF2
	$PY craft.py "$JOBDIR/0/osock" >out && cat out &&
	! grep -v " -22$" out &&
	ls -a "$AREA" >after && test_cmp before after &&
	test -S "$JOBDIR/0/sock" && ! test -e "$JOBDIR/esc" && ! test -e /etc/esc
'

test_expect_success 'set-id bits never reach an output (nor its drained copy)' '
	shim_on 0 $PY -c "
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o6755)
os.write(fd, b\"x\")
os.fchmod(fd, 0o4755)
os.close(fd)" "$MOUNT/out/suid" &&
	test "$(shim_on 1 stat -c %a "$MOUNT/out/suid")" = 755 &&
	test "$(stat -c %a "$AREA/ns/suid")" = 755
'

test_expect_success USERADD 'another user cannot read or list the outputs' '
	test "$(stat -c %a "$AREA")" = 700 && test "$(stat -c %a "$AREA/ns")" = 700 &&
	test "$(stat -c %a "$JOBDIR/0/osock")" = 600 &&
	! as_other ls "$AREA/ns" 2>err && ! as_other cat "$AREA/ns/o.txt" >out 2>&1 &&
	! grep -q "^o$" out
'
test_expect_success USERADD 'another user cannot reach the outputs socket' '
	! as_other $PY craft.py "$JOBDIR/0/osock" >out 2>&1 && grep -q "Permission denied" out
'
test_expect_success USERADD 'another user cannot write or read outputs through the shim' '
	cd / &&
	! as_other env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE=0 \
		DSTAGE_MOUNT="$MOUNT" sh -c "cat $MOUNT/out/o.txt" >"$TRASH/out" 2>&1 &&
	! as_other env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE=0 \
		DSTAGE_MOUNT="$MOUNT" sh -c "echo evil >$MOUNT/out/evil" 2>&1 &&
	cd "$TRASH" && ! grep -q "^o$" out && ! test -e "$AREA/ns/evil" &&
	! shim_on 0 test -e "$MOUNT/out/evil"
'
serve_stop
test_expect_success 'stop: exit 0; the drained copies carry no set-id bit' '
	test "$(cat serve.rc)" = 0 && test "$(stat -c %a "$TRASH/drain/suid")" = 755
'
test_done
