#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage stage s3://BUCKET/PREFIX --to DIR against a real S3 server (s3rver
# on loopback): the round trip tree -> pack -> bucket -> stage -> shim reads
# identical on every node; every payload byte fetched once for R=1 and R=2
# on 2 to 4 ranks; injected faults (503 SlowDown, cut connections, truncated
# bodies: through t/helpers/s3-fault-proxy.py) are retried to success; a
# server that stays down, is stopped mid-stage, or a missing pack: exit 1 on
# every rank, no store left behind.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
s3_start

# the payload line of the summary: fetched once, exactly what the pack stores
once() {
	test_grep "^read from s3://data/pk: [0-9]* bytes (payload \([0-9]*\) .*pack stores \1)" "$1" &&
	test_grep "^s3: [0-9]* requests, " "$1"
}

nostore() {
	! ls "$SHM/dstage.$(id -u).$1"/* 2>/dev/null | grep -v /lock
}

test_expect_success 'setup: a tree packed into 5 partitions, the pack uploaded' '
	make_tree "$TRASH/src" &&
	rm "$TRASH/src/links/loop1" "$TRASH/src/links/loop2" "$TRASH/src/links/dangling" \
		"$TRASH/src/links/self" "$TRASH/src/a/b/up" "$TRASH/src/modes/m000" &&
	touch_root "$TRASH/src" &&
	"$DSTAGE" pack -q -p 5 -z zlib "$TRASH/src" pack &&
	"$S3TOOL" put-tree pack s3://data/pk &&
	du -cb pack/* | tail -n 1 | cut -f1 >packbytes
'

test_expect_success 'stage from s3:// on 2 nodes, R=2: payload fetched once' '
	mpirun_n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank --job r2 -R 2 >out &&
	cat out && once out &&
	test_grep "^staged .* on 2 node(s), R=2" out &&
	test_grep "^s3: [0-9]* requests, [0-9]* bytes fetched, 0 retries" out &&
	fetched=$(sed -n "s/^s3: [0-9]* requests, \([0-9]*\) bytes fetched.*/\1/p" out) &&
	test "$fetched" -le "$(cat packbytes)"
'

run_both() {
	for node in 0 1; do
		(cd "$TRASH/src" && eval "$1") >native.out &&
		LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$SHM/dstage.$(id -u).$2" DSTAGE_MOUNT="$MOUNT" \
			DSTAGE_NODE=$node sh -c "cd $MOUNT && $1" >staged.out &&
		test_cmp native.out staged.out || return 1
	done
}

test_expect_success 'shim reads on node 0 and node 1 equal the source tree' '
	run_both "find . -mindepth 1 -printf \"%p %s %m %y %l %T@\n\" | sort" r2 &&
	run_both "find . -type f | sort | xargs -d \"\\n\" sha256sum" r2
'

test_expect_success 'R=1 on 3 ranks and R=2 on 4 ranks: each byte fetched once' '
	mpirun_n 3 "$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank --job r1 -R 1 >out1 &&
	once out1 &&
	mpirun_n 4 "$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank --job r24 -R 2 >out4 &&
	once out4 && test_grep "forwarded over MPI" out4
'

for mode in 503 cut short; do
	s3_proxy $mode 2 4
	test_expect_success "faults ($mode, every 2nd GET, 4 of them) are retried to success" '
		AWS_ENDPOINT_URL='"$S3_PROXY_URL"' mpirun_n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" \
			--node-per-rank --job f'$mode' -R 2 >out 2>err &&
		cat out err && test "$(s3_faults)" = 4 &&
		test_grep "^s3: [0-9]* requests, [0-9]* bytes fetched, 4 retries" out &&
		test_grep "payload \([0-9]*\) .*pack stores \1)" out &&
		run_both "find . -type f | sort | xargs -d \"\\n\" sha256sum" f'$mode'
	'
done

s3_proxy 503 1
test_expect_success 'a store that answers 503 forever: bounded retries, exit 1, nothing left' '
	start=$(date +%s) &&
	test_status --show err 1 mpirun_n 2 env AWS_ENDPOINT_URL='"$S3_PROXY_URL"' DSTAGE_S3_RETRY_SECS=2 "$DSTAGE" stage \
		s3://data/pk --to "$SHM" --node-per-rank --job down -R 2 2>err &&
	test $(( $(date +%s) - start )) -lt 30 &&
	test_grep "s3://data/pk/index.h5.: HTTP 503 SlowDown; gave up after" err &&
	nostore down
'
s3_proxy_stop

# The server is stopped once the index's header and partitions table are
# broadcast (the fault point says so, and sleeps 2 s), before its entries
# stream (ranged GETs of index.h5) and any partition is read, and stays
# stopped until the step has ended: no guess of how long MPI takes to start.
test_expect_success 'the server stopped mid-stage: exit 1 on every rank, no store left' '
	DSTAGE_FAULT=stage.after_bcast:action=sleep:secs=2 DSTAGE_S3_RETRY_SECS=2 \
		mpirun_n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank --job cut -R 2 \
		2>err & pid=$! &&
	k=0 && until grep -q "fault injected at .stage.after_bcast." err; do
		proc_running $pid && [ $k -lt 600 ] || break
		sleep 0.1 && k=$((k + 1)) || exit 1
	done &&
	kill -STOP '"$S3_PID"' && rc=0 && { wait $pid || rc=$?; } && kill -CONT '"$S3_PID"' && cat err &&
	test_grep "s3://data/pk/\(index\|part-0000[0-9]\).h5.: .*gave up after" err &&
	nostore cut && test $rc = 1
'

test_expect_success 'a pack that is not in the bucket: exit 1, named' '
	test_status --show err 1 mpirun_n 2 "$DSTAGE" stage s3://data/nopack --to "$SHM" --node-per-rank --job np 2>err &&
	test_grep "s3://data/nopack/index.h5.: no such key" err && nostore np
'

test_expect_success 'a wrong access key: exit 1, the secret never printed' '
	test_status --show err 1 mpirun_n 2 env AWS_ACCESS_KEY_ID=BAD AWS_SECRET_ACCESS_KEY=TopSecret42 DSTAGE_LOG=debug \
		"$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank --job bk >out 2>err &&
	test_grep "access denied (403 InvalidAccessKeyId)" err &&
	! grep -q TopSecret42 out err && nostore bk
'

test_done
