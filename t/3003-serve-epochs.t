#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The epoch shuffle end to end (pack, stage, serve, the shim): readers that
# follow their lists for 4 epochs read every sample of their node's share,
# byte for byte; the lists of all nodes form one permutation of the
# training set each epoch, different every epoch; once an epoch's prefetch
# is done, every read is local (store or epoch cache): no remote read and
# no stall.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 40 &&
	pack_stage src 2 &&
	(cd src/train && find . -type f | sed "s|^\./|train/|" | sort) >train.sorted
'
DSTAGE_LOG=info
serve_start 2 --seed 7
DSTAGE_LOG=warn
test_expect_success 'served' 'serve_up 2'

prefetched() {
	# node $1 has fetched all of epoch $2
	pe=$(stat_val "$1" prefetch_epoch)
	test "$pe" -gt "$2" || { test "$pe" = "$2" &&
		test "$(stat_val "$1" prefetch_done)" = "$(stat_val "$1" prefetch_total)"; }
}

for e in 0 1 2 3; do
	for k in 0 1; do
		test_expect_success "epoch $e node $k: the list, then every file of it through the shim" '
			# readers slower than the fetch: the epoch is in the cache already
			wait_until 30 prefetched '$k' '$e' &&
			r0=$(stat_val '$k' remote_reads) && s0=$(stat_val '$k' stalls) &&
			c0=$(stat_val '$k' cache_reads) &&
			shim_on '$k' cat "$MOUNT/.dstage/epochs/'$e'/all" >list.'$e.$k' &&
			test -s list.'$e.$k' &&
			sed "s|^|$MOUNT/|" list.'$e.$k' | shim_on '$k' xargs -d "\n" cat >got &&
			sed "s|^|src/|" list.'$e.$k' | xargs -d "\n" cat >want &&
			cmp got want &&
			r1=$(stat_val '$k' remote_reads) && s1=$(stat_val '$k' stalls) &&
			c1=$(stat_val '$k' cache_reads) &&
			echo "remote $r0 -> $r1, stalls $s0 -> $s1, cache $c0 -> $c1" &&
			test "$r1" = "$r0" && test "$s1" = "$s0" && test "$c1" -gt "$c0"
		'
	done
	test_expect_success "epoch $e: the two lists are one permutation of the training set" '
		cat list.'$e'.0 list.'$e'.1 | sort >all.'$e' &&
		test_cmp train.sorted all.'$e' &&
		test "$(wc -l <list.'$e'.0)" = "$(wc -l <list.'$e'.1)"
	'
done

test_expect_success 'every epoch has its own lists' '
	! cmp -s list.0.0 list.1.0 && ! cmp -s list.1.0 list.2.0 && ! cmp -s list.2.1 list.3.1
'

test_expect_success 'readers l-of-n split the node share like DistributedSampler' '
	shim_on 1 cat "$MOUNT/.dstage/epochs/3/0-of-3" >r0 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/3/1-of-3" >r1 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/3/2-of-3" >r2 &&
	awk "NR % 3 == 1" list.3.1 >w0 && test_cmp w0 r0 &&
	awk "NR % 3 == 2" list.3.1 >w1 && test_cmp w1 r1 &&
	cat r0 r1 r2 | sort -u >u && sort list.3.1 >l && test_cmp l u
'

test_expect_success 'a C reader following its list reads only local or cached bytes' '
	wait_until 30 prefetched 0 4 &&
	"$T/serve-read" -e 4 -c "$JOBDIR" 0 >out && cat out &&
	grep -q "remote=0 stalls=0 " out && grep -q "errors=0" out &&
	! grep -q "cache=0 " out
'

test_expect_success 'old epochs are released: at most two caches live' '
	wait_until 30 prefetched 0 5 &&
	ls "$JOBDIR/0/epochs" >caches && cat caches &&
	test "$(grep -c "^[0-9]" caches)" -le 2 &&
	! grep -q "^[0-3]\." caches
'

test_expect_success 'per-epoch figures in serve.status and the log' '
	grep "^epoch\.3=" "$JOBDIR/0/serve.status" &&
	grep -q "also read here in epoch" serve.log
'

test_expect_success 'dstage status shows each node'"'"'s last epoch: locality and randomness' '
	"$DSTAGE" status --to "$SHM" --job "$JOB" >status &&
	test_grep "^node 0 epoch [0-9]*: share [0-9]* samples, [0-9]*% local (L=0 expects [0-9]*%), moved" status &&
	test_grep "^node 1 epoch .*also held the epoch before" status
'

serve_stop
test_expect_success 'stopped cleanly; the caches are gone, the store is kept' '
	test "$(cat serve.rc)" = 0 &&
	! test -e "$JOBDIR/0/epochs" && test -s "$JOBDIR/0/store"
'
test_done
