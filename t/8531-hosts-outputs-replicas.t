#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Replicated outputs on separate hosts (t/lib-hosts.sh: 4 hosts, each with
# its own /dev/shm and network, MPI over TCP; docs/outputs.md "Replicated
# outputs"): jobs/train.sbatch, unmodified, with DSTAGE_OUTPUTS, a drain
# too slow to finish (DSTAGE_DRAIN_RATE=1) and --outputs-replicas 2
# (DSTAGE_SERVE_OPTS).  In the first training step every node writes an
# output; once every other node's is closed, node 2 closes its own, then
# at once SIGKILLs the service on its host and removes its store there
# (only a process on host n3 can), before its drain.  The job recovers the
# outputs on the survivors (node 2's from its copy on node 3, host n4),
# restarts the service and the training on nodes 0, 1, 3, which write
# again.  Every output of both steps is in the drain directory once, byte
# for byte; the job exits 0 and leaves no store on any host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=4
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8531-$$
UCX_TLS=tcp,self
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT UCX_TLS DSTAGE_HOSTS
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT DSTAGE_FAILOVER DSTAGE_RESTARTS DSTAGE_NODE DSTAGE_RESTART \
	DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE DSTAGE_FAULT

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
[ "$n" -ge 4 ] || skip_all "4 hosts needed (DSTAGE_HOSTS=$n)"
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done

cat >node-train.sh <<\EOF
#!/bin/sh
rec=$1 k=$DSTAGE_NODE m=$DSTAGE_MOUNT r=${DSTAGE_RESTART:-x}
echo "$SLURM_NODEID $k $(hostname)" >"$rec/ran.$r.$k"
if [ "$r" = 0 ]; then
	head -c 266666 /dev/urandom >"$rec/before.$k.ref" || exit 1
	if [ "$k" = 2 ]; then
		# every other node's output closed (listed here) first
		for j in 0 1 3; do
			i=0
			while [ ! -e "$m/out/before.$j" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
		done
		cp "$rec/before.2.ref" "$m/out/before.2" || exit 1
		# at once, before its drain: the service and the store on this host
		kill -KILL "$(sed -n 's/^pid=//p' "$DSTAGE_STORE/2/serve.status")"
		echo closed >"$rec/closed.2"
		rm -rf "$DSTAGE_STORE/2"
		exit 1
	fi
	cp "$rec/before.$k.ref" "$m/out/before.$k" || exit 1
	echo closed >"$rec/closed.$k"
	while :; do sleep 1; done
fi
# a few bytes: the drain (1 byte/s) has them in seconds
echo "after $k" >"$rec/after.$k.ref" && cp "$rec/after.$k.ref" "$m/out/after.$k" || exit 1
echo "node $k wrote again"
EOF

test_expect_success 'a small dataset, packed' '
	"$T/mksample" -c 4 -n 8 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack && mkdir rec
'
test_expect_success "train.sbatch on $n hosts, --outputs-replicas 2: host n3 lost right after a close; recovered, restarted on 0,1,3" '
	rc=0 && {
	DSTAGE_PACK=$TRASH/pack DSTAGE_REPLICAS=2 DSTAGE_LOG=warn \
		DSTAGE_OUTPUTS=out DSTAGE_DRAIN_TO=$TRASH/drain DSTAGE_DRAIN_RATE=1 \
		DSTAGE_SERVE_OPTS="--outputs-replicas 2" \
		sbatch_wait 200 -N$n --export=ALL -o "$TRASH/job-%j.out" \
		"$JOBS/train.sbatch" sh "$TRASH/node-train.sh" "$TRASH/rec" >sb 2>&1 || rc=$?; } &&
	cat sb && job=$(sed -n "s/^Submitted batch job //p" sb) && cat "job-$job.out" >t.out &&
	cat t.out && test $rc = 0 &&
	test_grep "failover: restarting the service on the survivors 0,1,3 (of 4)" t.out &&
	test_grep "training step: exit 0" t.out &&
	test "$(grep -c "^node [013] wrote again$" t.out)" = 3
'
test_expect_success 'every node closed its output before the loss; node 2 on host n3' '
	for k in 0 1 2 3; do test -e rec/closed.$k || exit 1; done &&
	test "$(cat rec/ran.0.2)" = "2 2 n3" && test ! -e rec/ran.1.2
'
test_expect_success 'node 2 s output recovered from its copy on node 3 (host n4), byte for byte' '
	grep "node 3: .before.2.: recovered from the node.s output area" t.out &&
	cmp rec/before.2.ref drain/before.2
'
test_expect_success 'every output of both steps in the drain directory once, byte for byte' '
	for k in 0 1 2 3; do cmp rec/before.$k.ref drain/before.$k || exit 1; done &&
	for k in 0 1 3; do cmp rec/after.$k.ref drain/after.$k || exit 1; done &&
	ls drain | grep -v "\.dstage-drain\." | sort >got &&
	printf "%s\n" after.0 after.1 after.3 before.0 before.1 before.2 before.3 >want && test_cmp want got
'
test_expect_success 'no temporary of a survivor is left (the lost node s own is its only litter)' '
	{ ls drain | grep "\.dstage-drain\." >tmps || :; } &&
	cat tmps && ! grep -v "^before\.2\.dstage-drain\.2\." tmps
'
test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'
test_done
