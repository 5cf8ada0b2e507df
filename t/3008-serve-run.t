#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage run: stage, then serve, in one job step.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'a pack' '
	make_samples src 10 &&
	"$DSTAGE" pack -p 4 --replicate val src pack >/dev/null
'
timeout -k 5 "${DSTAGE_TEST_MPI_TIMEOUT:-120}" $ds_mpiexec -n 2 \
	"$DSTAGE" run pack --to "$SHM" --job "$JOB" --node-per-rank -q --seed 9 --locality 0.5 >serve.log 2>&1 &
SERVE_PID=$!
test_bg $SERVE_PID
test_expect_success 'staged and serving' 'serve_up 2 && test -s "$JOBDIR/1/store"'
test_expect_success 'the service uses its options (epoch.conf)' '
	grep -q "^seed=9$" "$JOBDIR/epoch.conf" && grep -q "^locality=0.5$" "$JOBDIR/epoch.conf"
'
test_expect_success 'a reader on node 1 reads a remote file' '
	"$T/serve-read" -a "$JOBDIR" 1 >out && cat out && grep -q "errors=0" out && ! grep -q "remote=0 " out
'
serve_stop
test_expect_success 'dstage stop ends it, exit 0' 'test "$(cat serve.rc)" = 0'
test_expect_code 2 'run without a pack: usage' '"$DSTAGE" run --to "$SHM"'
test_done
