#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The window over a store and its re-replicated copies (docs/failover.md
# "MPI libraries that hook mremap").  A service that starts with copies
# from an earlier step maps the store and the copies as one region and
# exposes it in one window; UCX's mremap hook (libucm 1.13, under MPICH's
# ch4:ucx) once made the store's move into that region land elsewhere,
# leaving the window's start PROT_NONE: the first get into it crashed its
# target in UCX's get handler.  4 simulated nodes, R = 2: node 2 is lost,
# the service on 0, 1, 3 re-replicates; then node 3 is lost and the second
# restart, on 0 and 1, serves from the store and the copies: the store's
# mapping is at the region's start, right before the copies, in each
# service's address space, and every file reads right remotely from each
# node (the files of nodes 2 and 3 only from the copies).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

# in_place K: in service K's /proc/PID/maps, the mapping of its store
# begins its region and the first copies (replicas.0) follow it at the
# next page after the store's end; no copies of its own: nothing to check
in_place() {
	pid=$(node_pid "$1") && test -n "$pid" || return 1
	test -e "$JOBDIR/$1/replicas.0.map" || return 0
	awk -v st="$JOBDIR/$1/store" -v rp="$JOBDIR/$1/replicas.0" '
		function hex(s,  i, v) { v = 0; s = tolower(s)
			for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
			return v }
		{ split($1, a, "-") }
		$6 == st && !s { s = hex(a[1]) }
		$6 == st { e = hex(a[2]) }
		$6 == rp && !r { r = hex(a[1]) }
		END { printf "store %x-%x, replicas.0 at %x\n", s, e, r
		      exit !(s && r && r == e) }' "/proc/$pid/maps"
}

test_expect_success 'four nodes staged with R=2, the pack removed' '
	stage_r2_nopack
'
DSTAGE_LOG=info
serve_start 4 --failover
test_expect_success 'served on 4 nodes' 'serve_up 4'
test_expect_success 'lose node 2' 'kill -KILL "$(node_pid 2)"'
serve_wait
serve_start 3 --nodes 0-1,3
test_expect_success 'first restart on 0, 1, 3: the copies are made' '
	wait_until 60 running 0 1 3 &&
	wait_until 60 sh -c "grep -q \"re-replicated\" serve.log" &&
	ls "$JOBDIR"/*/replicas.0.map
'
test_expect_success 'lose node 3 as well' 'kill -KILL "$(node_pid 3)"'
serve_wait
serve_start 2 --nodes 0-1
test_expect_success 'second restart on 0, 1 over stores and copies' '
	wait_until 60 running 0 1
'
for k in 0 1; do
	test_expect_success "node $k: its store begins the window's region, the copies follow" "
		in_place $k
	"
done
for k in 0 1; do
	test_expect_success "node $k: every file reads right (gets into the other node's region)" '
		r0=$(stat_val '$k' remote_reads) &&
		for f in $(cat pair23) $(cat every); do
			DSTAGE_TIMEOUT=20 shim_on '$k' cat "$MOUNT/$f" >got 2>err ||
				{ cat err; echo "failed: $f"; exit 1; }
			cmp -s got "src/$f" || { echo "wrong bytes: $f"; exit 1; }
		done &&
		r1=$(stat_val '$k' remote_reads) &&
		echo "remote reads: $r0 -> $r1, from the epoch cache: $(stat_val '$k' cache_reads)" &&
		test "$r1" -gt "$r0"
	'
done
test_expect_success 'both services still up, no crash in the log' '
	running 0 1 &&
	! grep -Ei "segmentation|invalid permissions|signal 11|BAD TERMINATION" serve.log
'
serve_stop
test_expect_success 'stopped cleanly' 'cat serve.log && test "$(cat serve.rc)" = 0'
test_done
