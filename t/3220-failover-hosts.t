#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch's failover path, unmodified, on separate hosts
# (t/lib-hosts.sh: 4 hosts n1..n4, each with its own network, /dev/shm and
# hostname; Slurm with one slurmd per host; MPI over TCP), R = 2: during
# the first training step host n3 (node 2) is lost: its training task
# SIGKILLs the service on its host, removes its store there (host n3's
# /dev/shm is its own: only a process on n3 can) and fails.  Meanwhile the
# readers of the other hosts read every file of the tree through the shim,
# about half of them held only on other hosts.  The script starts the
# service again on the survivors n1, n2, n4 (nodes 0, 1, 3) and the
# training step again on them.  The pack is moved away after stage-in:
# nothing is staged again.  The readers saw no error before the step
# ended; every file read through the shim on the survivors after the
# restart equals the source, part of it read from other hosts (dstage
# status); epoch 1 is dealt over the survivors; the job exits 0 and leaves
# no store on any host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=4
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t3220-$$
UCX_TLS=tcp,self
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT UCX_TLS DSTAGE_HOSTS
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT DSTAGE_FAILOVER DSTAGE_RESTARTS DSTAGE_NODE DSTAGE_RESTART

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done

cat >node-train.sh <<\EOF
#!/bin/sh
rec=$1 src=$2 pack=$3 k=$DSTAGE_NODE m=$DSTAGE_MOUNT r=${DSTAGE_RESTART:-x}
echo "$SLURM_NODEID $k $(hostname)" >"$rec/ran.$r.$k"
if [ "$r" = 0 ]; then
	[ "$k" = 0 ] && mv "$pack" "$pack.gone"
	if [ "$k" = 2 ]; then
		sleep 2 # the others read meanwhile
		# on this host: its service and its store (in its own /dev/shm)
		ls "$DSTAGE_STORE" >"$rec/lost.ls"
		kill -KILL "$(sed -n 's/^pid=//p' "$DSTAGE_STORE/2/serve.status")"
		rm -rf "$DSTAGE_STORE/2"
		exit 1
	fi
	while :; do
		for f in $(cd "$src" && find train -type f); do
			# a failed read; not the end of the step (srun's TERM)
			cat "$m/$f" >/dev/null 2>>"$rec/cat.$k" ||
				{ rc=$?; [ $rc -gt 128 ] || echo "$f: exit $rc" >>"$rec/err.$k"; }
		done
		echo pass >>"$rec/passes.$k"
	done
fi
find "$m" -type f | sort | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/sums.$k" || exit 1
cat "$m/.dstage/epochs/1/all" >"$rec/e1.$k" || exit 1
dstage status --to "$DSTAGE_DIR" --node "$k" >"$rec/status.$k" 2>&1 || exit 1
echo "node $k read everything"
EOF

test_expect_success 'the sample dataset, packed on the shared file system; its checksums' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums &&
	(cd src && find . -type f ! -path "./val/*" | sed "s|^\./||" | sort) >train.list &&
	mkdir rec
'
test_expect_success "train.sbatch on $n hosts, R=2: host n3 lost in training; service and training restarted on 0,1,3" '
	rc=0 && {
	DSTAGE_PACK=$TRASH/pack DSTAGE_REPLICAS=2 DSTAGE_LOG=warn \
		sbatch_wait 200 -N$n --export=ALL -o "$TRASH/job-%j.out" \
		"$JOBS/train.sbatch" sh "$TRASH/node-train.sh" "$TRASH/rec" "$TRASH/src" "$TRASH/pack" >sb 2>&1 || rc=$?; } &&
	cat sb && job=$(sed -n "s/^Submitted batch job //p" sb) && cat "job-$job.out" >t.out &&
	echo $job >job && cat t.out && test $rc = 0 &&
	test "$(grep -c "staging .* into" t.out)" = 1 &&
	test_grep "service up on $n node(s)" t.out &&
	test_grep "failover: restarting the service on the survivors 0,1,3 (of 4)" t.out &&
	test_grep "failover: service up on 3 node(s)" t.out &&
	test_grep "failover: training step started again on 0,1,3 (DSTAGE_RESTART=1)" t.out &&
	test_grep "training step: exit 0" t.out &&
	test "$(grep -c "^node [013] read everything$" t.out)" = 3
'
test_expect_success 'node 2 was lost on its own host, which held only its own store' '
	cat rec/ran.0.2 && test "$(cat rec/ran.0.2)" = "2 2 n3" &&
	echo 2 >want && grep -x "[0-9]*" rec/lost.ls >got && test_cmp want got
'
test_expect_success 'the readers of the survivors read the whole tree, with no error, until the loss ended the step' '
	for k in 0 1 3; do
		test -s rec/passes.$k && test ! -s rec/err.$k && ! grep "^cat:" rec/cat.$k ||
			{ cat rec/err.$k; exit 1; }
	done
'
test_expect_success 'the second step ran on hosts n1, n2, n4, each task on its own staged node' '
	ls rec && test ! -e rec/ran.1.2 &&
	test "$(cat rec/ran.1.0)" = "0 0 n1" && test "$(cat rec/ran.1.1)" = "1 1 n2" &&
	test "$(cat rec/ran.1.3)" = "2 3 n4"
'
test_expect_success 'the pack was never read again (moved away after stage-in)' '
	test -d pack.gone && test ! -e pack
'
test_expect_success 'every file read through the shim on the survivors equals the source' '
	for k in 0 1 3; do test_cmp src.sums rec/sums.$k || exit 1; done
'
test_expect_success 'each survivor holds part of the tree and read the rest from other hosts after the restart' '
	all=$(wc -l <src.sums) &&
	for k in 0 1 3; do
		cat rec/status.$k &&
		# node files bytes(2) store(2) local cache remote stalls served svc
		awk -v k=$k -v all=$all "\$1 == k && \$2 < all && \$9 > 0 && \$12 == \"up\" { ok = 1 }
			END { exit !ok }" rec/status.$k || exit 1
	done
'
test_expect_success 'epoch 1 is dealt over the survivors: a permutation, equal shares' '
	cat rec/e1.0 rec/e1.1 rec/e1.3 | sort -u | test_cmp train.list - &&
	test "$(wc -l <rec/e1.0)" = "$(wc -l <rec/e1.1)" &&
	test "$(wc -l <rec/e1.0)" = "$(wc -l <rec/e1.3)"
'
test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'
test_done
