#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A stop does not wait for the whole sum of a large output (docs/outputs.md):
# its holder sums it 8 MiB at a time, and a SIGTERM that comes in the middle
# (here each chunk's sum held 3 s by DSTAGE_FAULT outputs.sum, an output of
# three chunks, --drain-timeout 1) ends the sum after its current chunk: the
# third is never summed, the output stays listed unsummed (--------) in the
# saved outputs.status, and `dstage drain --wait` recovers it without a sum
# to check.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

DSTAGE_FAULT=outputs.sum:rank=0:action=sleep:secs=3
export DSTAGE_FAULT
outputs_up 2 --drain-timeout 1
unset DSTAGE_FAULT
sums() { grep -c "fault injected at .outputs.sum" serve.log; }
in_second() { test "$(sums)" -ge 2; }
test_expect_success 'an output of three chunks closed on node 0, summed into its second' '
	head -c $((16 * 1048576 + 4096)) /dev/urandom >big &&
	shim_on 0 cp big "$MOUNT/out/big.pt" &&
	wait_until 30 in_second
'
test_expect_success 'SIGTERM' 'kill_ranks TERM "$(node_pid 0)" "$(node_pid 1)"'
serve_wait
test_expect_success 'the sum ended after its second chunk; the output listed unsummed' '
	cat serve.log &&
	test "$(sums)" = 2 &&
	grep -q "^undrained=$((16 * 1048576 + 4096)) -------- big.pt" "$JOBDIR/0/outputs.status" &&
	! grep -q "has not returned" serve.log
'
test_expect_success 'drain --wait recovers it' '
	test_status --show err 0 "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err &&
	grep -q "big.pt.: recovered" err && cmp big "$DR/big.pt"
'
test_done
