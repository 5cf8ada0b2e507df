#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --ram-headroom (common/membudget.c, mpi/stepopt.c): stage, serve and run
# take it from one table and check it in one function, so a bad value gets
# the same message and exit 2 from each; good values (a size, a share, both)
# are taken; the RAM budget's summary line is printed only for RAM.
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

for v in x 100% -1 1%% 5%,6% 1GiB,2GiB 5%, ,5% "" 1e30; do
	test_expect_success "--ram-headroom '$v': stage, serve and run say the same, exit 2" '
		usage_err stage pack --to "$SHM" --ram-headroom "'"$v"'" >s &&
		usage_err serve --to "$SHM" --ram-headroom "'"$v"'" >v &&
		usage_err run pack --to "$SHM" --ram-headroom "'"$v"'" >r &&
		test_grep "^--ram-headroom .'"$v"'.: not a size (2GiB), a share of the limit (0%..99%) or both (8GiB,25%)$" s &&
		test_cmp s v && test_cmp s r
	'
done

test_expect_success '--help of stage, serve and run name --ram-headroom' '
	"$DSTAGE" stage --help >h && test_grep "ram-headroom SIZE|N%" h && test_grep "25% of the limit" h &&
	"$DSTAGE" serve --help >h && test_grep "ram-headroom SIZE|N%" h &&
	"$DSTAGE" run --help >h && test_grep "ram-headroom SIZE|N%" h
'

test_expect_success MPI 'a pack' '
	"$T/mksample" -c 2 -n 6 -v 1 src && "$DSTAGE" pack -q -p 4 src pack
'

for v in 0 2GiB 50% 8GiB,25% 25%,8GiB; do
	test_expect_success MPI "stage --ram-headroom $v into RAM: staged, the budget said" '
		mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job "h'"$v"'" --node-per-rank \
			--ram-headroom "'"$v"'" >out 2>err &&
		test -s "$SHM/dstage.$uid.h'"$v"'/1/store" &&
		test_grep "^RAM: node 0.s store takes .* of the job.s memory until .dstage clean." out
	'
done

test_expect_success MPI 'stage to a disk: no RAM line' '
	mkdir disk && mpirun_n 1 "$DSTAGE" stage pack --to "$PWD/disk" --job d >out &&
	if df -t tmpfs "$PWD/disk" >/dev/null 2>&1; then
		test_grep "^RAM:" out
	else
		! test_grep "^RAM:" out
	fi
'

test_done
