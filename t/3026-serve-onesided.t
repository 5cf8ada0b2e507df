#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The service asks Open MPI, once per window, whether a one-sided get
# completes while its target makes no MPI call (shuffle/window.c,
# docs/mpi.md "One-sided components"): its osc/rdma reads the target's
# memory itself (single-copy CMA), so its targets need not poll, and do
# not.  MPICH 4.0's ch4:ucx emulates gets on one host with active messages
# the target must answer: probed too, it says so, its targets poll.  Either
# way every byte of the epochs arrives right, with 3 nodes (one without a
# partner in the probe's pairs), and DSTAGE_SERVE_ONESIDED=0 gives the
# polls back without asking.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
test_require MPI

case $ds_mpilib in
mpich) want='gets need their target' ;;
openmpi) want='gets complete without their target' ;;
esac

test_expect_success 'three nodes staged' '
	make_samples src 30 &&
	pack_stage src 3
'

prefetched() {
	pe=$(stat_val "$1" prefetch_epoch)
	test "$pe" -gt "$2" || { test "$pe" = "$2" &&
		test "$(stat_val "$1" prefetch_done)" = "$(stat_val "$1" prefetch_total)"; }
}

# every node's list of epoch E read through the shim, byte for byte
epoch_right() {
	for k in 0 1 2; do
		wait_until 30 prefetched $k "$1" &&
		shim_on $k cat "$MOUNT/.dstage/epochs/$1/all" >list &&
		test -s list &&
		sed "s|^|$MOUNT/|" list | shim_on $k xargs -d "\n" cat >got &&
		sed "s|^|src/|" list | xargs -d "\n" cat >want &&
		cmp got want || return 1
	done
}

DSTAGE_LOG=info
serve_start 3 --seed 3
DSTAGE_LOG=warn
test_expect_success 'served' 'serve_up 3'
test_expect_success "$ds_mpilib: the probe says: $want's progress" '
	grep "their target.s progress" serve.log &&
	test "$(grep -c "their target.s progress" serve.log)" = 1 &&
	grep -q "$want.s progress" serve.log
'
test_expect_success 'epochs 0 and 1 arrive right on every node' '
	epoch_right 0 &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	shim_on 2 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	epoch_right 1
'
serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'

DSTAGE_LOG=info DSTAGE_SERVE_ONESIDED=0
export DSTAGE_SERVE_ONESIDED
serve_start 3 --seed 4
DSTAGE_LOG=warn
unset DSTAGE_SERVE_ONESIDED
test_expect_success 'DSTAGE_SERVE_ONESIDED=0: no probe, the targets poll, bytes right' '
	serve_up 3 &&
	! grep "their target.s progress" serve.log &&
	epoch_right 0
'
serve_stop
test_expect_success 'stopped' 'test "$(cat serve.rc)" = 0'
test_done
