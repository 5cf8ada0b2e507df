#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs (docs/outputs.md): a writer that opens its own output
# again while it writes it ("w" then "a", a second "w", HDF5 opening a file
# it has open) writes one file: every one of its descriptors counts, the
# output is published when the last goes, a second "w" truncates, and no
# byte can change after the publish (every node and the drain copy see the
# whole file).  Another process's write open of it is still EEXIST.
# 2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

outputs_up 4 --drain-rate 0

cat >reopen.py <<'EOF2'
import os, sys, errno
p, how = sys.argv[1], sys.argv[2]
f = open(p, "w")
f.write("A" * 1000)
f.flush()
g = open(p, how)                 # the same writer opens its file again
if how == "w":                   # O_TRUNC: as on any file system
    print("size after the second open: %d" % os.fstat(f.fileno()).st_size)
f.close()                        # not the last descriptor: not published yet
g.write("B" * 1000)
g.flush()
g.close()
EOF2

test_expect_success '"w" then "a": the bytes written after the first close are in the output' '
	shim_on 0 $PY reopen.py "$MOUNT/out/m.ckpt" a >out &&
	$PY -c "import sys; sys.stdout.write(\"A\" * 1000 + \"B\" * 1000)" >want &&
	shim_on 1 cat "$MOUNT/out/m.ckpt" >got1 && test_cmp want got1 &&
	shim_on 0 cat "$MOUNT/out/m.ckpt" >got0 && test_cmp want got0
'

test_expect_success 'a second "w" truncates, as on any file system' '
	shim_on 0 $PY reopen.py "$MOUNT/out/t.ckpt" w >out &&
	cat out && grep -q "size after the second open: 0" out &&
	$PY -c "import sys; sys.stdout.write(\"B\" * 1000)" >want &&
	shim_on 1 cat "$MOUNT/out/t.ckpt" >got && test_cmp want got
'

test_expect_success 'another process opening it for writing meanwhile gets EEXIST' '
	cat >hold2.py <<-\EOF2 &&
	import sys, os, time
	f = open(sys.argv[1], "w"); f.write("x"); f.flush()
	g = open(sys.argv[1], "a"); f.close()
	open(sys.argv[2], "w").close()
	while not os.path.exists(sys.argv[3]):
	    time.sleep(0.02)
	g.write("y"); g.close()
	EOF2
	cat >other.py <<-\EOF2 &&
	import sys, errno
	try:
	    open(sys.argv[1], "a")
	except OSError as e:
	    print(errno.errorcode[e.errno])
	EOF2
	rm -f held go &&
	(shim_on 0 $PY hold2.py "$MOUNT/out/h.txt" held go &) &&
	wait_until 10 test -e held &&
	test "$(shim_on 0 $PY other.py "$MOUNT/out/h.txt")" = EEXIST &&
	test "$(shim_on 1 $PY other.py "$MOUNT/out/h.txt")" = EEXIST &&
	touch go &&
	wait_until 10 shim_on 1 test -e "$MOUNT/out/h.txt" &&
	test "$(shim_on 1 cat "$MOUNT/out/h.txt")" = xy
'

test_expect_success 'a shell: exec >f, then >>f from the same shell and a child, as on a real file' '
	cat >sh.sh <<-\EOF2 &&
	exec >"$1"
	echo one
	echo two >>"$1"
	sh -c "echo three" >>"$1"
	echo four
	EOF2
	mkdir -p real && sh sh.sh real/log.txt &&
	shim_on 0 sh sh.sh "$MOUNT/out/log.txt" &&
	# dash leaves by _exit: its last descriptor goes with the process and
	# the service publishes the file a moment later
	wait_until 10 shim_on 1 test -e "$MOUNT/out/log.txt" &&
	shim_on 1 cat "$MOUNT/out/log.txt" >got && test_cmp real/log.txt got
'

test_expect_success H5PY 'h5py opens a file it is writing again ("a", "r"): one output' '
	cat >h5.py <<-\EOF2 &&
	import h5py, numpy as np, sys
	f = h5py.File(sys.argv[1], "w")
	f["x"] = np.arange(1000)
	f.flush()
	g = h5py.File(sys.argv[1], "a")     # HDF5 opens it again, then shares
	g["y"] = np.arange(10)
	r = h5py.File(sys.argv[1], "r")
	assert list(r["y"][:3]) == [0, 1, 2]
	r.close(); g.close(); f.close()
	EOF2
	cat >h5r.py <<-\EOF2 &&
	import h5py, sys
	with h5py.File(sys.argv[1], "r") as f:
	    print(int(f["x"][:].sum()), int(f["y"][:].sum()))
	EOF2
	shim_on 0 $PY h5.py "$MOUNT/out/m.h5" &&
	test "$(shim_on 1 $PY h5r.py "$MOUNT/out/m.h5")" = "499500 45"
'

cat >race.py <<'EOF2'
import sys, threading, time
p = sys.argv[1]
f = open(p, "w")
f.write("one\n")
f.flush()
def later():
    g = open(p, "a")    # held 1 s between its open and its lock (DSTAGE_FAULT)
    g.write("two\n")
    g.close()
t = threading.Thread(target=later)
t.start()
time.sleep(0.3)
f.close()               # the last descriptor: published while the reopen waits
t.join()
EOF2

test_expect_success 'a reopen that comes while the output is published writes a new version' '
	shim_on 0 env DSTAGE_FAULT=shim.out_reopen:action=sleep:secs=1 \
		$PY race.py "$MOUNT/out/race.txt" 2>err &&
	grep -q "fault injected at .shim.out_reopen" err &&
	printf "one\ntwo\n" >want &&
	shim_on 1 cat "$MOUNT/out/race.txt" >got1 && test_cmp want got1 &&
	shim_on 0 cat "$MOUNT/out/race.txt" >got0 && test_cmp want got0
'

cat >threads.py <<'EOF2'
import sys, threading, errno
p = sys.argv[1]
errs = []
def worker(k):
    for i in range(30):
        try:
            with open(p, "a") as g:      # each thread opens, appends, closes
                g.write("%d.%02d\n" % (k, i))
        except OSError as e:
            errs.append(errno.errorcode[e.errno])
ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("errors: %d %s" % (len(errs), sorted(set(errs))))
EOF2

test_expect_success 'threads of one writer open, append and close at once: every line kept' '
	test "$(shim_on 0 $PY threads.py "$MOUNT/out/threads.txt")" = "errors: 0 []" &&
	$PY -c "print(\"\\n\".join(\"%d.%02d\" % (k, i) for k in range(4) for i in range(30)))" >want &&
	shim_on 1 sort "$MOUNT/out/threads.txt" >got1 && test_cmp want got1 &&
	shim_on 0 sort "$MOUNT/out/threads.txt" >got0 && test_cmp want got0
'

test_expect_success 'drain --wait: the drained copies are whole' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	$PY -c "import sys; sys.stdout.write(\"A\" * 1000 + \"B\" * 1000)" >want &&
	test_cmp want "$DR/m.ckpt" &&
	shim_on 0 cat "$MOUNT/out/t.ckpt" | cmp - "$DR/t.ckpt" &&
	test "$(cat "$DR/h.txt")" = xy &&
	test_cmp real/log.txt "$DR/log.txt" &&
	printf "one\ntwo\n" >want && test_cmp want "$DR/race.txt" &&
	shim_on 0 cat "$MOUNT/out/threads.txt" | cmp - "$DR/threads.txt" &&
	if test_have_prereq H5PY; then
		shim_on 0 cat "$MOUNT/out/m.h5" | cmp - "$DR/m.h5"
	fi
'
serve_stop
test_expect_success 'stop: exit 0' '
	cat serve.log &&
	test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0
'
test_done
