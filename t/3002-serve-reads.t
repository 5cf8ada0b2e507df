#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The node service answers remote reads: every file of the dataset, read on
# every node through the service's socket, comes back byte for byte (the
# C reader checks each file's CRC-32C), in parallel from many connections;
# the socket is private (0600) and nonsense gets an error, not bytes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'three nodes staged (R=1)' '
	make_samples src 30 &&
	pack_stage src 3
'
serve_start 3 --seed 1
test_expect_success 'served' 'serve_up 3'

test_expect_success 'socket is 0600 in a 0700 node directory' '
	test "$(stat -c %a "$JOBDIR/0/sock")" = 600 &&
	test "$(stat -c %a "$JOBDIR/0")" = 700
'

for k in 0 1 2; do
	test_expect_success "node $k: every file, the remote ones through the service" '
		"$T/serve-read" -a "$JOBDIR" '$k' >out &&
		cat out &&
		grep -q "errors=0" out &&
		local=$(sed "s/.*local=\([0-9]*\).*/\1/" out) &&
		remote=$(sed "s/.*remote=\([0-9]*\).*/\1/" out) &&
		test "$remote" -gt 0 && test "$local" -gt 0 &&
		test $((local + remote)) = 121
	'
done

test_expect_success 'remote bytes equal the source (unmodified reader through the shim)' '
	(cd src && find . -type f | sed "s|^\./||" | sort) >paths &&
	while read -r p; do
		shim_on 1 cat "$MOUNT/$p" | cmp - "src/$p" || { echo "differs: $p"; exit 1; }
	done <paths
'

test_expect_success '16 parallel readers of one node, one connection each' '
	"$T/serve-read" -a -t 16 -r 3 "$JOBDIR" 0 >out &&
	cat out && grep -q "errors=0" out && grep -q "files=363 " out
'

test_expect_success 'the service counted what it served' '
	served=$(stat_val 0 served_reads) &&
	echo "served $served" && test "$served" -ge 240
'

test_expect_success 'nonsense gets an error, never bytes' '
	"$T/serve-read" -q 0:0:10:1 "$JOBDIR" 0 >out && grep -q "status=-22 len=0" out &&
	"$T/serve-read" -q 99999:0:10:1 "$JOBDIR" 0 >out && grep -q "status=-22 len=0" out &&
	"$T/serve-read" -q 3:0:999999999:1 "$JOBDIR" 0 >out && grep -q "status=-22 len=0" out &&
	"$T/serve-read" -q 3:0:0:77 "$JOBDIR" 0 >out && grep -q "status=-95 len=0" out &&
	"$T/serve-read" -q 0:0:0:2 "$JOBDIR" 0 >out && grep -q "status=0 len=0" out
'

# as_nobody CMD...: CMD as uid/gid 65534, no supplementary groups
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
cat >"$TRASH/connect.py" <<'EOF'
import errno, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    print("connect: connected")
except OSError as e:
    print("connect: %s" % errno.errorcode.get(e.errno, e.errno))
EOF
test_expect_success SETPRIV,PYTHON 'a reader of another user cannot connect: the 0700 node directory keeps it out' '
	# the helpers run as that user (a usage error: exit 2, not 126 or 127)
	test_status 2 as_nobody "$T/serve-read" &&
	test_status 0 as_nobody "$PY" -c "pass" &&
	# the reader is refused the node directory: its index, and the socket
	test_status --show out 1 as_nobody "$T/serve-read" -a "$JOBDIR" 0 >out 2>&1 &&
	test_grep "^serve-read: .$JOBDIR/0/index.: Permission denied" out &&
	test_status --show conn 0 as_nobody "$PY" "$TRASH/connect.py" "$JOBDIR/0/sock" >conn 2>&1 &&
	test_grep -x "connect: EACCES" conn
'

serve_stop
test_expect_success 'dstage stop: every node left, exit 0' '
	test "$(cat stop.rc)" = 0 && test "$(cat serve.rc)" = 0 &&
	! test -e "$JOBDIR/0/sock" && ! test -e "$JOBDIR/2/sock"
'
test_done
