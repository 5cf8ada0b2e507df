#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A store that never ends: a listing whose continuation token comes back, or
# whose keys come back under new tokens, is refused naming the bucket and
# the token; a body that trickles is cut and the step fails (pack and
# stage), in bounded time; a large object that is slow but steady is not
# cut (the bound scales with its size).  Every command that could hang runs
# under `timeout`: a hang is a failure here, not a stuck suite.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
s3_start
TMPDIR="$TRASH/tmp" && mkdir -p "$TMPDIR" && export TMPDIR
LIMIT=90 # seconds: far above what each command needs (a few seconds)

nostore() {
	! ls "$SHM/dstage.$(id -u).$1"/* 2>/dev/null | grep -v /lock
}

# through the proxy started last, never longer than LIMIT
via_proxy() {
	AWS_ENDPOINT_URL=$S3_PROXY_URL timeout -k 5 $LIMIT "$@"
}

test_expect_success 'setup: a tree in the bucket, its pack too' '
	mkdir -p src/d && seq 1 500 >src/d/a && seq 1 5000 >src/b &&
	head -c 1000000 /dev/urandom >src/big &&
	"$S3TOOL" put-tree src s3://data/tree &&
	"$DSTAGE" pack -q -p 2 src pack && "$S3TOOL" put-tree pack s3://data/pk
'

test_expect_success 'listing: a continuation token that comes back is refused, named' '
	s3_proxy looptoken 1 &&
	test_status --show err 1 via_proxy "$DSTAGE" pack s3://data/tree dst 2>err &&
	test_grep "s3://data/tree/.: listing: continuation token .same-token. came back (page 2)" err &&
	test "$(s3_faults)" = 2 && ! test -e dst
'

test_expect_success 'listing: keys that come back under new tokens are refused, named' '
	s3_proxy loopkeys 1 &&
	test_status --show err 1 via_proxy "$DSTAGE" pack s3://data/tree dst 2>err &&
	test_grep "s3://data/tree/.: listing: key .tree/[a-z/]*. listed twice (page 2, after continuation token .token-1.)" err &&
	test "$(s3_faults)" = 2 && ! test -e dst
'

test_expect_success 'a listing whose body trickles is cut and retried, then the pack fails' '
	export S3_PROXY_MATCH="^GET .*list-type=2" &&
	s3_proxy trickle 1 && unset S3_PROXY_MATCH &&
	DSTAGE_S3_TIMEOUT=2 DSTAGE_S3_RETRY_SECS=3 \
		test_status --show err 1 via_proxy "$DSTAGE" pack s3://data/tree dst 2>err &&
	test_grep "s3://data/tree/.: too slow: .* (DSTAGE_S3_MIN_RATE 64.0 KiB/s); gave up after [0-9]* attempts" err &&
	! test -e dst
'

test_expect_success 'an object whose body trickles is cut and retried, then the pack fails' '
	export S3_PROXY_MATCH="^GET /data/tree/b\$" &&
	s3_proxy trickle 1 && unset S3_PROXY_MATCH &&
	DSTAGE_S3_TIMEOUT=2 DSTAGE_S3_RETRY_SECS=3 \
		test_status --show err 1 via_proxy "$DSTAGE" pack s3://data/tree dst 2>err &&
	test_grep "s3://data/tree/b.: too slow: " err && ! test -e dst
'

test_expect_success 'stage: a partition whose ranged GETs trickle fails every rank, no store' '
	export S3_PROXY_MATCH="^GET /data/pk/part-00001" &&
	s3_proxy trickle 1 && unset S3_PROXY_MATCH &&
	DSTAGE_S3_TIMEOUT=2 DSTAGE_S3_RETRY_SECS=3 \
		test_status --show err 1 via_proxy mpiexec.mpich -n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" \
		--node-per-rank --job tr 2>err &&
	test_grep "s3://data/pk/part-00001.h5.: too slow: " err && nostore tr
'

# 1 MB at 256 KiB/s: about 4 s, far above DSTAGE_S3_TIMEOUT, far below its
# bound, 2 s + 1 MB / 32 KiB/s = 32.5 s (with DSTAGE_S3_MIN_RATE=1GiB, a
# bound that does not scale, it is cut)
test_expect_success 'a large object, slow but steady, is not cut: the bound scales with size' '
	export S3_PROXY_MATCH="^GET /data/tree/big\$" S3_PROXY_RATE=262144 &&
	s3_proxy slow 1 && unset S3_PROXY_MATCH S3_PROXY_RATE &&
	DSTAGE_S3_TIMEOUT=2 DSTAGE_S3_MIN_RATE=32KiB \
		via_proxy "$DSTAGE" pack s3://data/tree slowpack >out 2>err &&
	cat out err && test "$(s3_faults)" = 1 && test_grep "requests, .* 0 retries" out &&
	"$DSTAGE" cat slowpack big | cmp - src/big
'

test_done
