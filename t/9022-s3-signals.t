#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# SIGINT and SIGTERM end pack and stage in every phase that talks to a
# bucket (the listing, a GET, a multipart upload, stage's ranged GETs) while
# the request hangs: the step fails with "interrupted by SIG...", exit 1 as
# any failure, every rank ends, nothing half-written is left (no OUT, no
# node store, no key and no multipart upload in the bucket).  The proxy
# holds the request for 10 minutes and DSTAGE_S3_TIMEOUT is 300 s: only the
# signal can end the step within the 60 s the test waits.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
s3_start
TMPDIR="$TRASH/tmp" && mkdir -p "$TMPDIR" && export TMPDIR

nostore() {
	! ls "$SHM/dstage.$(id -u).$1"/* 2>/dev/null | grep -v /lock
}

# ranks PID: the dstage processes under PID (mpiexec, its proxies, the ranks)
ranks() {
	for _c in $(ps -o pid= --ppid "$1"); do
		if [ "$(ps -o comm= -p "$_c")" = dstage ]; then echo "$_c"; else ranks "$_c"; fi
	done
}

# interrupt REGEX SIG WHO CMD...: CMD runs through a proxy that holds the
# requests matching REGEX ("METHOD PATH?QUERY"); once one is held, SIG goes
# to WHO: "cmd" the command itself (dstage, or mpiexec, which forwards it to
# every rank), "ranks" every dstage rank under it (as srun delivers it).
# CMD must end within 60 s of it (else it is killed).  Its status is
# returned, its output is in int.out and int.err.  No timeout(1) around
# CMD: it would send the signal twice (to CMD and to its process group),
# and a second SIGINT makes mpiexec abort.
interrupt() {
	export S3_PROXY_MATCH="$1" S3_PROXY_LOG_ALL=1 && s3_proxy hold 1 &&
	unset S3_PROXY_MATCH S3_PROXY_LOG_ALL || return 99
	_sig=$2 _who=$3
	shift 3
	AWS_ENDPOINT_URL=$S3_PROXY_URL DSTAGE_S3_TIMEOUT=300 "$@" >int.out 2>int.err &
	_pid=$!
	_i=0
	until grep -q "^fault" "$TRASH/proxy.log"; do
		_i=$((_i + 1))
		[ $_i -gt 600 ] && { echo "no request was held"; kill -KILL $_pid; return 98; }
		sleep 0.1
	done
	if [ "$_who" = ranks ]; then
		_r=$(ranks $_pid) && test -n "$_r" && echo "ranks: $_r" && kill -$_sig $_r || return 97
	else
		kill -$_sig $_pid
	fi
	_i=0
	while kill -0 $_pid 2>/dev/null; do
		_i=$((_i + 1))
		if [ $_i -gt 600 ]; then
			echo "still running 60 s after SIG$_sig"
			for _r in $(ranks $_pid); do kill -KILL $_r; done
			kill -KILL $_pid
			break
		fi
		sleep 0.1
	done
	wait $_pid
}

test_expect_success 'setup: a tree in the bucket, its pack too' '
	mkdir -p src/d && seq 1 500 >src/d/a && seq 1 5000 >src/b &&
	head -c 6000000 /dev/urandom >src/big &&
	"$S3TOOL" put-tree src s3://data/tree &&
	"$DSTAGE" pack -q -p 2 src pack && "$S3TOOL" put-tree pack s3://data/pk
'

test_expect_success 'pack: SIGINT during the listing' '
	test_status --show int.err 1 interrupt "^GET .*list-type=2" INT cmd "$DSTAGE" pack s3://data/tree dst &&
	test_grep "s3://data/tree/.: interrupted by SIGINT" int.err &&
	test_grep "dst.: pack failed, nothing written" int.err && ! test -e dst
'

test_expect_success 'pack: SIGTERM during an object GET' '
	test_status --show int.err 1 interrupt "^GET /data/tree/b\$" TERM cmd "$DSTAGE" pack s3://data/tree dst &&
	test_grep "s3://data/tree/b.: interrupted by SIGTERM" int.err && ! test -e dst
'

test_expect_success 'pack under mpiexec -n 2: SIGINT to every rank during object GETs' '
	test_status --show int.err 1 interrupt "^GET /data/tree/[bd]" INT ranks mpiexec.mpich -n 2 "$DSTAGE" pack -p 2 s3://data/tree dst &&
	test_grep "^dstage: pack: .s3://data/tree/[a-z/]*.: interrupted by SIGINT" int.err &&
	test_grep "^dstage: pack: rank 1: .s3://data/tree/[a-z/]*.: interrupted by SIGINT" int.err &&
	! test -e dst
'

# mpiexec (hydra) forwards SIGINT to every rank, but its own exit status
# after that is not reliable: 0 in about 1 run of 8 here while every rank
# exited 1.  So this case checks that every rank ended, said why and left
# nothing, not mpiexec's status.
test_expect_success 'stage: SIGINT to mpiexec during ranged GETs, every rank ends, no store' '
	rc=0 && { interrupt "^GET /data/pk/part-00001" INT cmd mpiexec.mpich -n 2 "$DSTAGE" stage s3://data/pk \
		--to "$SHM" --node-per-rank --job sm || rc=$?; } && echo "exit $rc" && cat int.err &&
	test_grep "s3://data/pk/part-00001.h5.: interrupted by SIGINT" int.err && nostore sm
'

test_expect_success 'pack to a bucket: SIGTERM during a multipart upload; no key, upload aborted' '
	test_status --show int.err 1 interrupt "^PUT .*partNumber=2" TERM cmd env DSTAGE_S3_PART_SIZE=5MiB \
		"$DSTAGE" pack -p 1 src s3://data/up &&
	test_grep "s3://data/up/part-00000.h5.: interrupted by SIGTERM" int.err &&
	grep "^request DELETE /data/up/part-00000.h5?uploadId=" "$TRASH/proxy.log" &&
	"$S3TOOL" ls s3://data/up >l && ! test -s l &&
	! ls "$TMPDIR"/dstage-* 2>/dev/null
'

test_expect_success 'a dead store does not hold the cleanup after the signal past its budget' '
	test_status --show int.err 1 interrupt "^PUT .*partNumber=2|^DELETE " TERM cmd env DSTAGE_S3_PART_SIZE=5MiB \
		DSTAGE_S3_RETRY_SECS=3 "$DSTAGE" pack -p 1 src s3://data/dead &&
	test_grep "s3://data/dead/part-00000.h5.: interrupted by SIGTERM" int.err &&
	test_grep "s3://data/dead/part-00000.h5.: cleanup after the signal ran out of time" int.err
'

test_expect_success 'stage: SIGINT to every rank during ranged GETs, exit 1, no store' '
	test_status --show int.err 1 interrupt "^GET /data/pk/part-00001" INT ranks mpiexec.mpich -n 2 "$DSTAGE" stage s3://data/pk \
		--to "$SHM" --node-per-rank --job si &&
	test_grep "s3://data/pk/part-00001.h5.: interrupted by SIGINT" int.err && nostore si
'

test_expect_success 'stage: SIGTERM to every rank while the manifest is fetched, exit 1' '
	test_status --show int.err 1 interrupt "^GET /data/pk/index.h5" TERM ranks mpiexec.mpich -n 2 "$DSTAGE" stage s3://data/pk \
		--to "$SHM" --node-per-rank --job st &&
	test_grep "s3://data/pk/index.h5.: interrupted by SIGTERM" int.err && nostore st
'

test_done
