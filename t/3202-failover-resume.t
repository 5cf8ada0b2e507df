#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Exact resume (docs/failover.md): a checkpoint at sample k of epoch e,
# saved as a small JSON state (dstage epoch --state, EpochSampler.save_state).
# Same nodes and readers: every reader reads exactly the rest of its list
# (what an uninterrupted run reads).  After a lost node (restart on the
# survivors), and on a new job staged on 2 nodes with 3 readers each: every
# sample of epoch e not read before the checkpoint is read exactly once.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

PY=/usr/bin/python3
E=2 K=5

test_expect_success 'four nodes staged with R=2' '
	make_samples src 24 &&
	pack_stage src 4 -R 2 &&
	(cd src/train && find . -type f | sed "s|^\./|train/|" | sort) >train.sorted
'
serve_start 4 --failover --seed 5
test_expect_success 'served' 'serve_up 4'

ep() { "$DSTAGE" epoch --to "$SHM" --job "$JOB" "$@"; }

test_expect_success 'dstage epoch gives the lists the shim gives' '
	for k in 0 1 2 3; do for l in 0 1; do
		shim_on $k cat "$MOUNT/.dstage/epochs/$E/$l-of-2" >list.$k.$l &&
		ep --node $k $E $l-of-2 | cmp - list.$k.$l || exit 1
	done; done &&
	ep --nodes-of $E >set && test "$(cat set)" = "0-3 of 4"
'
test_expect_success 'the state of a checkpoint at sample 5 of epoch 2, 2 readers per node' '
	ep --state $E $K --readers 2 >state.json && cat state.json &&
	grep -q "\"epoch\": 2, \"k\": 5, \"readers\": 2, \"nodes\": \"0-3\"" state.json &&
	grep -q "\"seed\": 5," state.json
'
test_expect_success 'what was read before the checkpoint: the first 5 of every list' '
	for k in 0 1 2 3; do for l in 0 1; do head -n $K list.$k.$l || exit 1; done; done >heads &&
	sort -u heads >read
'
test_expect_success 'same nodes, same readers: exactly the rest of each list' '
	for k in 0 1 2 3; do for l in 0 1; do
		ep --node $k --resume state.json $l-of-2 >rest.$k.$l &&
		tail -n +$((K + 1)) list.$k.$l | cmp - rest.$k.$l || exit 1
	done; done
'
# One Python process per node (both readers, both ways): this case ran 17
# under the shim, and under a load of 13 took over 100 s of the first
# service's life (docs/mpi.md, "Tests under Open MPI").
test_expect_success 'EpochSampler: resume=STATE and start=k give the same' '
	cat >samp.py <<-\EOF &&
	import os, sys
	sys.path.insert(0, os.environ["PYDIR"])
	import dstage
	paths = sorted(os.path.relpath(os.path.join(d, f), os.environ["DSTAGE_MOUNT"])
	               for d, _, fs in os.walk(os.path.join(os.environ["DSTAGE_MOUNT"], "train")) for f in fs)
	class DS:
	    pass
	ds = DS(); ds.paths = paths
	if sys.argv[1] == "save":
	    dstage.EpochSampler(ds, rank=0, num_replicas=2, epoch=2).save_state(sys.argv[2], 5)
	    sys.exit(0)
	k = sys.argv[1]
	for l in (0, 1):
	    for mode in ("resume", "start"):
	        if mode == "resume":
	            s = dstage.EpochSampler(ds, rank=l, num_replicas=2, resume="state.json")
	        else:
	            s = dstage.EpochSampler(ds, rank=l, num_replicas=2, epoch=2, start=5)
	        with open("py.%s.%s.%d" % (mode, k, l), "w") as out:
	            for i in s:
	                print(paths[i], file=out)
	            s.set_epoch(3)
	            print("next", len(list(s)), file=out)
	EOF
	for k in 0 1 2 3; do
		shim_on $k env PYDIR="$SRCDIR/io/python" "$PY" samp.py $k || exit 1
		for l in 0 1; do
			grep -v ^next py.resume.$k.$l | cmp - rest.$k.$l && cmp py.resume.$k.$l py.start.$k.$l &&
			test "$(sed -n "s/^next //p" py.resume.$k.$l)" = "$(wc -l <list.$k.$l)" || exit 1
		done
	done &&
	shim_on 1 env PYDIR="$SRCDIR/io/python" "$PY" samp.py save state.py.json &&
	cmp state.json state.py.json
'
test_expect_success 'lose node 2 mid-epoch 2' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/$E/all" >/dev/null &&
	kill -KILL "$(node_pid 2)"
'
serve_wait
serve_start 3 --nodes 0-1,3 --seed 5
test_expect_success 'restarted on 0, 1, 3' '
	wait_until 60 sh -c "for i in 0 1 3; do grep -qs ^state=running $JOBDIR/\$i/serve.status || exit 1; done"
'
# every remaining sample once: the rest lists are disjoint, disjoint from
# what was read, and together with it the whole training set
check_rest() {
	sort "$@" >rest.all && sort -u "$@" >rest.uniq && test_cmp rest.uniq rest.all &&
	sort -u rest.all read >union && test_cmp train.sorted union &&
	test -z "$(comm -12 rest.uniq read)"
}
test_expect_success 'on the survivors, 3 nodes x 2 readers: every remaining sample exactly once' '
	for k in 0 1 3; do for l in 0 1; do ep --node $k --resume state.json $l-of-2 >r3.$k.$l || exit 1; done; done &&
	check_rest r3.* &&
	wc -l r3.* | sed "\$d" | awk "{print \$1}" | sort -n | sed -n "1p;\$p" | paste -sd" " >mm &&
	read lo hi <mm && test $((hi - lo)) -le 1
'
test_expect_success 'node 2 is not one of them: said so' '
	! ep --node 2 --resume state.json 0-of-2 2>err && cat err && grep -q "not one of the nodes" err
'
serve_stop
JOB2=${JOB}b
test_expect_success 'a new job staged on 2 nodes (same pack, same seed)' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job $JOB2 --node-per-rank -q &&
	mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job $JOB2 --node-per-rank --seed 5 >serve2.log 2>&1 &
	p=$! && wait_until 60 test -S "$SHM/dstage.$(id -u).$JOB2/1/sock" &&
	"$DSTAGE" stop --to "$SHM" --job $JOB2 && wait $p
'
test_expect_success 'on 2 nodes x 3 readers: every remaining sample exactly once' '
	for k in 0 1; do for l in 0 1 2; do
		"$DSTAGE" epoch --to "$SHM" --job $JOB2 --node $k --resume state.json $l-of-3 >r2.$k.$l || exit 1
	done; done &&
	check_rest r2.*
'
test_expect_success 'a state of another shuffle is refused, named' '
	sed "s/\"seed\": 5/\"seed\": 6/" state.json >bad.json &&
	! ep --node 0 --resume bad.json 2>err && cat err && grep -q "bad.json.: taken with seed 6" err &&
	echo "{}" >bad2.json && ! ep --node 0 --resume bad2.json 2>err && grep -q "not a dstage resume state" err
'
rm -rf "$SHM/dstage.$(id -u).$JOB2"
test_done
