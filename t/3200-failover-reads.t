#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failover (docs/failover.md): 4 simulated nodes, R = 2.  Node 2's service
# and its readers are SIGKILLed mid-epoch while readers on nodes 0, 1 and 3
# read every byte of their epoch list and of the whole tree through the
# shim, pass after pass.  The step ends (MPICH cannot keep it), the script
# starts the service again on the survivors (--nodes 0-1,3) over the stores
# that are still there: no reader sees an error, every byte is right, the
# pack (the "shared file system") is gone after stage, so not a byte of it
# is read again, and the epochs after the loss are dealt over the survivors.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

PY=/usr/bin/python3
test_require PYTHON

test_expect_success 'four nodes staged with R=2; the pack removed' '
	make_samples src 24 &&
	pack_stage src 4 -R 2 &&
	rm -rf pack && test ! -e pack &&
	(cd src/train && find . -type f | sed "s|^\./|train/|" | sort) >train.sorted
'
serve_start 4 --failover
test_expect_success 'served on 4 nodes' 'serve_up 4'

test_expect_success 'JOBDIR/nodes: failover on, every node from epoch 0' '
	cat "$JOBDIR/nodes" && grep -q "^failover=1" "$JOBDIR/nodes" &&
	grep -q "^from=0 nodes=0-3$" "$JOBDIR/nodes"
'

for k in 0 1 2 3; do
	shim_on $k cat "$MOUNT/.dstage/epochs/0/all" >list.$k
	shim_bg $k "$PY" "$SRCDIR/t/helpers/failover-reader.py" "$MOUNT" src list.$k stop.flag \
		reader.$k >reader.$k.err 2>&1
	eval "READER_$k=$!"
	test_bg $!
done
test_expect_success 'every reader has done a pass' '
	wait_until 60 sh -c "grep -qs ^pass reader.0 && grep -qs ^pass reader.1 && grep -qs ^pass reader.3"
'
victim=$(node_pid 2)
test_expect_success 'SIGKILL node 2: its service and its reader' '
	test -n "$victim" && kill -KILL "$victim" "$READER_2" && wait_gone 10 "$READER_2"
'
serve_wait
test_expect_success 'the step ended (MPICH keeps no communicator across a dead rank)' '
	test "$(cat serve.rc)" != 0
'
cp serve.log serve.1.log
sleep 1 # readers meet the dead service meanwhile
serve_start 3 --nodes 0-1,3 -v
test_expect_success 'restarted on the survivors 0, 1, 3 over their stores' '
	wait_until 60 sh -c "for i in 0 1 3; do grep -qs ^state=running $JOBDIR/\$i/serve.status && test -S $JOBDIR/\$i/sock || exit 1; done" &&
	cat serve.log && grep -q "serving the surviving nodes 0-1,3 of 4" serve.log
'
test_expect_success 'JOBDIR/nodes: the survivors from the next epoch on' '
	cat "$JOBDIR/nodes" && grep -q "^from=1 nodes=0-1,3$" "$JOBDIR/nodes"
'
touch stop.flag
# Each reader ends its pass and does one more.  When the service did not
# come back (a failure above), every read of theirs waits DSTAGE_TIMEOUT
# for it before its EIO, and a pass takes half an hour: a reader still
# running after 120 s is killed (its test fails) rather than waited for.
wait_gone 120 $READER_0 $READER_1 $READER_3 >/dev/null || {
	echo "# readers still running 120 s after stop.flag: killed"
	_test_kill $READER_0 $READER_1 $READER_2 $READER_3
}
for k in 0 1 3; do
	eval "pid=\$READER_$k"
	wait "$pid"
	echo $? >reader.$k.rc
done
for k in 0 1 3; do
	test_expect_success "node $k: no error, every byte right, across the restart" '
		cat reader.'$k' reader.'$k'.err && test "$(cat reader.'$k'.rc)" = 0 &&
		grep -q "^done .* errors 0 " reader.'$k' &&
		test "$(grep -c ^pass reader.'$k')" -ge 2
	'
done
test_expect_success 'some reads waited for the restarted service (the retry was needed)' '
	cat reader.0 reader.1 reader.3 | grep "^done" &&
	test "$(cat reader.0 reader.1 reader.3 | sed -n "s/^done .* slow \([0-9]*\)$/\1/p" | paste -sd+ | bc)" -gt 0
'
test_expect_success 'the files only nodes 2 and another held came from the other holder' '
	for k in 0 1 3; do stat_val $k served_reads || exit 1; done >reads &&
	paste -sd+ reads | bc >served &&
	test "$(cat served)" -gt 0
'
test_expect_success 'epoch 1 is dealt over the survivors: one permutation, equal shares' '
	for k in 0 1 3; do shim_on $k cat "$MOUNT/.dstage/epochs/1/all" >e1.$k || exit 1; done &&
	sort -u e1.0 e1.1 e1.3 >e1.all && test_cmp train.sorted e1.all &&
	n0=$(wc -l <e1.0) && test "$n0" = "$(wc -l <e1.1)" && test "$n0" = "$(wc -l <e1.3)" &&
	test "$n0" = $(( ($(wc -l <train.sorted) + 2) / 3 ))
'
test_expect_success 'epoch 0 keeps the lists it began with' '
	for k in 0 1 3; do shim_on $k cat "$MOUNT/.dstage/epochs/0/all" | cmp - list.$k || exit 1; done
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'
test_expect_success 'the pack was never needed again' 'test ! -e pack'
test_done
