#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Slurm test harness (t/lib-slurm.sh): a real 4-node Slurm cluster on
# 127.0.0.1 (one slurmctld, four slurmd -N nN, a private munged) starts,
# runs srun, MPICH over --mpi=pmi2 and sbatch --wait jobs, and stops without
# leaving a daemon behind.  The jobs/ tests build on it.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

# A test that died with its cluster running (kill -9: no trap ran): the next
# slurm_start must stop that orphaned cluster and choose its own ports.
orphan=$(exec 2>/dev/null; sh -c '
	SRCDIR="$1"
	. "$SRCDIR/t/lib-slurm.sh"
	slurm_start >/dev/null 2>&1 || exit 0
	echo "$slurm_dir $(cat "$slurm_dir"/run/*.pid | tr "\n" " ")"
	kill -9 $$
' sh "$SRCDIR" || :)
orphan_dir=${orphan%% *}
orphan_pids=${orphan#* }

# An Epilog (slurm_extra_conf) that records each node's end of each job.
cat >"$TRASH/epilog.sh" <<EOF
#!/bin/sh
echo "\$SLURMD_NODENAME \$SLURM_JOB_ID" >>"$TRASH/epilog.out"
EOF
chmod +x "$TRASH/epilog.sh"
slurm_extra_conf="Epilog=$TRASH/epilog.sh"

slurm_start || skip_all "$slurm_skip_reason"
say "# cluster in $slurm_dir, slurmctld port $slurm_ctld_port, slurmd ports $slurm_node_ports"

# our own daemons, to check after slurm_stop
our_dir=$slurm_dir
our_pids=$(cat "$slurm_dir"/run/*.pid | tr '\n' ' ')
# running: PID is alive and runs with the cluster's files (not a zombie)
running() {
	[ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q dstage-slurm
}

if [ -n "$orphan_dir" ]; then
	test_expect_success 'a cluster left by a killed test was stopped and removed' '
		for p in $orphan_pids; do
			if running $p; then echo "orphan daemon $p still runs"; exit 1; fi
		done &&
		test ! -e "$orphan_dir"
	'
else
	test_skip 'a cluster left by a killed test was stopped and removed' 'no orphan made'
fi

test_expect_success 'SLURM_CONF points at the private slurm.conf' '
	test "$SLURM_CONF" = "$slurm_dir/slurm.conf" &&
	grep -qx "MpiDefault=pmi2" "$SLURM_CONF" &&
	grep -qx "ProctrackType=proctrack/linuxproc" "$SLURM_CONF" &&
	grep -q "^AuthInfo=socket=$slurm_dir/munge/munge.socket" "$SLURM_CONF" &&
	test -S "$slurm_dir/munge/munge.socket"
'

test_expect_success 'sinfo shows four idle nodes' '
	sinfo -h -N -o "%N %t %P" >sinfo.out &&
	cat >expect <<-\EOF &&
	n1 idle debug*
	n2 idle debug*
	n3 idle debug*
	n4 idle debug*
	EOF
	sort sinfo.out >actual &&
	test_cmp expect actual
'

test_expect_success 'srun -N4: one task per node, SLURM_NODEID 0..3' '
	timeout -k 5 60 srun -N4 --ntasks-per-node=1 \
		sh -c "echo \$SLURM_NODEID \$SLURMD_NODENAME \$SLURM_PROCID \$SLURM_NNODES" >out &&
	sort out >actual &&
	cat >expect <<-\EOF &&
	0 n1 0 4
	1 n2 1 4
	2 n3 2 4
	3 n4 3 4
	EOF
	test_cmp expect actual
'

test_expect_code 7 'srun passes on a failing task'"'"'s exit code' '
	timeout -k 5 60 srun -N4 --ntasks-per-node=1 sh -c "exit \$((SLURM_NODEID == 2 ? 7 : 0))"
'

if test_have_prereq MPICC; then
	cat >"$TRASH/allreduce.c" <<-\EOF
	#include <mpi.h>
	#include <stdio.h>
	#include <stdlib.h>
	int main(int argc, char **argv)
	{
		int rank, size, sum = 0;
		const char *node;
		MPI_Init(&argc, &argv);
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
		MPI_Comm_size(MPI_COMM_WORLD, &size);
		MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		node = getenv("SLURM_NODEID");
		printf("rank %d of %d node %s sum %d\n", rank, size, node ? node : "-", sum);
		MPI_Finalize();
		return 0;
	}
	EOF
	test_expect_success 'compile an MPICH program with mpicc.mpich' '
		mpicc.mpich -o "$TRASH/allreduce" "$TRASH/allreduce.c"
	'
	test_expect_success 'srun -N4 --mpi=pmi2: four MPICH ranks, one per node, MPI_Allreduce' '
		timeout -k 5 60 srun -N4 --ntasks-per-node=1 --mpi=pmi2 "$TRASH/allreduce" >out &&
		sort out >actual &&
		cat >expect <<-\EOF &&
		rank 0 of 4 node 0 sum 6
		rank 1 of 4 node 1 sum 6
		rank 2 of 4 node 2 sum 6
		rank 3 of 4 node 3 sum 6
		EOF
		test_cmp expect actual
	'
	have_mpi=1
else
	test_expect_success MPICC 'compile an MPICH program with mpicc.mpich' :
	test_expect_success MPICC 'srun -N4 --mpi=pmi2: four MPICH ranks, one per node, MPI_Allreduce' :
	have_mpi=
fi

# A batch script: the MPI step (when there is MPICH) and a plain step, its
# exit status the job's.
cat >"$TRASH/job.sbatch" <<\EOF
#!/bin/sh
#SBATCH --job-name=dstage-harness
#SBATCH --output=job-%j.out
set -e
echo "job $SLURM_JOB_ID nodes $SLURM_JOB_NODELIST n $SLURM_JOB_NUM_NODES"
if [ -n "$ALLREDUCE" ]; then
	srun --ntasks-per-node=1 "$ALLREDUCE"
fi
srun --ntasks-per-node=1 sh -c 'echo step node $SLURM_NODEID'
exit "${JOB_EXIT:-0}"
EOF

test_expect_success 'sbatch -N4 --wait: a batch script runs srun on four nodes, exit 0' '
	ALLREDUCE=${have_mpi:+$TRASH/allreduce} JOB_EXIT=0 \
		timeout -k 5 90 sbatch -N4 --wait --export=ALL "$TRASH/job.sbatch" >sb.out &&
	job=$(sed -n "s/^Submitted batch job //p" sb.out) &&
	test -n "$job" &&
	cat job-$job.out &&
	grep -qx "job $job nodes n\[1-4\] n 4" job-$job.out &&
	test "$(grep -c "^step node [0-3]$" job-$job.out)" = 4 &&
	if [ -n "$have_mpi" ]; then
		test "$(grep -c "^rank [0-3] of 4 node [0-3] sum 6$" job-$job.out)" = 4
	fi
'

test_expect_success 'the Epilog of slurm_extra_conf ran on the four nodes' '
	job=$(sed -n "s/^Submitted batch job //p" sb.out) &&
	i=0 &&
	# the Epilog runs after the job, on each node in its own time: 60 s is
	# the bound of one that never runs (10 s could be reached under load)
	while [ "$(grep -c " $job$" epilog.out 2>/dev/null)" != 4 ] && [ $i -lt 300 ]; do
		sleep 0.2 && i=$((i + 1)) || exit 1
	done &&
	printf "n%s $job\n" 1 2 3 4 >expect &&
	grep " $job$" epilog.out | sort >actual &&
	test_cmp expect actual
'

# The shape of jobs/train.sbatch: a service step in the background with
# srun --overlap, the main step beside it on the same nodes, then the
# service stopped.
cat >"$TRASH/overlap.sbatch" <<\EOF
#!/bin/sh
#SBATCH --output=overlap-%j.out
mark=$PWD/mark.$SLURM_JOB_ID
srun --overlap --ntasks-per-node=1 sh -c "touch $mark.\$SLURM_NODEID; exec sleep 60" &
svc=$!
srun --ntasks-per-node=1 sh -c "i=0
	while [ ! -e $mark.\$SLURM_NODEID ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done
	test -e $mark.\$SLURM_NODEID && echo main sees service on \$SLURM_NODEID"
rc=$?
kill $svc
wait $svc
exit $rc
EOF

test_expect_success 'sbatch: a background srun --overlap step runs beside the main step' '
	timeout -k 5 90 sbatch -N4 --wait "$TRASH/overlap.sbatch" >sb2.out &&
	job=$(sed -n "s/^Submitted batch job //p" sb2.out) &&
	cat overlap-$job.out &&
	test "$(grep -c "^main sees service on [0-3]$" overlap-$job.out)" = 4
'

test_expect_code 3 'sbatch --wait passes on the batch script'"'"'s exit code' '
	JOB_EXIT=3 timeout -k 5 90 sbatch -N4 --wait --export=ALL "$TRASH/job.sbatch"
'

# sbatch_wait (t/lib-slurm.sh, what the other Slurm scripts wait with)
# returns what sbatch --wait returns: the script's exit code, 1 for a job a
# signal ended (here the batch shell SIGKILLs itself), 124 after its bound;
# and it returns once the job is over, epilogs included.
cat >"$TRASH/self-kill.sbatch" <<\EOF
#!/bin/sh
#SBATCH --output=self-kill-%j.out
kill -KILL $$
EOF
test_expect_success 'sbatch_wait returns what sbatch --wait returns: 0, 3, 1 for a signal, 124 past its bound' '
	JOB_EXIT=0 test_status 0 sbatch_wait 90 -N4 --export=ALL "$TRASH/job.sbatch" >sb3.out &&
	job=$(job_of sb3.out) &&
	test "$(grep -c " $job$" epilog.out)" = 4 &&
	JOB_EXIT=3 test_status 3 sbatch_wait 90 -N4 --export=ALL "$TRASH/job.sbatch" &&
	test_status 1 timeout -k 5 90 sbatch -N1 --wait "$TRASH/self-kill.sbatch" &&
	test_status 1 sbatch_wait 90 -N1 "$TRASH/self-kill.sbatch" &&
	test_status 124 sbatch_wait 1 -N1 --wrap "sleep 5" &&
	job=$(squeue -h -o %i | head -n 1) && test -n "$job" &&
	scancel "$job"
'

test_expect_success 'the queue is empty afterwards' '
	slurm_wait_idle 20
'

# Stop here (not at exit) to check that nothing is left, the hard way: a
# step still runs (its tasks ignore SIGTERM) and slurmctld has crashed, so
# scancel cannot reach it.
srun -N4 --ntasks-per-node=1 sh -c 'trap "" TERM; sleep 300' >/dev/null 2>&1 &
test_bg $!
# (until the step runs: killing slurmctld before would test nothing)
i=0
while [ -z "$(squeue -h -s -o %i 2>/dev/null)" ] && [ $i -lt 300 ]; do
	sleep 0.2
	i=$((i + 1))
done
sleep 0.5
kill -KILL "$(cat "$slurm_dir/run/slurmctld.pid")"
slurm_stop
test_expect_success 'slurm_stop: the daemons are gone, the state directory removed' '
	test -n "$our_pids" &&
	for p in $our_pids; do
		if running $p; then echo "daemon $p still runs"; exit 1; fi
	done &&
	test ! -e "$our_dir" &&
	test -z "$SLURM_CONF"
'
test_expect_success 'no slurmstepd, task or srun of this cluster is left' '
	for e in /proc/[0-9]*/environ; do
		p=${e#/proc/}; p=${p%/environ}
		test -s /proc/$p/cmdline || continue	# gone, or a zombie
		if { tr "\0" "\n" <"$e"; } 2>/dev/null | grep -qxF "SLURM_CONF=$our_dir/slurm.conf"; then
			echo "left: $p $(tr "\0" " " </proc/$p/cmdline)"; exit 1
		fi
	done
'

test_done
