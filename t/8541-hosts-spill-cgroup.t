#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The RAM budget in a real memory cgroup on separate hosts (issue 26's
# "on the 4-host bed"): Slurm inside the bed (t/lib-hosts.sh) runs with
# task/cgroup, proctrack/cgroup, CR_Core_Memory and ConstrainRAMSpace=yes,
# so every job step on every host is held to sbatch --mem by a cgroup v1
# memory limit, and each host's /dev/shm is its own tmpfs whose pages are
# charged to the job.  With --mem=80M and DSTAGE_RAM_HEADROOM=32MiB, a pack
# of 48 MiB a host:
#   - without DSTAGE_SPILL, stage refuses on every host before a byte is
#     written, naming the node, the job's cgroup limit, the need and the
#     room; the job exits 1 and nothing is left on any host;
#   - with DSTAGE_SPILL (each host's own node-local disk: a directory of
#     the real disk bound at the same path in each host's private /tmp),
#     the job stages what fits in RAM, spills the rest, and the training
#     step reads every byte right through the shim on every host; each
#     host's RAM part is within the limit less the headroom, the job's
#     cgroup never hit its limit (no OOM kill), and nothing is left.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

test_require MPI

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
uid=$(id -u)
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8541-$$
SPILL=/tmp/dstage-spill-t8541-$$
UCX_TLS=tcp,self
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT UCX_TLS
unset DSTAGE_SPILL DSTAGE_RAM_ROOM DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY \
	DSTAGE_DROP_LAST DSTAGE_BIN DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS \
	DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS DSTAGE_SERVE_TIMEOUT DSTAGE_RAM_HEADROOM

hosts_start || skip_all "$hosts_skip_reason"
# what t/4006 gives the loopback cluster, here with one slurmd per host
slurm_extra_conf="TaskPlugin=task/cgroup
ProctrackType=proctrack/cgroup
SelectTypeParameters=CR_Core_Memory"
slurm_cgroup_conf="ConstrainRAMSpace=yes
ConstrainSwapSpace=no"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
# each host's node-local disk: $TRASH/disk/nI (the machine's disk) bound
# at $SPILL inside host I only (its mount namespace is private)
for i in $(seq 1 $n); do
	mkdir -p "$TRASH/disk/n$i" &&
		hosts_exec $i mkdir -p "$DSTAGE_DIR" "$SPILL" &&
		hosts_exec $i mount --bind "$TRASH/disk/n$i" "$SPILL" ||
		skip_all "cannot bind a disk directory at $SPILL in host $i"
done

submit_nodes=$n submit_timeout=180 # submit OUT SCRIPT (t/lib-slurm.sh): every host, 180 s
nothing_left() {
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" "$SPILL" >left &&
		printf "%s:\n\n%s:\n" "$DSTAGE_DIR" "$SPILL" >none && test_cmp none left || return 1
	done
}

# what a step sees on its host: its memory cgroup, the limit of its job's
cat >cg.sh <<\EOF
#!/bin/sh
p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
j=/sys/fs/cgroup/memory${p%/step_*}
echo "$(hostname) $p $(cat "$j/memory.limit_in_bytes")"
EOF
test_expect_success "the bed's Slurm constrains RAM: a step on each host runs in its --mem cgroup" '
	timeout 60 srun -N$n --mem=64M sh "$TRASH/cg.sh" >cg && cat cg &&
	for i in $(seq 1 $n); do
		grep -q "^n$i /slurm_n$i/uid_$uid/job_[0-9]*/step_[0-9]*/task_0 $((64 << 20))$" cg ||
			{ echo "host n$i: no --mem cgroup"; exit 1; }
	done
'

# the training step on each host: the job's cgroup (limit, OOM kills; its
# peak and failcnt are shown only: the page cache of the spill tier, which
# the kernel reclaims, may take the job to its limit without harm),
# the RAM and spill bytes of its store, every file through the mount
cat >node-check.sh <<\EOS
#!/bin/sh
rec=$1 k=$SLURM_NODEID m=$DSTAGE_MOUNT
p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
j=/sys/fs/cgroup/memory${p%/step_*}
hostname >"$rec/host.$k"
echo "$j" >"$rec/cg.$k"
echo $(($(stat -c %s "$DSTAGE_STORE/$k/store") + $(stat -c %s "$DSTAGE_STORE/$k/index") +
	$(stat -c %s "$DSTAGE_STORE/$k/stats"))) >"$rec/ram.$k"
stat -c %s "$DSTAGE_SPILL/${DSTAGE_STORE##*/}/$k/store" >"$rec/spill.$k" 2>/dev/null
find "$m" -type f | sort | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/sums.$k" || exit 1
cat "$j/memory.limit_in_bytes" >"$rec/limit.$k"
cat "$j/memory.max_usage_in_bytes" >"$rec/peak.$k"
cat "$j/memory.failcnt" >"$rec/failcnt.$k"
# OOM kills in the job's cgroup and its steps' (the service's among them;
# a step that ended is in slurmstepd's "oom-kill event" message instead)
find "$j" -name memory.oom_control | xargs sed -n "s/^oom_kill //p" |
	awk "{ n += \$1 } END { print n + 0 }" >"$rec/oomkill.$k"
echo "node $k checked"
EOS

test_expect_success 'a pack of 192 MiB of incompressible data, 48 MiB a host; its checksums' '
	mkdir -p src/val rec rec2 &&
	for d in a b c d; do
		mkdir -p src/train/$d &&
		for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
			head -c $((4 << 20)) /dev/urandom >src/train/$d/f$i || exit 1
		done
	done &&
	echo val >src/val/labels.txt &&
	"$DSTAGE" pack -q -p 16 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums
'

test_expect_success "sbatch -N$n --mem=80M train.sbatch without DSTAGE_SPILL: refused on every host, exit 1, nothing left" '
	! DSTAGE_PACK=$TRASH/pack DSTAGE_RAM_HEADROOM=32MiB \
		submit t1.out --mem=80M "$JOBS/train.sbatch" sh "$TRASH/node-check.sh" "$TRASH/rec" &&
	job=$(job_of t1.out.sb) &&
	for k in $(seq 0 $((n - 1))); do
		grep "^dstage: stage: node $k: .*not enough room: needs [0-9.]* MiB on host .n[1-9]*. (store 48.0 MiB + .* of index and metadata), room [0-9.]* MiB: cgroup v1 memory limit 80.0 MiB (./sys/fs/cgroup/memory/slurm_n[1-9]*/uid_$uid/job_$job.): usage .*, headroom 32.0 MiB" t1.out ||
			{ echo "no refusal for node $k"; exit 1; }
	done &&
	sed -n "s/^dstage: stage: node [0-9]*: .* on host .\(n[1-9]*\). .*/\1/p" t1.out | sort -u >refused &&
	test "$(wc -l <refused)" = $n &&
	test_grep "dstage stage failed (exit 1)" t1.out &&
	! grep "node [0-9]* checked" t1.out &&
	! grep -i "oom-kill\|killed\|BAD TERMINATION" t1.out &&
	nothing_left
'

test_expect_success "sbatch -N$n --mem=80M train.sbatch with DSTAGE_SPILL: staged in RAM and on each host's disk, trained, every byte right" '
	DSTAGE_PACK=$TRASH/pack DSTAGE_RAM_HEADROOM=32MiB DSTAGE_SPILL=$SPILL \
		submit t2.out --mem=80M "$JOBS/train.sbatch" sh "$TRASH/node-check.sh" "$TRASH/rec2" &&
	job=$(job_of t2.out.sb) &&
	test_grep "^RAM: node 0.s store takes .* of the job.s memory until .dstage clean. (room was .*: cgroup v1 memory limit 80.0 MiB .*; .* spilled to .$SPILL." t2.out &&
	test "$(grep "^node [0-9]* checked$" t2.out | sort -u | wc -l)" = $n &&
	test_grep "training step: exit 0" t2.out &&
	! grep -i "oom-kill\|BAD TERMINATION" t2.out &&
	for k in $(seq 0 $((n - 1))); do
		test_cmp src.sums rec2/sums.$k || exit 1
	done
'

test_expect_success 'on every host: RAM part within the limit less the headroom, the rest spilled, no OOM kill' '
	for k in $(seq 0 $((n - 1))); do
		echo "node $k on $(cat rec2/host.$k) in $(cat rec2/cg.$k): limit $(cat rec2/limit.$k)," \
			"peak $(cat rec2/peak.$k), failcnt $(cat rec2/failcnt.$k), oom_kill $(cat rec2/oomkill.$k)," \
			"ram $(cat rec2/ram.$k), spill $(cat rec2/spill.$k 2>/dev/null)" &&
		grep -q "^/sys/fs/cgroup/memory/slurm_n[1-9]*/uid_$uid/job_[0-9]*$" rec2/cg.$k &&
		test "$(cat rec2/limit.$k)" = $((80 << 20)) &&
		test "$(cat rec2/ram.$k)" -le $((48 << 20)) &&
		test "$(cat rec2/spill.$k)" -gt 0 &&
		test "$(cat rec2/oomkill.$k)" = 0 || exit 1
	done &&
	sort -u rec2/host.* >hosts && test "$(wc -l <hosts)" = $n
'

test_expect_success 'nothing is left in either tier on any host' '
	test_grep "node stores removed from $DSTAGE_DIR" t2.out &&
	! grep "still there" t2.out &&
	nothing_left
'

test_done
