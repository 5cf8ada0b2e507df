#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A killed service whose outputs.status lists 100,000 outputs not drained
# (docs/outputs.md "A killed service"; 100,000 checkpoint shards are
# ordinary): `dstage drain --wait` reads the whole status, not a first
# 64 KiB of it, and recovers every output, CRC-checked, byte for byte.  One
# it cannot recover (its bytes gone) is named, exit 1, and stays listed: a
# new service of the job refuses to start and wipes nothing until it is
# recovered.  The entries are tiny files, written the way a killed service
# leaves them (one status line each, the bytes in the node's output area),
# after a real service of the job was SIGKILLed with a real one pending.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
DR="$SHM/drain" # tmpfs: 200,000 fsyncs cost nothing there
serve_start 2 --outputs out --drain-to "$DR" --drain-rate 1MiB
test_expect_success 'served with a slow drain' 'serve_up 2'

test_expect_success 'a 3 MiB output is pending when both services are killed' '
	head -c 3145728 /dev/urandom >big &&
	shim_on 0 cp big "$MOUNT/out/big.bin" &&
	wait_until 10 grep -q "^draining_tmp=/" "$JOBDIR/0/outputs.status" &&
	{ kill -9 $(node_pid 0) $(node_pid 1) 2>/dev/null || :; } &&
	wait_until 20 sh -c "! kill -0 $SERVE_PID 2>/dev/null" &&
	grep -q "^undrained=3145728 .* big.bin$" "$JOBDIR/0/outputs.status"
'

# 50,000 more on each node: shards/rNN/model-shard-NNNNNN-of-100000.pt, each
# holding its own name, listed with its CRC-32C (every 10th "--------": not
# summed yet when the service died)
cat >mkshards.py <<'PY'
import os, sys
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    T.append(c)
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
jobdir = sys.argv[1]
for node in (0, 1):
    st = os.path.join(jobdir, str(node), "outputs.status")
    area = [l[5:] for l in open(st).read().splitlines() if l.startswith("area=")][0]
    lines = []
    for i in range(node, 100000, 2):
        name = "shards/r%02d/model-shard-%06d-of-100000.pt" % (i % 100, i)
        data = (name + "\n").encode()
        p = os.path.join(area, "ns", name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        cs = "--------" if i % 10 == 3 else "%08x" % crc32c(data)
        lines.append("undrained=%d %s %s\n" % (len(data), cs, name))
    with open(st, "a") as f:
        f.write("".join(lines))
PY
cat >checkshards.py <<'PY'
import os, sys
dr, skip = sys.argv[1], sys.argv[2:]
bad = 0
for i in range(100000):
    name = "shards/r%02d/model-shard-%06d-of-100000.pt" % (i % 100, i)
    p = os.path.join(dr, name)
    if name in skip:
        if os.path.exists(p):
            print("unexpected", name); bad += 1
        continue
    try:
        got = open(p, "rb").read()
    except OSError as e:
        print("missing", name, e); bad += 1; continue
    if got != (name + "\n").encode():
        print("wrong bytes", name); bad += 1
print("bad", bad)
sys.exit(1 if bad else 0)
PY

LOST=shards/r99/model-shard-099999-of-100000.pt
test_expect_success 'the status lists 100,002 outputs, far past 64 KiB' '
	"$PY" mkshards.py "$JOBDIR" &&
	test $(cat "$JOBDIR"/0/outputs.status "$JOBDIR"/1/outputs.status | grep -c "^undrained=") -ge 100001 &&
	test $(wc -c <"$JOBDIR/0/outputs.status") -gt 2000000 &&
	rm "$JOBDIR/1/outputs/ns/$LOST"
'
test_expect_success 'dstage drain --wait: every one recovered but the one whose bytes are gone, named, exit 1' '
	rc=0 && { "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err || rc=$?; } && tail -n 3 err &&
	test $rc = 1 &&
	grep "closed but not drained" err >lost && test $(wc -l <lost) = 1 &&
	grep -q "model-shard-099999-of-100000.pt" lost &&
	test $(grep -c "recovered from the node" err) = 100000 &&
	cmp big "$DR/big.bin" &&
	"$PY" checkshards.py "$DR" "$LOST"
'
test_expect_success 'the status still lists it, and only it' '
	cat "$JOBDIR"/0/outputs.status "$JOBDIR"/1/outputs.status | grep "^undrained=" >left &&
	test $(wc -l <left) = 1 && grep -q "$LOST" left &&
	grep -q "^recovered=1" "$JOBDIR/0/outputs.status"
'
serve_start 2 --outputs out --drain-to "$DR"
serve_wait
test_expect_success 'a new service of the job is refused and wipes nothing' '
	cat serve.log && test "$(cat serve.rc)" = 1 && grep -q "1 output(s) of an earlier service" serve.log &&
	test -e "$JOBDIR/1/outputs/ns/shards/r97/model-shard-099997-of-100000.pt"
'
test_expect_success 'its bytes back: recovered, exit 0' '
	echo "$LOST" >"$JOBDIR/1/outputs/ns/$LOST" &&
	test_status --show err 0 "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err &&
	grep -q "model-shard-099999.*recovered" err &&
	"$PY" checkshards.py "$DR"
'
serve_start 2 --outputs out --drain-to "$DR"
test_expect_success 'recovered: a new service of the job starts' 'serve_up 2'
serve_stop
test_expect_success 'and stops cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
