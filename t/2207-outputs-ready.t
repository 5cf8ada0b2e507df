#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `dstage serve --outputs` is ready for writers when NODEDIR/sock appears
# (what jobs/ scripts and serve_up wait for): the outputs socket and
# configuration are made before the readers' socket.  The outputs' start is
# slowed down (DSTAGE_FAULT serve.outputs_start, 3 s); a write the moment
# NODEDIR/sock exists must work, where it got EROFS/EIO before.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
DR="$TRASH/drain"
DSTAGE_FAULT=serve.outputs_start:action=sleep:secs=3
export DSTAGE_FAULT
serve_start 2 --outputs out --drain-to "$DR" --drain-rate 0
unset DSTAGE_FAULT
test_expect_success 'a write as soon as the readers socket exists works' '
	wait_until 60 test -S "$JOBDIR/1/sock" &&
	shim_on 1 sh -c "echo early >$MOUNT/out/early.txt" &&
	test "$(shim_on 0 cat "$MOUNT/out/early.txt")" = early
'
test_expect_success 'served' 'serve_up 2 && grep -q "fault injected at .serve.outputs_start" serve.log'
test_expect_success 'drained' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" && test "$(cat "$DR/early.txt")" = early
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'
test_done
