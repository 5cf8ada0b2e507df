#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A far-away epoch (a typo, set_epoch(step)) announced by one reader does
# not stop the prefetch for good: the service follows the last announced
# epoch, backwards too (one epoch back excepted: a straggler), so after
# epoch 1000000 was touched, epochs 1, 2, 3 are prefetched again and read
# byte for byte from the store and the epoch cache, with no remote read and
# no stall.  (Before, the service only ever moved forwards: every later
# epoch was read remotely, sample by sample.)
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

FAR=1000000

test_expect_success 'two nodes staged' 'make_samples src 24 && pack_stage src 2'
serve_start 2 --seed 3
test_expect_success 'served' 'serve_up 2'

# node $1 has fetched all of epoch $2 (and is on $2 or $2+1, nothing else)
prefetched() {
	pe=$(stat_val "$1" prefetch_epoch) # (t/lib-serve.sh's helpers use k: not here)
	test "$pe" = $(($2 + 1)) || { test "$pe" = "$2" &&
		test "$(stat_val "$1" prefetch_done)" = "$(stat_val "$1" prefetch_total)"; }
}
# read epoch $2's list on node $1, then every file of it; check the bytes
# and that the prefetch (not remote reads) served them
read_epoch() {
	rk=$1 re=$2
	shim_on $rk cat "$MOUNT/.dstage/epochs/$re/all" >list.$re.$rk && test -s list.$re.$rk &&
	wait_until 30 prefetched $rk $re &&
	r0=$(stat_val $rk remote_reads) && s0=$(stat_val $rk stalls) && c0=$(stat_val $rk cache_reads) &&
	sed "s|^|$MOUNT/|" list.$re.$rk | shim_on $rk xargs -d "\n" cat >got &&
	sed "s|^|src/|" list.$re.$rk | xargs -d "\n" cat >want && cmp got want &&
	r1=$(stat_val $rk remote_reads) && s1=$(stat_val $rk stalls) && c1=$(stat_val $rk cache_reads) &&
	echo "node $rk epoch $re: remote $r0 -> $r1, stalls $s0 -> $s1, cache $c0 -> $c1" &&
	test "$r1" = "$r0" && test "$s1" = "$s0" && test "$c1" -gt "$c0"
}

test_expect_success 'epoch 0 on both nodes, prefetched' 'read_epoch 0 0 && read_epoch 1 0'

test_expect_success "a reader touches epoch $FAR: the service follows it, its bytes are right" '
	for k in 0 1; do
		shim_on $k cat "$MOUNT/.dstage/epochs/$FAR/all" >far.$k && test -s far.$k &&
		wait_until 30 eval "test \$(stat_val $k prefetch_epoch) -ge $FAR" || exit 1
	done &&
	head -n 5 far.1 | sed "s|^|$MOUNT/|" | shim_on 1 xargs -d "\n" cat >got &&
	head -n 5 far.1 | sed "s|^|src/|" | xargs -d "\n" cat >want && cmp got want
'
for e in 1 2 3; do
	test_expect_success "epoch $e after epoch $FAR: prefetched again, every byte right" '
		read_epoch 0 '$e' && read_epoch 1 '$e'
	'
done
test_expect_success "the far epoch's caches are released" '
	ls "$JOBDIR/0/epochs" "$JOBDIR/1/epochs" >caches && cat caches &&
	! grep -q "^$FAR" caches && ! grep -q "^$((FAR + 1))" caches
'
test_expect_success 'one epoch back (a straggler) does not move the prefetch back' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/2/all" >/dev/null && sleep 0.5 &&
	pe=$(stat_val 0 prefetch_epoch) && echo "prefetch epoch $pe" && test "$pe" -ge 3
'
serve_stop
test_expect_success 'stopped cleanly' 'cat serve.log && test "$(cat serve.rc)" = 0'
test_done
