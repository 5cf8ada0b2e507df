#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A service lost on one host mid-epoch, on separate hosts (t/lib-hosts.sh,
# MPI over TCP): in one Slurm job, stage, `srun --overlap` serve, a reader
# on every host checking every byte (hard-soak -x), then SIGKILL of host
# 2's service.  Every host's service ends within seconds, every reader gets
# EIO within DSTAGE_TIMEOUT (never a hang, never a wrong byte), and
# `dstage clean` leaves nothing on any host.  The services' --timeout is 15 s: a survivor
# leaves by its watchdog (an MPI call blocked on the lost host) or by the
# agreement's timeout, then 5 s at most for the rest of its leave; before
# that bound, a survivor that timed out could block again leaving and end
# 40 s after the kill (once in CI).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
DSTAGE_DIR=$SHM/stores
TMO=5
UCX_TLS=tcp,self
export DSTAGE_DIR UCX_TLS

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done

cat >job.sh <<EOF
#!/bin/bash
# stage, serve, readers, SIGKILL of the last node's service; times in $TRASH/t
jobdir=$DSTAGE_DIR/dstage.\$(id -u).\$SLURM_JOB_ID
srun -N$n --ntasks-per-node=1 "$DSTAGE" stage "$TRASH/pack" --to "$DSTAGE_DIR" -q || exit 1
srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" serve --to "$DSTAGE_DIR" --seed 4 --timeout 15 \\
	>"$TRASH/serve.log" 2>&1 &
svc=\$!
srun -N$n --ntasks-per-node=1 --overlap sh -c "i=0; until test -S \$jobdir/\\\$SLURM_NODEID/sock; do
	sleep 0.1; i=\\\$((i + 1)); test \\\$i -lt 300 || exit 1; done" || exit 1
srun -N$n --ntasks-per-node=1 --overlap sh -c 'eval "\$("$DSTAGE" env --to "$DSTAGE_DIR")" &&
	DSTAGE_TIMEOUT=$TMO exec "$T/hard-soak" -x "\$DSTAGE_MOUNT" "$TRASH/src" 100000 \\
	>"$TRASH/reader.\$SLURM_NODEID.log" 2>"$TRASH/reader.\$SLURM_NODEID.err"' &
readers=\$!
i=0
until [ "\$(cat "$TRASH"/reader.*.log 2>/dev/null | grep -c '^epoch=')" -ge $((2 * n)) ]; do
	sleep 0.2; i=\$((i + 1)); [ \$i -lt 300 ] || { echo "readers not busy"; exit 1; }
done
t0=\$(date +%s)
srun -N1 -n1 -w n$n --overlap sh -c "kill -KILL \\\$(sed -n 's/^pid=//p' \$jobdir/$((n - 1))/serve.status)"
wait \$svc; echo "serve_rc=\$?" >"$TRASH/t"
echo "svc_s=\$((\$(date +%s) - t0))" >>"$TRASH/t"
wait \$readers; echo "readers_rc=\$?" >>"$TRASH/t"
echo "readers_s=\$((\$(date +%s) - t0))" >>"$TRASH/t"
srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" clean --to "$DSTAGE_DIR"
EOF

test_expect_success 'the dataset, packed on the shared file system' '
	"$T/mksample" -c 4 -n 40 src &&
	"$DSTAGE" pack -q -p 8 src pack
'

test_expect_success "SIGKILL of host $n's service mid-epoch: the job goes on to its end" '
	{ sbatch_wait 240 -N$n -o job.out job.sh >sb.out 2>&1 || :; } &&
	cat sb.out job.out serve.log t &&
	test -s t
'

test_expect_success 'every host'"'"'s service ended within seconds, failed' '
	. ./t && test "$serve_rc" != 0 && test "$svc_s" -le 30
'

test_expect_success "every reader stopped with EIO within DSTAGE_TIMEOUT ($TMO s), no wrong byte" '
	. ./t && cat reader.*.err &&
	test "$readers_rc" != 0 && test "$readers_s" -le $((svc_s + TMO + 10)) &&
	for k in $(seq 0 $((n - 1))); do
		grep -q "Input/output error" reader.$k.err || { echo "reader $k: no EIO"; exit 1; }
	done &&
	! grep -q "bytes differ\|not in the source" reader.*.err
'

test_expect_success 'dstage clean left nothing on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'

test_done
