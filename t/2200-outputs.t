#!/bin/sh
# Write-once outputs (docs/outputs.md): files written through the shim under
# MOUNT/out on one node are visible at close on the other node, with the
# same bytes, and drained durably to --drain-to.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/helpers/serve-lib.sh"

test_expect_success 'two nodes staged' '
	make_samples src 4 &&
	pack_stage src 2
'
mkdir -p "$TRASH/drain"
serve_start 2 --outputs out --drain-to "$TRASH/drain" --drain-rate 0
test_expect_success 'served with outputs' 'serve_up 2 && test -S "$JOBDIR/0/osock"'

test_expect_success 'shell redirection writes an output, visible on the other node' '
	shim_on 0 sh -c "echo hello >$MOUNT/out/a.txt" &&
	shim_on 1 cat "$MOUNT/out/a.txt" >got &&
	echo hello >want && test_cmp want got
'
serve_stop
test_expect_success 'stop drained and exited 0' '
	cat serve.log; test "$(cat serve.rc)" = 0 && test_cmp want drain/a.txt
'
test_done
