#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A reader's epoch list costs its own part (issue 27): the service writes
# each epoch's share of its node down (NODEDIR/epochs/share.<e>) when it
# plans the epoch, and the shim slices it instead of computing the
# permutation of every sample.  The lists stay exactly what `dstage epoch`
# computes on its own; a share file of another epoch, seed or node, or a
# damaged one, is not taken (the shim computes the list instead), and the
# files go with the epochs they belong to.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

ep() { "$DSTAGE" epoch --to "$SHM" --job "$JOB" "$@"; }
# same_lists E K: node K's lists of epoch E through the shim == dstage epoch's
same_lists() {
	for l in all 0-of-1 0-of-3 1-of-3 2-of-3; do
		if [ $l = all ]; then ep --node "$2" "$1" >want; else ep --node "$2" "$1" $l >want; fi &&
		shim_on "$2" cat "$MOUNT/.dstage/epochs/$1/$l" >got &&
		test -s want && cmp want got || { echo "epoch $1 node $2 $l differs"; return 1; }
	done
}

test_expect_success 'two nodes staged' '
	make_samples src 30 &&
	pack_stage src 2
'
serve_start 2 --seed 9
published() { test -s "$JOBDIR/0/epochs/share.$1" && test -s "$JOBDIR/1/epochs/share.$1"; }
test_expect_success 'the service publishes the shares of the epochs it plans (0 and 1)' '
	serve_up 2 &&
	wait_until 30 published 0 && wait_until 30 published 1
'
test_expect_success 'the lists from the published shares are dstage epoch'"'"'s' '
	same_lists 0 0 && same_lists 0 1 && same_lists 1 0 && same_lists 1 1
'
test_expect_success 'dstage epoch into a full device: exit 1, said' '
	test_status --show err 1 ep --node 0 0 >/dev/full 2>err &&
	test_grep "standard output: No space left on device" err
'
# share_edit FILE reverse | set ID: a published share file (header 80
# bytes: the count at 64, the ids' CRC-32C at 72) with its ids reversed, or
# its middle id set to ID, the CRC made right again
cat >share_edit.py <<'EOF'
import struct, sys
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF
d = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack_from("<Q", d, 64)[0]
if sys.argv[2] == "reverse":
    ids = list(struct.unpack_from("<%dI" % n, d, 80))[::-1]
    d[80:] = struct.pack("<%dI" % n, *ids)
else:
    struct.pack_into("<I", d, 80 + 4 * (n // 2), int(sys.argv[3]))
struct.pack_into("<I", d, 72, crc32c(bytes(d[80:])))
open(sys.argv[1], "wb").write(bytes(d))
EOF
share_edit() { "$PY" share_edit.py "$@"; }

test_expect_success 'the shim takes the published share (one rewritten in reverse, CRC fixed)' '
	f="$JOBDIR/0/epochs/share.1" && cp "$f" saved &&
	share_edit "$f" reverse &&
	ep --node 0 1 | tac >want &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >got && cmp want got &&
	cp saved "$f" && same_lists 1 0
'
test_expect_success 'a published id that is not a usable sample fails the list (EIO), not a read' '
	f="$JOBDIR/0/epochs/share.1" && cp "$f" saved &&
	# the root (a directory), an id past the index, the largest id
	for bad in 0 1000000 4294967295; do
		share_edit "$f" set $bad || exit 1
		test_status 1 shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >out 2>err &&
		test_grep "Input/output error" err && cp saved "$f" || exit 1
	done &&
	same_lists 1 0
'
# (readers are in epoch 1 now: the service keeps 1 and 2, dropped 0)
test_expect_success 'a damaged share file is not taken (CRC, size)' '
	wait_until 30 published 2 &&
	f="$JOBDIR/0/epochs/share.1" && cp "$f" saved &&
	size=$(stat -c %s "$f") &&
	printf "\377\377\377\377" | dd of="$f" bs=1 seek=$((size - 4)) conv=notrunc 2>/dev/null &&
	! cmp -s saved "$f" && same_lists 1 0 &&
	head -c $((size - 4)) saved >"$f" && same_lists 1 0 &&
	cp saved "$f"
'
test_expect_success 'a share file of another node or epoch is not taken' '
	cp "$JOBDIR/1/epochs/share.1" saved &&
	cp "$JOBDIR/0/epochs/share.1" "$JOBDIR/1/epochs/share.1" &&
	same_lists 1 1 &&
	cp saved "$JOBDIR/1/epochs/share.1" &&
	cp "$JOBDIR/0/epochs/share.1" "$JOBDIR/0/epochs/share.7" &&
	same_lists 7 0 && rm -f "$JOBDIR/0/epochs/share.7"
'
test_expect_success 'readers move on: later epochs published, old ones removed' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/8/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/8/all" >/dev/null &&
	wait_until 30 published 9 &&
	same_lists 8 0 && same_lists 9 1 &&
	! test -e "$JOBDIR/0/epochs/share.1" && ! test -e "$JOBDIR/1/epochs/share.2"
'
serve_stop
test_expect_success 'stopped: the shares went with the cache; lists still computed' '
	test "$(cat serve.rc)" = 0 &&
	! test -e "$JOBDIR/0/epochs" &&
	same_lists 5 0
'
test_done
