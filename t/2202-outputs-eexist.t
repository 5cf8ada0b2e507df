#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs (docs/outputs.md): one writer per path in the whole job.
# A second creator of a path being written gets EEXIST, on the same node or
# another one; O_EXCL on a closed output is EEXIST; the path is free again
# at close.  Writing outputs while another node reads the dataset through
# the service leaves both intact.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 16 &&
	pack_stage src 2
'
serve_start 2 --outputs out --drain-to "$TRASH/drain" --drain-rate 0
test_expect_success 'served with outputs' 'serve_up 2'

cat >hold.py <<'EOF2'
import sys, time, os
f = open(sys.argv[1], "w")
f.write("first writer\n")
f.flush()
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
f.close()
EOF2
cat >second.py <<'EOF2'
import sys, errno
try:
    open(sys.argv[1], "w")
except OSError as e:
    print(errno.errorcode[e.errno])
else:
    print("opened")
EOF2

test_expect_success 'a second creator gets EEXIST, on the same node and on the other' '
	rm -f held go &&
	(shim_on 0 $PY hold.py "$MOUNT/out/one.txt" held go &) &&
	wait_until 10 test -e held &&
	test "$(shim_on 1 $PY second.py "$MOUNT/out/one.txt")" = EEXIST &&
	test "$(shim_on 0 $PY second.py "$MOUNT/out/one.txt")" = EEXIST &&
	! shim_on 1 sh -c "echo x >$MOUNT/out/one.txt" 2>err && cat err && grep -qi "exists" err &&
	touch go &&
	wait_until 10 shim_on 1 test -e "$MOUNT/out/one.txt" &&
	test "$(shim_on 1 cat "$MOUNT/out/one.txt")" = "first writer"
'

test_expect_success 'closed: the path can be written again (a new version replaces it)' '
	shim_on 1 sh -c "echo second >$MOUNT/out/one.txt" &&
	test "$(shim_on 0 cat "$MOUNT/out/one.txt")" = second
'

test_expect_success 'O_EXCL on a closed output: EEXIST; open for append keeps the bytes' '
	cat >excl.py <<-\EOF2 &&
	import os, sys, errno
	try:
	    os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
	except OSError as e:
	    print(errno.errorcode[e.errno])
	with open(sys.argv[1], "a") as f:
	    f.write("appended\n")
	EOF2
	test "$(shim_on 0 $PY excl.py "$MOUNT/out/one.txt")" = EEXIST &&
	printf "second\nappended\n" >want &&
	shim_on 1 cat "$MOUNT/out/one.txt" >got && test_cmp want got
'

test_expect_success 'rmdir of a directory with an output: ENOTEMPTY; mkdir twice: EEXIST' '
	shim_on 0 mkdir "$MOUNT/out/d" && shim_on 1 sh -c "echo f >$MOUNT/out/d/f" &&
	! shim_on 1 rmdir "$MOUNT/out/d" 2>err && grep -qi "not empty" err &&
	! shim_on 1 mkdir "$MOUNT/out/d" 2>err && grep -qi "exists" err &&
	shim_on 0 rm "$MOUNT/out/d/f" && shim_on 1 rmdir "$MOUNT/out/d" &&
	! shim_on 0 test -e "$MOUNT/out/d"
'

test_expect_success 'writes on node 0 while node 1 reads the whole dataset through the service' '
	cat >writer.py <<-\EOF2 &&
	import sys, os
	for i in range(40):
	    with open(os.path.join(sys.argv[1], "w%02d.bin" % i), "wb") as f:
	        f.write(bytes([i]) * (50000 + i))
	EOF2
	(cd src && find . -type f | sed "s|^\./||" | sort) >paths || exit 1
	shim_on 0 $PY writer.py "$MOUNT/out" &
	wpid=$!
	while read -r p; do
		shim_on 1 cat "$MOUNT/$p" | cmp - "src/$p" || { echo "differs: $p"; exit 1; }
	done <paths &&
	wait $wpid &&
	for i in 0 7 39; do
		n=$(printf %02d $i) &&
		test "$(shim_on 1 stat -c %s "$MOUNT/out/w$n.bin")" = $((50000 + i)) || exit 1
	done &&
	shim_on 1 cat "$MOUNT/out/w39.bin" | od -An -tu1 | head -1 | grep -q " 39"
'
serve_stop
test_expect_success 'stop: exit 0, everything drained' '
	test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0 &&
	test "$(wc -c <"$TRASH/drain/w39.bin")" = 50039 &&
	printf "second\nappended\n" >want && test_cmp want "$TRASH/drain/one.txt"
'
test_done
