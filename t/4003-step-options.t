#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The job steps' options (mpi/stepopt.c): stage, serve and run take one
# table, each value checked by one function, so `dstage run` gives what
# `dstage stage` and `dstage serve` give, limits and messages alike; and
# the thread-level check of MPI_Init (mpi/init.c).
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)

# the error of `dstage CMD ARGS...` without its "dstage: CMD: " (exit 2 wanted)
usage_err() {
	cmd=$1
	shift
	"$DSTAGE" "$cmd" "$@" >/dev/null 2>e.$cmd
	rc=$?
	test $rc = 2 || { echo "dstage $cmd $*: exit $rc, want 2"; cat e.$cmd; return 1; }
	sed -n "s/^dstage: $cmd: //p" e.$cmd
}

for v in 70000 0 4294967296 x -1; do
	test_expect_success "-R $v: stage and run say the same, exit 2" '
		usage_err stage pack --to "$SHM" -R '"$v"' >s &&
		usage_err run pack --to "$SHM" -R '"$v"' >r &&
		test_grep "^-R .'"$v"'.: not a replica count (1..65535)$" s &&
		test_cmp s r
	'
done

for v in -1 x nan; do
	test_expect_success "--progress $v: stage and run say the same, exit 2" '
		usage_err stage pack --to "$SHM" --progress '"$v"' >s &&
		usage_err run pack --to "$SHM" --progress '"$v"' >r &&
		test_grep "^--progress .'"$v"'.: not a number of seconds (0: none)$" s &&
		test_cmp s r
	'
done

for o in "--seed x" "--locality 2" "--timeout 0" "--shuffle-buffer 0"; do
	test_expect_success "$o: serve and run say the same, exit 2" '
		usage_err serve --to "$SHM" '"$o"' >s &&
		usage_err run pack --to "$SHM" '"$o"' >r &&
		test -s s && test_cmp s r
	'
done

test_expect_success 'a malformed s3:// pack: stage and run say the same, exit 2' '
	usage_err stage s3://x --to "$SHM" >s &&
	usage_err run s3://x --to "$SHM" >r &&
	test_grep "^.s3://x.: " s && test_cmp s r
'

test_expect_success 'each command refuses the others options (usage, exit 2)' '
	! "$DSTAGE" stage pack --to "$SHM" --seed 1 2>e && test_grep "usage: dstage stage" e &&
	! "$DSTAGE" serve --to "$SHM" -R 2 2>e && test_grep "usage: dstage serve" e &&
	! "$DSTAGE" run pack --to "$SHM" --nodes 0 2>e && test_grep "usage: dstage run" e
'

test_expect_success '--help of stage names the limits' '
	"$DSTAGE" stage --help >h &&
	test_grep "1..65535" h && test_grep "progress SECS .*0: none" h
'

test_expect_success 'a pack' '
	"$T/mksample" -c 2 -n 6 -v 1 src && "$DSTAGE" pack -q -p 4 src pack
'

# --progress 0 (none, the default) and -R 65535 (capped at the node
# count) are taken by both stage and run
test_expect_success 'stage --progress 0 -R 65535: staged, R capped' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job p0 --node-per-rank --progress 0 \
		-R 65535 -q 2>err &&
	test -s "$SHM/dstage.$uid.p0/1/store" && test_grep "keeping 2 copies of each partition" err
'

test_expect_success 'run --progress 0 -R 65535: past the options (stages, serves, stops)' '
	mpirun_n 2 "$DSTAGE" run pack --to "$SHM" --job r0 --node-per-rank --progress 0 \
		-R 65535 -q >run.log 2>&1 &
	pid=$! &&
	i=0 && while [ $i -lt 600 ] && ! test -S "$SHM/dstage.$uid.r0/1/sock"; do
		sleep 0.1 && i=$((i + 1)) || exit 1; done &&
	"$DSTAGE" stop --to "$SHM" --job r0 &&
	test_status --show run.log 0 wait $pid
'

# A thread level below what the command needs (DSTAGE_FAULT=mpi.thread: that
# rank sees MPI_THREAD_SINGLE, as from an MPI built without threads): every
# rank ends, exit 1, the reason said, nothing made
for cmd in stage run; do
	test_expect_success "$cmd: an MPI without the thread level: exit 1 on every rank, said" '
		! DSTAGE_FAULT=mpi.thread:rank=1 mpirun_n 2 "$DSTAGE" '"$cmd"' pack --to "$SHM" \
			--job t'"$cmd"' --node-per-rank 2>err &&
		test_grep "dstage: '"$cmd"': this MPI gives MPI_THREAD_SINGLE, the command needs MPI_THREAD_FUNNELED" err &&
		! test -e "$SHM/dstage.$uid.t'"$cmd"'"
	'
done

test_expect_success 'serve: the same' '
	! DSTAGE_FAULT=mpi.thread:rank=0 mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job p0 \
		--node-per-rank 2>err &&
	test_grep "dstage: serve: this MPI gives MPI_THREAD_SINGLE" err &&
	! test -e "$SHM/dstage.$uid.p0/0/serve.status" && ! test -e "$SHM/dstage.$uid.p0/0/sock"
'

test_expect_success 'pack under mpiexec: the same, nothing written' '
	! DSTAGE_FAULT=mpi.thread:rank=1 mpirun_n 2 "$DSTAGE" pack -q src tpack 2>err &&
	test_grep "dstage: pack: this MPI gives MPI_THREAD_SINGLE" err &&
	! test -e tpack
'
test_expect_success 'each command'"'"'s --help names every option the table gives it' '
	for c in ST:stage SV:serve RN:run; do
		flag=${c%%:*} cmd=${c#*:}
		$DSTAGE $cmd --help >help.$cmd || exit 1
		sed -n "s/^[[:space:]]*{\"\([a-z-]*\)\",.*[ |]$flag[ |}].*/\1/p" "$SRCDIR/mpi/stepopt.c" >names.$cmd &&
		test -s names.$cmd || { echo "no option of $cmd in mpi/stepopt.c"; exit 1; }
		while read -r o; do
			grep -q -- "--$o" help.$cmd || { echo "dstage $cmd --help lacks --$o"; exit 1; }
		done <names.$cmd
	done
'

test_done
