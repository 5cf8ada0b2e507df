#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch, unmodified, on separate hosts (t/lib-hosts.sh): each
# host has its own /dev/shm, hostname and network; MPI goes over TCP
# (UCX_TLS=tcp,self).  The training step on every host, through the shim:
# every file of the dataset (most of them held only by another host) equals
# the source, three epochs' lists form a permutation of the training set
# and every byte read in list order is right; each host's /dev/shm holds
# only its own node store; `dstage status` from any host shows every node
# while the service runs, and says when it does not; stop and clean leave
# nothing on any host.  Then stage-in.sbatch, status and clean.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
uid=$(id -u)
hosts_job_env
hosts_job_start

submit_nodes=$n submit_timeout=180 # submit OUT SCRIPT (t/lib-slurm.sh): every host, 180 s

cat >node-check.sh <<\EOF
#!/bin/sh
rec=$1 k=$SLURM_NODEID m=$DSTAGE_MOUNT
hostname >"$rec/host.$k"
ls -A "$DSTAGE_STORE" | grep -x '[0-9]*' >"$rec/nodedirs.$k"
dstage status --to "$DSTAGE_DIR" >"$rec/status.$k" 2>&1 || exit 1
find "$m" -type f | sort | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/sums.$k" || exit 1
for e in 0 1 2; do
	cat "$m/.dstage/epochs/$e/all" >"$rec/epoch.$e.$k" || exit 1
	sed "s|^|$m/|" "$rec/epoch.$e.$k" | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/esums.$e.$k" ||
		exit 1
done
# the figures after the reads, once the service has gathered them again
sleep 1.5
dstage status --to "$DSTAGE_DIR" >"$rec/status-end.$k" 2>&1 || exit 1
echo "node $k checked"
EOF

test_expect_success 'the sample dataset packed on the shared file system' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums &&
	(cd src && find . -type f ! -path "./val/*" | sed "s|^\./||" | sort) >train.list &&
	mkdir rec
'

test_expect_success "sbatch -N$n train.sbatch on $n hosts: stage, serve, the training step, exit 0" '
	DSTAGE_PACK=$TRASH/pack DSTAGE_SEED=3 \
		submit t1.out "$JOBS/train.sbatch" sh "$TRASH/node-check.sh" "$TRASH/rec" &&
	job=$(job_of t1.out.sb) && echo $job >job1 &&
	test_grep "service up on $n node(s)" t1.out &&
	test "$(grep "^node [0-9]* checked$" t1.out | sort -u | wc -l)" = $n &&
	test_grep "node stores removed from $DSTAGE_DIR" t1.out &&
	! grep "dstage stop failed\|the service step ended with exit\|still running" t1.out
'

test_expect_success 'each node ran on its own host and saw only its own node store' '
	for k in $(seq 0 $((n - 1))); do
		echo n$((k + 1)) >want && test_cmp want rec/host.$k &&
		echo $k >want && test_cmp want rec/nodedirs.$k || exit 1
	done
'

test_expect_success 'on every host, every file read through the mount equals the source' '
	for k in $(seq 0 $((n - 1))); do test_cmp src.sums rec/sums.$k || exit 1; done
'

test_expect_success 'remote reads: every node read files held only by another host, as status shows on every host' '
	for k in $(seq 0 $((n - 1))); do
		cat rec/status-end.$k &&
		for j in $(seq 0 $((n - 1))); do
			awk -v j=$j "\$1 == j && \$9 > 0 { ok = 1 } END { exit !ok }" rec/status-end.$k ||
				{ echo "host $k: node $j shows no remote read"; exit 1; }
		done || exit 1
	done
'

for e in 0 1 2; do
	test_expect_success "epoch $e: the lists of all hosts are a permutation of the training set, bytes right" '
		cat rec/epoch.'$e'.* | sort -u >union &&
		test_cmp train.list union &&
		for k in $(seq 0 $((n - 1))); do
			awk "NR == FNR { s[\$2] = \$1; next } s[\$2] != \$1 { print; bad = 1 } END { exit bad }" \
				src.sums rec/esums.'$e'.$k &&
			test "$(wc -l <rec/esums.'$e'.$k)" = "$(wc -l <rec/epoch.'$e'.$k)" || exit 1
		done
	'
done

test_expect_success 'dstage status on every host shows every node of the job' '
	for k in $(seq 0 $((n - 1))); do
		cat rec/status.$k &&
		for j in $(seq 0 $((n - 1))); do
			grep -q "^$j " rec/status.$k || { echo "host $k: node $j missing"; exit 1; }
		done
	done
'

test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'

test_expect_success "R=2: train.sbatch with DSTAGE_REPLICAS=2, hard-soak checks every byte of 3 epochs on every host" '
	DSTAGE_PACK=$TRASH/pack DSTAGE_REPLICAS=2 DSTAGE_SEED=7 \
		submit t2.out "$JOBS/train.sbatch" sh -c "\"\$0\" \"\$DSTAGE_MOUNT\" \"\$1\" 3 >\"\$2.\$SLURM_NODEID\"" \
		"$T/hard-soak" "$TRASH/src" "$TRASH/soak" &&
	test_grep "R=2" t2.out &&
	for k in $(seq 0 $((n - 1))); do
		cat soak.$k &&
		test "$(grep -c "^epoch=.* errors=0$" soak.$k)" = 3 || exit 1
	done &&
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'

test_expect_success "sbatch -N$n stage-in.sbatch on $n hosts: every node staged, its figures" '
	DSTAGE_PACK=$TRASH/pack submit s1.out "$JOBS/stage-in.sbatch" &&
	job=$(job_of s1.out.sb) && echo $job >job2 &&
	for k in $(seq 0 $((n - 1))); do
		grep -q "^$k  *[1-9]" s1.out || { echo "node $k: no figures"; exit 1; }
	done
'

test_expect_success 'with no service, dstage status on a host says so and shows its own node only' '
	job=$(cat job2) &&
	hosts_exec 2 "$DSTAGE" status --to "$DSTAGE_DIR" --job $job >st2 2>st2.err &&
	cat st2 st2.err &&
	test_grep "^dstage: status: .*: service down: figures of the node(s) stored on this host only" st2.err &&
	test "$(grep -c "^[0-9]" st2)" = 1 && grep -q "^1 " st2
'

test_expect_success 'node identity outside Slurm: a reader on host 2 finds node 1 by its hostname (by-host)' '
	job=$(cat job2) &&
	hosts_exec 2 readlink "$DSTAGE_DIR/dstage.$uid.$job/by-host/n2" >link &&
	echo 1 >want && test_cmp want link &&
	hosts_exec 2 env -u SLURM_NODEID -u DSTAGE_NODE sh -c "
		eval \"\$(\"$DSTAGE\" env --to \"$DSTAGE_DIR\" --job $job)\" &&
		ok=0 && for f in \$(cat \"$TRASH/train.list\"); do
			if cat \"\$DSTAGE_MOUNT/\$f\" >got 2>/dev/null; then
				cmp got \"$TRASH/src/\$f\" || exit 1; ok=\$((ok + 1))
			fi
		done && echo \$ok" >nread &&
	test "$(cat nread)" -gt 0 &&
	hosts_exec 2 "$DSTAGE" status --to "$DSTAGE_DIR" --job $job >st2b 2>/dev/null &&
	awk "\$1 == 1 && \$7 > 0 { ok = 1 } END { exit !ok }" st2b
'

test_expect_success 'srun dstage clean on every host leaves nothing on any host' '
	job=$(cat job2) &&
	timeout -k 5 60 srun -N$n --ntasks-per-node=1 "$DSTAGE" clean --to "$DSTAGE_DIR" --job $job &&
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'

test_done
