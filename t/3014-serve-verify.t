#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The service checks the epoch cache (shuffle/exchange.c, verify_main): once
# an epoch is fetched, every uncompressed entry's bytes are checked against
# the index's CRC-32C and marked VERIFIED, so that readers need not check
# them again; an entry that does not match is marked FAILED, and a reader
# then gets the file by a remote read, checked, never the wrong bytes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 40 &&
	pack_stage src 2
'

prefetched() {
	pe=$(stat_val "$1" prefetch_epoch)
	test "$pe" -gt "$2" || { test "$pe" = "$2" &&
		test "$(stat_val "$1" prefetch_done)" = "$(stat_val "$1" prefetch_total)"; }
}

# node 0's first checked entry of each epoch arrives with a byte flipped
DSTAGE_LOG=debug DSTAGE_FAULT=serve.verify:rank=0
export DSTAGE_FAULT
serve_start 2 --seed 3
unset DSTAGE_FAULT
DSTAGE_LOG=warn
test_expect_success 'served' 'serve_up 2'

test_expect_success 'every fetched epoch is checked, the flipped entry is caught' '
	wait_until 30 prefetched 0 1 && wait_until 30 prefetched 1 1 &&
	wait_until 30 grep -q "node 0: epoch 1: [0-9]* cached entries checked in .* 1 bad" serve.log &&
	wait_until 30 grep -q "node 1: epoch 1: [0-9]* cached entries checked in .* 0 bad" serve.log &&
	test_grep "node 0: epoch 1: .*: checksum mismatch in the fetched bytes (readers fetch it again)" serve.log
'

# The flipped entry is FAILED in epoch 1's cache: node 0's reader gets it by
# a remote read, or from another live epoch's cache when node 0 reads it in
# epoch 0 or 2 as well (epoch 0 is still live; the reads of epoch 1 start
# the prefetch of 2), never from epoch 1's copy (cmp).
bad_elsewhere() {
	bad=$(sed -n "s/.*node 0: epoch 1: '\(.*\)': checksum mismatch.*/\1/p" serve.log | head -n 1) &&
	test -n "$bad" &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/0/all" "$MOUNT/.dstage/epochs/2/all" >lists.02 &&
	grep -qxF "$bad" lists.02
}

test_expect_success 'the readers of epoch 1 get every byte right, the bad entry by a remote read' '
	for k in 0 1; do
		shim_on $k cat "$MOUNT/.dstage/epochs/1/all" >list.$k &&
		r0=$(stat_val $k remote_reads) && c0=$(stat_val $k cache_reads) &&
		sed "s|^|$MOUNT/|" list.$k | shim_on $k xargs -d "\n" cat >got.$k &&
		sed "s|^|src/|" list.$k | xargs -d "\n" cat >want.$k &&
		cmp got.$k want.$k &&
		r1=$(stat_val $k remote_reads) && c1=$(stat_val $k cache_reads) &&
		echo "node $k: remote $r0 -> $r1, cache $c0 -> $c1" &&
		test "$c1" -gt "$c0" || return 1
	done &&
	{ test "$(stat_val 0 remote_reads)" -ge 1 || bad_elsewhere; } &&
	test "$(stat_val 1 remote_reads)" = 0
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'

# without the check (DSTAGE_SERVE_VERIFY=0) the readers check every cached
# entry themselves, and nothing is logged as checked
DSTAGE_LOG=debug DSTAGE_SERVE_VERIFY=0
export DSTAGE_SERVE_VERIFY
: >serve.log
serve_start 2 --seed 3
unset DSTAGE_SERVE_VERIFY
DSTAGE_LOG=warn
test_expect_success 'DSTAGE_SERVE_VERIFY=0: no check by the service, readers still right' '
	serve_up 2 &&
	wait_until 30 prefetched 0 1 &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >list &&
	sed "s|^|$MOUNT/|" list | shim_on 0 xargs -d "\n" cat >got &&
	sed "s|^|src/|" list | xargs -d "\n" cat >want &&
	cmp got want &&
	! grep -q "cached entries checked" serve.log
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'

test_done
