#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs (docs/outputs.md): unmodified programs write files under
# MOUNT/out through the shim on one node; each is visible at close on the
# other node with the same bytes, size and mtime, and is drained durably to
# --drain-to.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 4 &&
	pack_stage src 2
'
DR="$TRASH/drain"
serve_start 2 --outputs out --drain-to "$DR" --drain-rate 0
test_expect_success 'served with outputs' 'serve_up 2 && test -S "$JOBDIR/0/osock" &&
	test "$(stat -c %a "$JOBDIR/0/outputs")" = 700'

test_expect_success 'shell redirection (an exec'"'"'d program writing): visible on the other node' '
	shim_on 0 sh -c "echo hello >$MOUNT/out/a.txt && seq 1 1000 >$MOUNT/out/seq.txt" &&
	shim_on 1 cat "$MOUNT/out/a.txt" >got &&
	echo hello >want && test_cmp want got &&
	seq 1 1000 >want && shim_on 1 cat "$MOUNT/out/seq.txt" >got && test_cmp want got
'

test_expect_success 'an exec'"'"'d program that never closes: visible once it exits' '
	shim_on 0 sh -c "exec >$MOUNT/out/exec.txt; exec $PY -c \"print(42)\"" &&
	test "$(shim_on 1 cat "$MOUNT/out/exec.txt")" = 42
'

test_expect_success 'mkdir, cp and dd write outputs; ls and stat agree on both nodes' '
	head -c 3000000 /dev/urandom >big &&
	shim_on 0 mkdir -p "$MOUNT/out/ck/sub" &&
	shim_on 0 cp big "$MOUNT/out/ck/big.bin" &&
	shim_on 1 dd if=big of="$MOUNT/out/ck/sub/dd.bin" bs=64k status=none &&
	shim_on 0 stat -c "%n %s %Y" "$MOUNT/out/ck/big.bin" "$MOUNT/out/ck/sub/dd.bin" >s0 &&
	shim_on 1 stat -c "%n %s %Y" "$MOUNT/out/ck/big.bin" "$MOUNT/out/ck/sub/dd.bin" >s1 &&
	test_cmp s0 s1 && grep -q " 3000000 " s0 &&
	shim_on 1 cmp big "$MOUNT/out/ck/big.bin" &&
	shim_on 0 cmp big "$MOUNT/out/ck/sub/dd.bin" &&
	shim_on 0 ls "$MOUNT/out/ck" >l0 && shim_on 1 ls "$MOUNT/out/ck" >l1 && test_cmp l0 l1 &&
	printf "big.bin\nsub\n" >want && test_cmp want l0
'

test_expect_success 'tar -x into the outputs (directories, files, mtimes)' '
	mkdir -p t/x/y && echo one >t/x/1 && echo two >t/x/y/2 && touch -d @1000000000 t/x/1 &&
	tar cf t.tar -C t x &&
	shim_on 1 tar xf t.tar -C "$MOUNT/out" &&
	test "$(shim_on 0 cat "$MOUNT/out/x/y/2")" = two &&
	test "$(shim_on 0 stat -c %Y "$MOUNT/out/x/1")" = 1000000000
'

test_expect_success 'python open("w") + os.replace: the atomic checkpoint idiom, twice' '
	cat >ck.py <<-\PYEOF &&
	import os, sys
	d = sys.argv[1]
	for gen in (1, 2):
	    tmp = os.path.join(d, "model.tmp")
	    with open(tmp, "w") as f:
	        f.write("generation %d\n" % gen)
	        f.flush()
	        os.fsync(f.fileno())
	    os.replace(tmp, os.path.join(d, "model.ckpt"))
	print(sorted(os.listdir(d)))
	PYEOF
	shim_on 0 $PY ck.py "$MOUNT/out/ck" >out && cat out &&
	grep -q "model.ckpt" out && ! grep -q model.tmp out &&
	test "$(shim_on 1 cat "$MOUNT/out/ck/model.ckpt")" = "generation 2" &&
	! shim_on 1 test -e "$MOUNT/out/ck/model.tmp"
'

test_expect_success 'unlink and rename are seen on the other node' '
	shim_on 0 sh -c "echo x >$MOUNT/out/gone && echo y >$MOUNT/out/r1" &&
	shim_on 1 rm "$MOUNT/out/gone" &&
	shim_on 1 mv "$MOUNT/out/r1" "$MOUNT/out/r2" &&
	! shim_on 0 test -e "$MOUNT/out/gone" && ! shim_on 0 test -e "$MOUNT/out/r1" &&
	test "$(shim_on 0 cat "$MOUNT/out/r2")" = y
'

test_expect_success 'an output being written is not visible until it is closed' '
	cat >slow.py <<-\PYEOF &&
	import sys, time, os
	f = open(sys.argv[1], "w")
	f.write("partial")
	f.flush()
	open(sys.argv[2], "w").close()
	time.sleep(1.5)
	f.write(" done\n")
	f.close()
	PYEOF
	rm -f started &&
	(shim_on 0 $PY slow.py "$MOUNT/out/slow.txt" started &) &&
	wait_until 10 test -e started &&
	! shim_on 1 test -e "$MOUNT/out/slow.txt" &&
	! shim_on 0 test -e "$MOUNT/out/slow.txt" &&
	wait_until 10 shim_on 1 test -e "$MOUNT/out/slow.txt" &&
	test "$(shim_on 1 cat "$MOUNT/out/slow.txt")" = "partial done"
'

test_expect_success 'dstage drain --wait: everything closed is in the drain directory' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/a.txt")" = hello && cmp big "$DR/ck/big.bin" && cmp big "$DR/ck/sub/dd.bin" &&
	test "$(cat "$DR/ck/model.ckpt")" = "generation 2" && ! test -e "$DR/ck/model.tmp" &&
	test "$(cat "$DR/x/y/2")" = two && test "$(stat -c %Y "$DR/x/1")" = 1000000000 &&
	! test -e "$DR/gone" && ! test -e "$DR/r1" && test "$(cat "$DR/r2")" = y &&
	test "$(cat "$DR/slow.txt")" = "partial done" &&
	! find "$DR" -name "*.dstage-drain.*" | grep -q .
'

test_expect_success 'dstage drain and dstage status show the figures' '
	"$DSTAGE" drain --to "$SHM" --job "$JOB" >fig && cat fig &&
	grep -q "node 0: pending 0 files" fig && grep -q "node 1: pending 0 files" fig &&
	"$DSTAGE" status --to "$SHM" --job "$JOB" >st && cat st &&
	grep -q "node 0 outputs: 0 being written; drain to .*pending 0 files (0 bytes), drained [1-9]" st &&
	grep -q "last .slow.txt." st
'

test_expect_success 'errno is left untouched by calls on outputs that succeed' '
	cat >errno.py <<-\EOF2 &&
	import ctypes, os, sys
	libc = ctypes.CDLL(None, use_errno=True)
	d = sys.argv[1].encode()
	def check(what, ok):
	    e = ctypes.get_errno()
	    print(what, "ok" if ok and e == 77 else "BAD errno=%d" % e)
	ctypes.set_errno(77); fd = libc.open(d + b"/errno.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
	check("open", fd >= 0)
	libc.write(fd, b"x", 1)
	ctypes.set_errno(77); check("close", libc.close(fd) == 0)
	ctypes.set_errno(77); check("mkdir", libc.mkdir(d + b"/errdir", 0o755) == 0)
	ctypes.set_errno(77); check("rename", libc.rename(d + b"/errno.txt", d + b"/errdir/e.txt") == 0)
	ctypes.set_errno(77); fd = libc.open(d + b"/errdir/e.txt", os.O_RDONLY); check("open r", fd >= 0)
	libc.close(fd)
	ctypes.set_errno(77); check("unlink", libc.unlink(d + b"/errdir/e.txt") == 0)
	ctypes.set_errno(77); check("rmdir", libc.rmdir(d + b"/errdir") == 0)
	EOF2
	shim_on 1 $PY errno.py "$MOUNT/out" >out && cat out && ! grep -q BAD out && test "$(wc -l <out)" = 7
'

test_expect_success 'the mount root lists the outputs directory; find walks into it' '
	shim_on 1 ls "$MOUNT" >root && grep -qx out root && grep -qx train root &&
	shim_on 0 find "$MOUNT/out/x" -type f | sort >found &&
	printf "%s\n" "$MOUNT/out/x/1" "$MOUNT/out/x/y/2" >want && test_cmp want found
'

test_expect_success 'the staged dataset stays read-only' '
	! shim_on 0 sh -c "echo x >$MOUNT/val/labels.txt" 2>err && cat err &&
	grep -qi "read-only" err &&
	! shim_on 0 mkdir "$MOUNT/newdir" 2>err && grep -qi "read-only" err
'

test_expect_success 'a write after the drain is drained by stop' '
	shim_on 1 sh -c "echo late >$MOUNT/out/late.txt"
'
serve_stop
test_expect_success 'stop drained first and exited 0' '
	test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0 &&
	test "$(cat "$DR/late.txt")" = late
'
test_done
