#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim on a store made by the real pipeline: dstage pack, then dstage
# stage on 2 simulated nodes (mpiexec, --node-per-rank); readers on either
# node see the source tree, and count their reads in the node's stats.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_require MPI

test_expect_success 'pack and stage a tree on 2 nodes (R=2), then R=1' '
	make_tree "$TRASH/src" &&
	rm "$TRASH/src/links/loop1" "$TRASH/src/links/loop2" "$TRASH/src/links/dangling" \
		"$TRASH/src/links/self" "$TRASH/src/a/b/up" "$TRASH/src/modes/m000" &&
	touch_root "$TRASH/src" &&
	"$DSTAGE" pack -q -p 3 -z zlib "$TRASH/src" pack &&
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --node-per-rank --job st2 -R 2 -q &&
	test -f "$SHM/dstage.$(id -u).st2/1/index"
'

run_both() {
	for node in 0 1; do
		(cd "$TRASH/src" && eval "$1") >native.out &&
		LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$SHM/dstage.$(id -u).$2" DSTAGE_MOUNT="$MOUNT" \
			DSTAGE_NODE=$node sh -c "cd $MOUNT && $1" >staged.out &&
		test_cmp native.out staged.out || return 1
	done
}

test_expect_success 'find and sha256sum on node 0 and node 1 equal the source' '
	run_both "find . -mindepth 1 -printf \"%p %s %m %y %l %T@\n\" | sort" st2 &&
	run_both "find . -type f | sort | xargs -d \"\\n\" sha256sum" st2 &&
	run_both "ls -lR --time-style=full-iso . | grep -v ^total" st2
'

test_expect_success 'the stats of node 1 count opens and local reads' '
	"$PY" -c "
import struct, sys
v = struct.unpack(\"<32Q\", open(sys.argv[1], \"rb\").read(256))
assert v[2] > 0 and v[3] > 0 and v[4] > 0, v[:12]
" "$SHM/dstage.$(id -u).st2/1/stats"
'

test_expect_success 'R=1: node-local files read, the others need the service (EIO without)' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --node-per-rank --job st1 -R 1 -q &&
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$SHM/dstage.$(id -u).st1" DSTAGE_MOUNT="$MOUNT" \
		DSTAGE_NODE=0 DSTAGE_TIMEOUT=1 "$PY" -c "
import os, sys, errno
ok = eio = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        p = os.path.join(d, f)
        if os.path.islink(p): continue
        try: open(p, \"rb\").read(); ok += 1
        except OSError as e: assert e.errno == errno.EIO, e; eio += 1
print(ok, eio); assert ok > 0 and eio > 0
" "$MOUNT"
'

test_done
