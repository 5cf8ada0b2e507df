#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# One job directory has one owner at a time (docs/design.md section 6): stage, serve and
# clean of a job are mutually exclusive through JOBDIR/lock, the loser is
# refused with the holder named (pid, command, host), exit 1 on every rank,
# nothing of the holder's touched; the lock dies with its holder.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

uid=$(id -u)
host=$(hostname)

# wait_lock: until the holder has written its name into the lock
held_by() { grep -qs "dstage $1, pid [0-9]* on host " "$JOBDIR/lock"; }

test_expect_success 'set up: two different sources, two packs' '
	make_samples srcA 6 && make_samples srcB 6 &&
	"$DSTAGE" pack -q -p 4 --replicate val srcA packA &&
	"$DSTAGE" pack -q -p 4 --replicate val srcB packB &&
	! cmp -s srcA/train/cat/img0.jpg srcB/train/cat/img0.jpg
'

# Two stages of one job racing: the first is slowed down while it writes
# (before, the second passed the "already staged" check as well, removed the
# first's partial store and the first ended with the second's bytes).
DSTAGE_FAULT=stage.write:rank=0:action=sleep:secs=4 \
	mpirun_n 2 "$DSTAGE" stage packA --to "$SHM" --job "$JOB" --node-per-rank -q \
	>stageA.log 2>&1 &
A=$!
test_bg $A
test_expect_success 'a second stage of the job while the first runs: refused, the holder named' '
	wait_until 30 held_by stage &&
	! mpirun_n 2 "$DSTAGE" stage packB --to "$SHM" --job "$JOB" --node-per-rank -q 2>err &&
	cat err && test_grep "in use by dstage stage, pid [0-9]* on host $host" err
'
test_expect_code 1 'the refused stage exits 1' '
	mpirun_n 2 "$DSTAGE" stage packB --to "$SHM" --job "$JOB" --node-per-rank --force -q
'
test_expect_success 'serve while the stage runs: refused, naming the stage' '
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank 2>err &&
	cat err && test_grep "in use by dstage stage" err
'
test_expect_success 'clean while the stage runs: refused, exit 1' '
	test_status --show err 1 "$DSTAGE" clean --to "$SHM" --job "$JOB" 2>err &&
	test_grep "in use by dstage stage" err &&
	kill -0 $A # the first stage was still running all along: the tests above meant it
'
wait $A
echo $? >stageA.rc
test_expect_success 'the first stage succeeded, its store has its own bytes' '
	cat stageA.log && test "$(cat stageA.rc)" = 0 &&
	"$T/storecheck" "$JOBDIR" srcA >/dev/null
'
test_expect_success 'the lock is free again: stage --force of the job works' '
	mpirun_n 2 "$DSTAGE" stage packB --to "$SHM" --job "$JOB" --node-per-rank -q --force &&
	"$T/storecheck" "$JOBDIR" srcB >/dev/null
'

serve_start 2 --seed 7
test_expect_success 'served' 'serve_up 2 && wait_until 10 held_by serve'
test_expect_success 'a second serve: refused, naming the running one; nothing of it touched' '
	pid=$(sed -n "s/.*pid \([0-9]*\) .*/\1/p" "$JOBDIR/lock") && test -n "$pid" &&
	ls -i "$JOBDIR/0/sock" >sock.before && cp "$JOBDIR/epoch.conf" conf.before &&
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank --seed 99 2>err &&
	cat err && test_grep "in use by dstage serve, pid $pid on host $host.*dstage stop" err &&
	ls -i "$JOBDIR/0/sock" >sock.after && test_cmp sock.before sock.after &&
	test_cmp conf.before "$JOBDIR/epoch.conf" && grep -q "^seed=7$" "$JOBDIR/epoch.conf"
'
test_expect_success 'the running service still serves the right bytes' '
	shim_on 1 cat "$MOUNT/train/dog/img3.jpg" >got && cmp got srcB/train/dog/img3.jpg
'
test_expect_success 'clean while the service runs: refused (exit 1), store and service stay' '
	test_status --show err 1 "$DSTAGE" clean --to "$SHM" --job "$JOB" 2>err &&
	test_grep "in use by dstage serve.*stop the service first" err &&
	test -s "$JOBDIR/0/store" && test -S "$JOBDIR/1/sock" &&
	shim_on 0 cat "$MOUNT/train/fox/img1.jpg" >got && cmp got srcB/train/fox/img1.jpg
'
test_expect_success 'stage --force while the service runs: refused, store unchanged' '
	! mpirun_n 2 "$DSTAGE" stage packA --to "$SHM" --job "$JOB" --node-per-rank -q --force 2>err &&
	cat err && test_grep "in use by dstage serve" err &&
	"$T/storecheck" "$JOBDIR" srcB >/dev/null
'
serve_stop
test_expect_success 'stop, then clean right away: both succeed, nothing left' '
	cat stop.log serve.log && test "$(cat stop.rc)" = 0 && test "$(cat serve.rc)" = 0 &&
	"$DSTAGE" clean --to "$SHM" --job "$JOB" && ! test -e "$JOBDIR"
'

test_expect_success 'the lock dies with its holder: a stage killed mid-write, then a new stage' '
	! DSTAGE_FAULT=stage.write:rank=0:action=kill mpirun_n 2 "$DSTAGE" stage packA --to "$SHM" \
		--job "$JOB" --node-per-rank -q 2>/dev/null &&
	mpirun_n 2 "$DSTAGE" stage packA --to "$SHM" --job "$JOB" --node-per-rank -q &&
	"$T/storecheck" "$JOBDIR" srcA >/dev/null
'
test_expect_success 'a failed stage of a new job leaves no directory (lock included)' '
	! mpirun_n 2 "$DSTAGE" stage nosuchpack --to "$SHM" --job gone --node-per-rank 2>/dev/null &&
	! test -e "$SHM/dstage.$uid.gone"
'
test_expect_success 'a planted lock that is not a regular file: refused, no hang' '
	mkdir -p "$SHM/dstage.$uid.fifo" && chmod 700 "$SHM/dstage.$uid.fifo" &&
	mkfifo "$SHM/dstage.$uid.fifo/lock" &&
	! mpirun_n 2 "$DSTAGE" stage packA --to "$SHM" --job fifo --node-per-rank 2>err &&
	cat err && test_grep "lock.: not a regular file of this user" err &&
	test_status --show err 1 "$DSTAGE" clean --to "$SHM" --job fifo 2>err &&
	test_grep "lock.: not a regular file of this user" err && test -p "$SHM/dstage.$uid.fifo/lock"
'
test_done
