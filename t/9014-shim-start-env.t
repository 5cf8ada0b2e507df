#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim's start reads its environment without libc (io/init.c: its own
# getenv over environ, the mount, job and node directories packed in one
# buffer, its own number parsing before ds_parse_u64): odd and oversized
# values must be read exactly as getenv + strtoull would, and never
# overflow.  Names that only start like ours are not ours; the longest
# mount and store still leave the program working; numbers with a sign,
# blanks or too many digits go the ds_parse_u64 way.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

PM=$(getconf PATH_MAX / 2>/dev/null || echo 4096)
# long N: "/" and N - 1 more characters
long() { printf '/%*s' "$(($1 - 1))" '' | tr ' ' a; }

test_expect_success 'setup: a tree staged' '
	make_tree src &&
	stage_tree src -N 1 &&
	echo real >real.txt &&
	shim cat "$MOUNT/a/x.txt" | cmp - src/a/x.txt
'

test_expect_success 'a name that only starts like DSTAGE_STORE or DSTAGE_MOUNT is not it' '
	! LD_PRELOAD="$PRELOAD" DSTAGE_STOREX="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE=0 \
		cat "$MOUNT/a/x.txt" 2>err &&
	grep -q "No such file" err &&
	! LD_PRELOAD="$PRELOAD" XDSTAGE_STORE="$JOBDIR" DSTAGE_STORE_="$JOBDIR" DSTAGE_MOUNT="$MOUNT" \
		cat "$MOUNT/a/x.txt" 2>err &&
	grep -q "No such file" err &&
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNTX=/elsewhere DSTAGE_MOUNT="$MOUNT" \
		DSTAGE_NODE=0 cat "$MOUNT/a/x.txt" | cmp - src/a/x.txt
'

test_expect_success 'an empty DSTAGE_STORE: out of the way, named' '
	! LD_PRELOAD="$PRELOAD" DSTAGE_STORE= DSTAGE_MOUNT="$MOUNT" DSTAGE_LOG=info \
		cat "$MOUNT/a/x.txt" 2>err &&
	grep -q "No such file" err &&
	grep -q "DSTAGE_STORE is not set" err
'

test_expect_success 'DSTAGE_NODE with a sign, blanks or 25 digits: read as ds_parse_u64 does' '
	for n in +0 " 0" 00 0000000000000000000000000 99999999999999999999999 -0 x 0x0; do
		LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE="$n" \
			cat "$MOUNT/a/x.txt" | cmp - src/a/x.txt || { echo "DSTAGE_NODE=[$n]"; exit 1; }
	done
'

test_expect_success 'the longest mount (PATH_MAX - 1) with a store: the program runs, real files read' '
	m=$(long $((PM - 1))) &&
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$m" DSTAGE_NODE=0 cat real.txt >out &&
	test "$(cat out)" = real &&
	here=$(pwd) &&
	(cd "$JOBDIR/0" && LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$m" DSTAGE_NODE=0 \
		cat "$here/real.txt") >out &&
	test "$(cat out)" = real
'

test_expect_success 'the longest store (PATH_MAX - 33) and mount together: runs, stays out of the way' '
	m=$(long $((PM - 1))) && s=$(long $((PM - 33))) &&
	! LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$s" DSTAGE_MOUNT="$m" DSTAGE_NODE=4294967294 \
		sh -c "cat real.txt; cat \"$MOUNT/a/x.txt\"" >out 2>err &&
	test "$(cat out)" = real &&
	grep -q "No such file" err
'

test_expect_success 'a store one byte longer: refused and named, the program runs' '
	s=$(long $((PM - 32))) &&
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$s" DSTAGE_MOUNT="$MOUNT" DSTAGE_LOG=info cat real.txt >out 2>err &&
	test "$(cat out)" = real &&
	grep -q "DSTAGE_STORE '"'"'/aaaa" err
'

test_expect_success 'a mount of PATH_MAX bytes: refused and named, the program runs' '
	m=$(long "$PM") &&
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$m" DSTAGE_LOG=info cat real.txt >out 2>err &&
	test "$(cat out)" = real &&
	grep -q "DSTAGE_MOUNT '"'"'/aaaa" err
'

test_done
