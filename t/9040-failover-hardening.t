#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failover hardening (docs/failover.md): bad --nodes, a damaged JOBDIR/nodes
# or replica map, bad `dstage epoch` input and resume states, R = 1 (a loss
# loses data: EIO within the bound, named), and re-replication on a full
# disk (the capacity check: named, skipped, the service serves on).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

running() { running_in "$JOBDIR" "$@"; }
# running_in JOBDIR K...: the service of every node K serves
running_in() {
	d=$1
	shift
	for i in "$@"; do
		grep -qs ^state=running "$d/$i/serve.status" && test -S "$d/$i/sock" || return 1
	done
}
ep() { "$DSTAGE" epoch --to "$SHM" --job "$JOB" "$@"; }
# code STATUS CMD...: CMD exits with exactly STATUS
code() {
	want=$1
	shift
	"$@" >/dev/null 2>&1
	got=$?
	[ "$got" = "$want" ] || { echo "'$*': exit $got, want $want"; return 1; }
}

test_expect_success 'two nodes staged with R=1' '
	make_samples src 12 &&
	pack_stage src 2
'
test_expect_success 'bad --nodes: refused on every rank, named, exit 1' '
	for bad in 0-1,1 1-0 x 0,,1 -1 0-; do
		! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank --nodes "$bad" 2>err || exit 1
		grep -q "^dstage: serve: --nodes .$bad.: not a list of node numbers" err || { cat err; exit 1; }
	done &&
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank --nodes 0 2>err &&
	grep -q "names 1 node(s), this step runs 2" err &&
	! mpirun_n 1 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank --nodes 5 2>err &&
	cat err && grep -q "5/index.*run dstage stage first" err
'
test_expect_success 'a damaged JOBDIR/nodes: serve refuses, the shim gives EIO, epoch says so' '
	printf "version=1\nstaged=2\nfrom=0 nodes=0-9\n" >"$JOBDIR/nodes" &&
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank 2>err &&
	cat err && grep -q "nodes.: .*corrupt" err &&
	! shim_on 0 cat "$MOUNT/.dstage/epochs/0/all" >/dev/null 2>err && cat err &&
	grep -q "Input/output error" err &&
	! ep --node 0 0 2>err && grep -q "nodes.: .*corrupt" err &&
	rm "$JOBDIR/nodes"
'
test_expect_success 'dstage epoch: bad input is a usage error, a missing state a failure' '
	code 2 ep &&
	code 2 ep x &&
	code 2 ep 0 3-of-2 &&
	code 2 ep 0 0-of-0 &&
	code 2 ep --state 0 &&
	code 2 ep --readers 0 --state 0 1 &&
	code 1 ep --resume nothing.json &&
	code 1 ep --node 7 0
'
serve_start 2 --failover
test_expect_success 'served (R=1, --failover)' 'serve_up 2'
test_expect_success 'a resume state with damaged fields is refused, named' '
	ep --state 0 1 >state.json &&
	for pat in "s/\"version\": 1/\"version\": 9/" "s/\"samples\": [0-9]*/\"samples\": 3/" \
	           "s/\"nodes\": \"0-1\"/\"nodes\": \"1-0\"/" "s/\"readers\": 1/\"readers\": 0/" \
	           "s/\"pack_id\": \"[0-9a-f]*\"/\"pack_id\": \"0\"/" "s/dstage-resume/other/"; do
		sed "$pat" state.json >bad.json && ! ep --node 0 --resume bad.json 2>err || exit 1
		grep -q "bad.json" err || { cat err; exit 1; }
	done
'
"$DSTAGE_TEST_BUILD/t/index-holders" "$JOBDIR/0/index" | awk '$2 == "1" { print $1 }' | sort >only1
test_expect_success 'R=1, node 1 lost: its files EIO at once, named; the rest right' '
	test -s only1 && kill -KILL "$(node_pid 1)"
'
serve_wait
serve_start 1 --nodes 0
test_expect_success 'restarted on node 0 alone' 'wait_until 60 running 0'
test_expect_success 'node 1 files: EIO within 2 s each, named; node 0 files: right bytes' '
	for f in $(cd src && find train -type f); do
		t0=$(date +%s) || exit 1
		if DSTAGE_TIMEOUT=20 shim_on 0 cat "$MOUNT/$f" >got 2>err; then
			cmp -s got "src/$f" || { echo "wrong bytes: $f"; exit 1; }
			! grep -qx "$f" only1 || { echo "$f should be lost"; exit 1; }
		else
			grep -qx "$f" only1 && grep -q "$f.: lost" err || { cat err; exit 1; }
			test $(( $(date +%s) - t0 )) -le 2 || { echo "slow EIO: $f"; exit 1; }
		fi
	done
'
serve_stop
test_expect_success 'stopped' 'test "$(cat serve.rc)" = 0'

# ---- re-replication on a full disk and with a damaged map ------------------
mkdir -p small
if test_have_prereq TMPFS; then
	mount -t tmpfs -o size=256m,mode=0755 tmpfs small
	SMALL=$TRASH/small
	JOB2=${JOB}s
	J2="$SMALL/dstage.$(id -u).$JOB2"
	# R=3 and --locality 1: after a loss every survivor still holds 3/4 of
	# the data, so the epochs need no cache while the copies need room
	test_expect_success 'a store of 4 nodes, R=3, on a tmpfs of its own' '
		make_samples big 4 65536 &&
		"$DSTAGE" pack -p 8 big bigpack >/dev/null &&
		mpirun_n 4 "$DSTAGE" stage bigpack --to "$SMALL" --job $JOB2 --node-per-rank -R 3 -q
	'
	mpirun_n 4 "$DSTAGE" serve --to "$SMALL" --job $JOB2 --node-per-rank --failover --locality 1 \
		>serve2.log 2>&1 &
	S2=$!
	test_bg $S2
	test_expect_success 'served; node 2 lost; the disk filled up to 64 KiB' '
		wait_until 60 running_in "$J2" 0 1 2 3 &&
		kill_ranks KILL "$(sed -n "s/^pid=//p" "$J2/2/serve.status")" &&
		{ wait $S2 || :; } &&
		free=$(df -B1 --output=avail "$SMALL" | tail -1) &&
		head -c $((free - 65536)) /dev/zero >"$SMALL/filler"
	'
	DSTAGE_LOG=info mpirun_n 3 "$DSTAGE" serve --to "$SMALL" --job $JOB2 --node-per-rank \
		--nodes 0-1,3 --locality 1 >serve3.log 2>&1 &
	S3=$!
	test_bg $S3
	test_expect_success 'the copies that do not fit are named and skipped; the service serves' '
		wait_until 60 sh -c "grep -q \"do not fit\" serve3.log" && cat serve3.log &&
		grep -q "re-replication: .* partition(s) (.*) do not fit in the free space" serve3.log &&
		! ls "$J2"/*/replicas.*.map 2>/dev/null &&
		for f in $(cd big && find train -type f); do
			env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$J2" DSTAGE_NODE=0 DSTAGE_MOUNT="$MOUNT" \
				cat "$MOUNT/$f" | cmp -s - "big/$f" || { echo "bad $f"; exit 1; }
		done
	'
	"$DSTAGE" stop --to "$SMALL" --job $JOB2 >/dev/null 2>&1
	wait $S3
	test_expect_success 'a damaged replica map: the copies are not used, said so' '
		rm -f "$SMALL/filler" &&
		mkdir -p "$J2/0" && printf "0 0 999999999\n" >"$J2/0/replicas.0.map" &&
		: >"$J2/0/replicas.0" &&
		mpirun_n 3 "$DSTAGE" serve --to "$SMALL" --job $JOB2 --node-per-rank --nodes 0-1,3 \
			--no-rereplicate >serve4.log 2>&1 &
		p=$! && wait_until 60 test -S "$J2/0/sock" &&
		"$DSTAGE" stop --to "$SMALL" --job $JOB2 && wait $p &&
		cat serve4.log && grep -q "not a map of this store: copies not used" serve4.log &&
		test ! -e "$J2/0/replicas.0"
	'
	rm -rf "$J2"
	umount "$SMALL"
else
	test_expect_success TMPFS 'the capacity check of re-replication' :
fi
test_done
