#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The epoch shuffle over a node set (common/nodeset.c, docs/failover.md), as
# `dstage epoch` and the shim compute it from JOBDIR/nodes: for sets of 4,
# 3, 2 and 1 of 4 staged nodes (R = 2), with and without --locality, over
# several epochs: each epoch a permutation of the training set with equal
# shares; the full set gives exactly the lists of a job that never lost a
# node; --locality 1 over the survivors keeps every sample on a holder when
# the placement allows; the shim's lists are dstage epoch's.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

ep() { "$DSTAGE" epoch --to "$SHM" --job "$JOB" "$@"; }
conf() {
	printf "version=1\nseed=%s\nlocality=%s\ndrop_last=%s\n" "$1" "$2" "$3" >"$JOBDIR/epoch.conf"
}
nodes_file() { # FROM SET
	printf "version=1\nstaged=4\nfailover=1\nfrom=0 nodes=0-3\nfrom=%s nodes=%s\n" "$1" "$2" >"$JOBDIR/nodes"
}

test_expect_success 'four nodes staged with R=2' '
	make_samples src 25 &&
	pack_stage src 4 -R 2 &&
	(cd src/train && find . -type f | sed "s|^\./|train/|" | sort) >train.sorted &&
	"$DSTAGE_TEST_BUILD/t/index-holders" "$JOBDIR/0/index" >holders
'
test_expect_success 'no history: the lists of every node, as before' '
	conf 3 0 0 && rm -f "$JOBDIR/nodes" &&
	for k in 0 1 2 3; do ep --node $k 4 >full.$k || exit 1; done &&
	nodes_file 9 0-3 && for k in 0 1 2 3; do ep --node $k 4 | cmp - full.$k || exit 1; done
'
for set in 0-3 0-1,3 1,3 2; do
	for loc in 0 0.5 1; do
		for drop in 0 1; do
			test_expect_success "set $set, locality $loc, drop_last $drop: permutations, equal shares" '
				conf 7 '$loc' '$drop' && rm -f "$JOBDIR/nodes" &&
				for e in 0 1; do
					for k in 0 1 2 3; do ep --node $k $e >pre.$e.$k || exit 1; done
				done &&
				nodes_file 2 '$set' &&
				ks=$(echo '$set' | awk -F, "{ for (i = 1; i <= NF; i++) { n = split(\$i, r, \"-\"); if (n == 1) r[2] = r[1]; for (j = r[1]; j <= r[2]; j++) printf \"%d \", j } }") &&
				nk=$(echo $ks | wc -w) && n=$(wc -l <train.sorted) &&
				if [ '$drop' = 1 ]; then s=$((n / nk)); else s=$(((n + nk - 1) / nk)); fi &&
				for e in 2 3 5; do
					: >all.$e &&
					for k in $ks; do
						ep --node $k $e >l.$e.$k && test "$(wc -l <l.$e.$k)" = $s &&
						cat l.$e.$k >>all.$e || exit 1
					done &&
					sort -u all.$e >u.$e &&
					if [ '$drop' = 1 ]; then
						test "$(wc -l <u.$e)" = $((s * nk)) && comm -23 u.$e train.sorted | test_cmp /dev/null -
					else
						test_cmp train.sorted u.$e
					fi || exit 1
				done &&
				# before the change (from=2): the full set, as if no node was lost
				for e in 0 1; do
					for k in 0 1 2 3; do ep --node $k $e | cmp - pre.$e.$k || exit 1; done
				done
			'
		done
	done
done
test_expect_success 'epochs before the change keep the full set: epoch 1 = a job that never lost a node' '
	conf 3 0 0 && rm -f "$JOBDIR/nodes" && ep --node 1 1 >before &&
	nodes_file 2 0-1,3 && ep --node 1 1 | cmp - before &&
	! ep --node 1 2 | cmp -s - before
'
# with R=2 the placement here pairs nodes (0,1) and (2,3): after node 2 is
# lost node 3 alone holds half the samples, so not every share can be local;
# L=1 keeps the most that can be (85 of 102 slots here), L=0 about half
test_expect_success 'locality 1 over the survivors 0,1,3: most samples on a node holding them' '
	held() { # LIST NODE: how many lines of LIST node NODE holds
		awk -v k=$2 "NR == FNR { h[\$1] = \$2; next } { n = split(h[\$1], a, \",\")
			for (i = 1; i <= n; i++) if (a[i] == k) { c++; break } } END { print c + 0 }" holders $1
	}
	nodes_file 1 0-1,3 &&
	for k in 0 1 3; do
		conf 7 1 0 && ep --node $k 3 >loc1.$k && conf 7 0 0 && ep --node $k 3 >loc0.$k &&
		h1=$(held loc1.$k $k) h0=$(held loc0.$k $k) n=$(wc -l <loc1.$k) &&
		echo "node $k: L=1 $h1/$n held, L=0 $h0/$n" &&
		t1=$((${t1:-0} + h1)) t0=$((${t0:-0} + h0)) tn=$((${tn:-0} + n)) || exit 1
	done &&
	echo "all: L=1 $t1/$tn, L=0 $t0/$tn" &&
	test $((t1 * 10)) -ge $((tn * 8)) && test $((t0 * 10)) -le $((tn * 7))
'
test_expect_success 'the shim gives the lists dstage epoch gives, for the set' '
	conf 7 0.5 0 && nodes_file 1 0-1,3 &&
	for k in 0 1 3; do
		ep --node $k 4 >x.$k && test -s x.$k && ep --node $k 4 1-of-2 >y.$k && test -s y.$k &&
		shim_on $k cat "$MOUNT/.dstage/epochs/4/all" | cmp - x.$k &&
		shim_on $k cat "$MOUNT/.dstage/epochs/4/1-of-2" | cmp - y.$k || exit 1
	done &&
	! shim_on 2 cat "$MOUNT/.dstage/epochs/4/all" 2>err && cat err &&
	test_grep "epochs/4/all: No such file or directory" err
'
test_expect_success 'the set of an epoch: dstage epoch --nodes-of' '
	test "$(ep --nodes-of 0)" = "0-3 of 4" && test "$(ep --nodes-of 1)" = "0-1,3 of 4" &&
	test "$(ep --nodes-of 99)" = "0-1,3 of 4"
'
test_done
