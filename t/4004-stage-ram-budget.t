#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The RAM budget of stage (issue 26, docs/guide.md "The RAM budget"): a
# store on tmpfs is the job's memory, charged to its memory cgroup.  Inside
# a real cgroup v1 memory limit, a pack larger than the limit is refused on
# every rank before a byte is written, naming the node, the cgroup's limit,
# the need and the room, exit 1 and nothing left -- where it was OOM-killed
# and left its bytes behind; simulated nodes of one host share the budget;
# the headroom is kept; a pack that fits stages.
. "$(dirname "$0")/test-lib.sh"

test_lazy_prereq MEMCG1 '
	[ "$(id -u)" = 0 ] && d=/sys/fs/cgroup/memory/dstage-probe-$$ && mkdir "$d" &&
	echo 1048576 >"$d/memory.limit_in_bytes" && rmdir "$d"
' "needs root and a writable cgroup v1 memory hierarchy at /sys/fs/cgroup/memory"
test_require MPI MEMCG1

uid=$(id -u)
CG=/sys/fs/cgroup/memory/dstage-test-$$
# however the script ends: every task back to the root, the cgroup removed
# (the stores go first, so no charge is left to reparent)
test_atexit "rm -rf '$SHM'/dstage.*; \
	[ -d '$CG' ] && { for p in \$(cat '$CG/tasks'); do echo \$p >/sys/fs/cgroup/memory/tasks; done; \
	rmdir '$CG'; }"
mkdir "$CG" || { echo "Bail out! cannot make $CG"; exit 1; }

# in_cg LIMIT CMD...: CMD (and its children: mpiexec, the ranks) in the
# test's cgroup, limited to LIMIT bytes; swap off so the limit is RAM
in_cg() {
	echo "$1" >"$CG/memory.limit_in_bytes" || return 1
	echo 0 >"$CG/memory.swappiness" 2>/dev/null
	shift
	sh -c 'echo $$ >"$0/tasks" && exec "$@"' "$CG" "$@"
}
nothing_left() {
	test -z "$(ls -A "$SHM")" || { find "$SHM"; return 1; }
}
# no process of the cgroup was OOM-killed
no_oom() {
	! grep "^oom_kill [1-9]" "$CG/memory.oom_control"
}
MiB=1048576

test_expect_success 'setup: a 40 MiB pack of incompressible data' '
	mkdir -p src/a src/b &&
	for i in 1 2 3 4 5; do
		head -c $((4 * MiB)) /dev/urandom >src/a/f$i &&
		head -c $((4 * MiB)) /dev/urandom >src/b/f$i || return 1
	done &&
	"$DSTAGE" pack -q -p 2 src pack &&
	test $(du -sk pack | cut -f1) -ge 40000
'

test_expect_success 'ds_ram_room sees the cgroup: limit, reason, path' '
	in_cg $((32 * MiB)) "$T/ram-room" "$SHM" 0 >out &&
	test_grep "^is_ram 1$" out && test_grep "^cgroup_v 1$" out &&
	test_grep "^limit $((32 * MiB))$" out &&
	test_grep "^cgroup $CG$" out && test_grep "^why cgroup v1 memory limit$" out &&
	room=$(sed -n "s/^room //p" out) && test "$room" -lt $((32 * MiB)) &&
	in_cg $((32 * MiB)) "$T/ram-room" "$SHM" 50% >out &&
	test_grep "^headroom $((16 * MiB))$" out
'

test_expect_success 'the case of issue 26: a 40 MiB pack into a 32 MiB cgroup, refused at once' '
	! in_cg $((32 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack --to "$SHM" --job j1 >out 2>err &&
	cat err &&
	test_grep "node 0: .*not enough room: needs 104.0 MiB on host .* (store 40.0 MiB + 64.0 MiB of index and metadata), room 0 B" err &&
	test_grep "cgroup v1 memory limit 32.0 MiB (.$CG.): usage .*, headroom 8.0 GiB" err &&
	! test_grep -i "BAD TERMINATION\|killed" err &&
	no_oom && nothing_left
'

test_expect_success 'with no headroom the room is the limit less the usage: still refused' '
	! in_cg $((32 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack --to "$SHM" --job j1 --ram-headroom 0 >out 2>err &&
	test_grep "not enough room: needs 104.0 MiB .* room [0-9.]* [KM]iB: cgroup v1 memory limit 32.0 MiB (.$CG.): usage [0-9.]* [KM]iB, headroom 0 B" err &&
	no_oom && nothing_left
'

test_expect_success 'the default headroom is kept: refused in a 160 MiB cgroup too' '
	! in_cg $((160 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack --to "$SHM" --job j2 2>err &&
	test_grep "not enough room: .*headroom 8.0 GiB" err && nothing_left
'

test_expect_success 'a given headroom is kept: 100 MiB of 160 MiB leaves too little' '
	! in_cg $((160 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack --to "$SHM" --job j3 --ram-headroom 100MiB 2>err &&
	test_grep "headroom 100.0 MiB" err && nothing_left &&
	! in_cg $((160 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack --to "$SHM" --job j3 --ram-headroom 60% 2>err &&
	test_grep "headroom 96.0 MiB" err && nothing_left
'

# each node alone (20 MiB + 64 MiB) would fit the room (about 100 MiB), both
# (40 MiB + 64 MiB) do not
test_expect_success 'two simulated nodes of one host share its cgroup: needs summed' '
	! in_cg $((160 * MiB)) timeout -k 5 120 mpiexec.mpich -n 2 \
		"$DSTAGE" stage pack --to "$SHM" --job j4 --node-per-rank --ram-headroom 40MiB 2>err &&
	test_grep "node 0: .*not enough room: needs 104.0 MiB for 2 nodes on host .* (stores 40.0 MiB + 64.0 MiB of index and metadata), room [0-9.]* MiB" err &&
	test $(grep -c "not enough room" err) = 1 &&
	no_oom &&
	nothing_left
'

test_expect_success 'a pack that fits the budget stages, and says what it takes' '
	in_cg $((160 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack --to "$SHM" --job j5 --ram-headroom 8MiB >out 2>err &&
	test_grep "^RAM: node 0.s store takes 40.* of the job.s memory" out &&
	"$T/storecheck" "$SHM/dstage.$uid.j5" src >/dev/null &&
	no_oom &&
	"$DSTAGE" clean --to "$SHM" --job j5 && nothing_left
'

# issue 26's Done-means, with --spill: the same kind of pack in a cgroup too
# small for it stages, exit 0, what does not fit the budget (limit less usage
# less headroom) in the spill tier, the RAM part within it, every byte right
test_expect_success 'with --spill a pack larger than the budget stages: the RAM part within it' '
	"$DSTAGE" pack -q -p 4 src pack4 &&
	mkdir -p spill &&
	in_cg $((64 * MiB)) timeout -k 5 120 mpiexec.mpich -n 1 \
		"$DSTAGE" stage pack4 --to "$SHM" --job j6 --ram-headroom 16MiB \
		--spill "$TRASH/spill" >out 2>err &&
	cat out &&
	test_grep "^RAM: node 0.s store takes .* spilled to .$TRASH/spill." out &&
	no_oom &&
	test -s "spill/dstage.$uid.j6/0/store" &&
	ramk=$(du -sk "$SHM/dstage.$uid.j6" | cut -f1) &&
	test "$ramk" -lt $((48 * 1024)) &&
	test "$(stat -c %s "spill/dstage.$uid.j6/0/store")" -ge $((10 * MiB)) &&
	"$T/storecheck" "$SHM/dstage.$uid.j6" src >/dev/null &&
	"$DSTAGE" clean --to "$SHM" --job j6 && nothing_left &&
	! test -e "spill/dstage.$uid.j6"
'

test_done
