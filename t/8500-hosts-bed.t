#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The multi-host test bed (t/lib-hosts.sh): four hosts, each with its own
# network, mount, UTS and IPC namespace, a Slurm slurmd inside each; ranks
# on four hosts see different /dev/shm and hostnames, MPI (MPICH ch4:ucx with
# UCX_TLS=tcp,self) between them goes through each host's eth0 and ends
# (MPI_Finalize returns: mpi/ucx_close.c, openucx/ucx#8738), and
# everything the bed made is gone after hosts_stop.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

hosts_start || skip_all "$hosts_skip_reason"
say "# hosts n1..n$hosts_n on $hosts_net.0/24, bridge $hosts_bridge, head $hosts_head"

test_expect_success 'every host has its own hostname, address, /dev/shm and /tmp' '
	for i in 1 2 3 4; do
		hosts_exec $i sh -c "
			echo \$(hostname) \$(ip -4 -o addr show eth0 | awk \"{ print \\\$4 }\")
			echo host\$(hostname) >/dev/shm/mark; echo tmp\$(hostname) >/tmp/mark
		" >>out || exit 1
	done &&
	printf "n%s $hosts_net.%s/24\n" 1 1 2 2 3 3 4 4 >expect &&
	test_cmp expect out &&
	for i in 1 2 3 4; do
		hosts_exec $i sh -c "cat /dev/shm/mark /tmp/mark" >got &&
		printf "hostn$i\ntmpn$i\n" >want &&
		test_cmp want got || exit 1
	done &&
	test ! -e /dev/shm/mark && test ! -e /tmp/mark
'

test_expect_success 'the scratch directory and the checkout are shared; $SHM exists on every host' '
	echo shared >$TRASH/shared &&
	for i in 1 2 3 4; do
		hosts_exec $i sh -c "cat $TRASH/shared && test -x $DSTAGE && test -d $SHM && ! test -e $SHM/x" >got &&
		echo shared >want && test_cmp want got || exit 1
	done
'

test_expect_success 'hosts reach each other over the bridge only (own routes)' '
	hosts_exec 1 ip -4 route >routes &&
	grep -q "^$hosts_net.0/24 dev eth0" routes &&
	! grep -q default routes &&
	if command -v ping >/dev/null; then hosts_exec 1 ping -c1 -W5 $hosts_net.4; fi
'

hosts_slurm_start || skip_all "$slurm_skip_reason"

test_expect_success 'srun -N4: one task per host, each in its host (hostname = SLURMD_NODENAME)' '
	timeout -k 5 60 srun -N4 --ntasks-per-node=1 \
		sh -c "echo \$SLURM_NODEID \$SLURMD_NODENAME \$(hostname) \$(ls /dev/shm/mark 2>/dev/null)" >out &&
	sort out >actual &&
	printf "%s n%s n%s /dev/shm/mark\n" 0 1 1 1 2 2 2 3 3 3 4 4 >expect &&
	test_cmp expect actual
'

test_expect_success 'sbatch -N4: the batch script runs on the first host' '
	printf "#!/bin/sh\nhostname\nsrun -N4 hostname | sort\n" >job.sh &&
	sbatch_wait 90 -N4 -o job.out job.sh >/dev/null &&
	printf "n1\nn1\nn2\nn3\nn4\n" >expect &&
	test_cmp expect job.out
'

if test_have_prereq MPICC; then
	# 3 runs: without mpi/ucx_close.c, 4 ranks over TCP hang in
	# MPI_Finalize in nearly every run on this bed
	test_expect_success 'MPI over TCP: ranks on four hosts, different /dev/shm, 8 MiB each through eth0, 3 runs end' '
		for run in 1 2 3; do
			UCX_TLS=tcp,self timeout -k 5 60 srun -N4 --ntasks-per-node=1 --mpi=pmi2 \
				"$T/mpi-hostinfo" 8 >mpi.out || { echo "run $run: srun failed or hung ($?)"; exit 1; }
		done &&
		cat mpi.out &&
		test $(wc -l <mpi.out) = 4 &&
		! grep CORRUPT mpi.out &&
		test "$(awk "{ print \$4 }" mpi.out | sort -u | wc -l)" = 4 &&
		test "$(awk "{ print \$6 }" mpi.out | sort -u | wc -l)" = 4 &&
		awk "{ if (\$10 - \$8 < \$12) { print \"eth0 of \" \$4 \" sent \" \$10 - \$8 \" < \" \$12; bad = 1 } }
			END { exit bad }" mpi.out
	'
else
	test_expect_success MPICC 'MPI over TCP: ranks on four hosts, different /dev/shm, 8 MiB each through eth0, 3 runs end' :
fi

# Stop here to check that nothing is left: a task still runs in host 3.
timeout 60 srun -N4 sleep 300 >/dev/null 2>&1 &
test_bg $!
sleep 1
bed_dir=$hosts_dir bed_bridge=$hosts_bridge bed_slurm=$slurm_dir
bed_holders=$(cat "$hosts_dir"/h*.pid | tr '\n' ' ')
hosts_stop
test_expect_success 'hosts_stop: no namespace, link, holder, daemon or state directory is left' '
	for i in 1 2 3 4; do
		test ! -e /run/netns/dsh$$.$i || { echo "netns dsh$$.$i left"; exit 1; }
	done &&
	! ip link show $bed_bridge 2>/dev/null &&
	test -z "$(ip -o link show | grep "dsv$$\.")" &&
	for p in $bed_holders; do
		test ! -d /proc/$p || { echo "holder $p left"; exit 1; }
	done &&
	test ! -e "$bed_dir" && test ! -e "$bed_slurm" &&
	for e in /proc/[0-9]*/environ; do
		p=${e#/proc/}; p=${p%/environ}
		test -s /proc/$p/cmdline || continue
		if { tr "\0" "\n" <"$e"; } 2>/dev/null | grep -qxF "SLURM_CONF=$bed_slurm/slurm.conf"; then
			echo "left: $p $(tr "\0" " " </proc/$p/cmdline)"; exit 1
		fi
	done
'

test_done
