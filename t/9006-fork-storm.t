#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Readers that fork, and readers that die, against the real node service (2
# simulated nodes, dstage serve):
#  - torchvision DataLoader with 8 forked workers, 3 epochs, shuffled (so
#    about half of every epoch is remote reads), every sample's bytes
#    checked against the source;
#  - a storm of short processes: xargs -P 8 of cat and stat over every file,
#    three times, in parallel on both nodes;
#  - a reader SIGKILLed in the middle of remote reads of a 40 MiB file, one
#    SIGSTOPped while it holds a connection: the service keeps serving
#    everyone else, its descriptors come back to where they were, no read
#    error is counted anywhere.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
. "$SRCDIR/t/lib-hard.sh"

test_require TORCH,TORCHVISION

test_expect_success 'two nodes staged: 4 classes x 40 samples, a 40 MiB blob' '
	make_samples src 40 &&
	mkdir -p src/big && head -c 41943040 /dev/urandom >src/big/blob &&
	pack_stage src 2 &&
	(cd src && find . -type f | sed "s,^\./,," | sort) >files &&
	(cd src && xargs sha256sum <../files) >sums
'
serve_start 2 --seed 11
test_expect_success 'served' 'serve_up 2'

cat >loader.py <<'EOF'
import hashlib, os, sys
import torch.utils.data as tud
from torchvision.datasets import DatasetFolder

mount, src, epochs, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
want = {}
for line in open("sums"):
    h, p = line.split()
    want[p] = h

def load(path):
    with open(path, "rb") as f:
        return f.read()

ds = DatasetFolder(os.path.join(mount, "train"), loader=load, extensions=(".jpg",))
assert len(ds) == 160, len(ds)
loader = tud.DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers,
                        collate_fn=lambda b: b)
pids = set()
for e in range(epochs):
    n = 0
    for batch in loader:
        for data, target in batch:
            n += 1
            h = hashlib.sha256(data).hexdigest()
            if h not in want.values():
                sys.exit("epoch %d: a sample's bytes match no source file" % e)
    assert n == 160, n
    # every sample once per epoch: the paths the dataset lists, checked by name
    for p, _ in ds.samples:
        rel = os.path.relpath(p, mount)
        assert hashlib.sha256(load(p)).hexdigest() == want[rel], rel
print("epochs=%d workers=%d samples=%d ok" % (epochs, workers, 160 * epochs))
EOF

for k in 0 1; do
	test_expect_success "node $k: DataLoader, 8 forked workers, 3 shuffled epochs, bytes right" '
		rc=0 && { shim_on '$k' DSTAGE_TIMEOUT=20 timeout 300 "$PY" loader.py "$MOUNT" src 3 8 >out 2>&1 || rc=$?; } &&
		tail -n 5 out && test $rc = 0 && test_grep "samples=480 ok" out
	'
done

test_expect_success 'a storm of short processes on both nodes: xargs -P 8 cat and stat, 3 rounds' '
	for r in 1 2 3; do
		for k in 0 1; do
			(cd src && sed "s,^,$MOUNT/," ../files | shim_on $k xargs -P 8 -n 6 sha256sum) \
				>storm.$k.$r 2>&1 &
		done
		wait
		for k in 0 1; do
			sed "s, $MOUNT/, ," storm.$k.$r | sort -k 2 >got && sort -k 2 sums >want &&
			test_cmp want got || exit 1
		done
		(cd src && sed "s,^,$MOUNT/," ../files | shim_on 1 xargs -P 8 stat -c "%s %n") >st &&
		test $(wc -l <st) = $(wc -l <files) || exit 1
	done
'

test_expect_success 'no read error counted on either node' '
	test "$(stat_val 0 read_errors)" = 0 && test "$(stat_val 1 read_errors)" = 0
'

# which node has to fetch big/blob remotely?
# (t/lib-serve.sh and wait_until use $k: keep clear of it)
remote_node() {
	for n in 0 1; do
		b=$(stat_val $n remote_bytes)
		shim_on $n head -c 1 "$MOUNT/big/blob" >/dev/null
		[ "$(stat_val $n remote_bytes)" != "$b" ] && { echo $n; return; }
	done
}
fd_count() { ls /proc/"$1"/fd | wc -l; }

test_expect_success 'a reader SIGKILLed in the middle of remote reads does not disturb the service' '
	nd=$(remote_node) && test -n "$nd" && echo "node $nd reads big/blob remotely" &&
	pid=$(node_pid $nd) && fds0=$(fd_count $pid) &&
	for i in 1 2 3 4 5; do
		b=$(stat_val $nd remote_bytes) || exit 1
		# not through shim_on: $! must be the reader itself, not a subshell
		env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE=$nd DSTAGE_MOUNT="$MOUNT" \
			"$PY" -c "
import sys
while True:
    with open(sys.argv[1], \"rb\") as f:
        while f.read(1 << 20):
            pass
" "$MOUNT/big/blob" &
		r=$!
		wait_until 10 sh -c "test \$(od -An -t u8 -j 64 -N 8 $JOBDIR/$nd/stats) -gt $((b + 4194304))" ||
			{ kill -9 $r; echo "no remote bytes moved"; exit 1; }
		kill -9 $r && { wait $r 2>/dev/null || :; } || exit 1
	done &&
	grep -q "^state=running" "$JOBDIR/$nd/serve.status" &&
	shim_on $nd cat "$MOUNT/big/blob" | cmp - src/big/blob &&
	if ! wait_until 10 sh -c "test \$(ls /proc/$pid/fd | wc -l) -le $fds0"; then
		echo "service fds: $fds0 before, $(fd_count $pid) after"; exit 1
	fi
'

test_expect_success 'a reader stopped while holding a connection does not stall the others' '
	nd=$(remote_node) && test -n "$nd" || exit 1
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE=$nd DSTAGE_MOUNT="$MOUNT" \
		"$PY" -c "
import os, signal, sys
f = open(sys.argv[1], \"rb\")
f.read(1 << 20)
os.kill(os.getpid(), signal.SIGSTOP)
f.read()
" "$MOUNT/big/blob" &
	r=$!
	wait_until 30 sh -c "grep -q \"^State:.*T\" /proc/$r/status" || { kill -9 $r; exit 1; }
	start=$(date +%s) &&
	rc=0 && { (cd src && sed "s,^,$MOUNT/," ../files | shim_on $nd xargs sha256sum) | sed "s, $MOUNT/, ," |
		sort -k 2 >got && sort -k 2 sums >want && test_cmp want got &&
	test $(( $(date +%s) - start )) -lt 60 || rc=$?; } &&
	# the stopped reader goes on where it was
	kill -CONT $r && wait $r && test $rc = 0
'

test_expect_success 'still no read error, both services running' '
	test "$(stat_val 0 read_errors)" = 0 && test "$(stat_val 1 read_errors)" = 0 &&
	grep -q "^state=running" "$JOBDIR/0/serve.status" &&
	grep -q "^state=running" "$JOBDIR/1/serve.status"
'
serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'
test_done
