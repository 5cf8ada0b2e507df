#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage stage SRC where SRC is a plain tree, not a pack (issue 28): every
# byte and CRC right on every holder, -R, --replicate, the spill tier, the
# same stores for any number of ranks, each file opened once per job.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

uid=$(id -u)
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'

test_expect_success 'a plain tree: classes, a validation set, an empty file, a symlink' '
	"$T/mksample" -c 3 -n 12 -v 2 src && seq 1 30000 >src/train/numbers.txt &&
	: >src/train/empty && ln -s numbers.txt src/train/link &&
	find src -type f | sed "s|^src/||" | sort >files &&
	bytes=$(find src -type f -exec cat {} + | wc -c) && echo $bytes >bytes
'

test_expect_success 'stage SRC on 3 simulated nodes, R=1: every file on one node, bytes and CRC right' '
	mpirun_n 3 "$DSTAGE" stage src --to "$SHM" --job t1 --node-per-rank >out &&
	"$T/storecheck" "$SHM/dstage.$uid.t1" src >holders &&
	cut -d" " -f1 holders >got && test_cmp files got &&
	awk "\$2 != 1" holders >wrong && test_cmp /dev/null wrong &&
	test_grep "staged $(wc -l <files) files" out &&
	test_grep "read from shared FS: $(cat bytes) bytes (payload $(cat bytes) + manifest 0 " out &&
	test_grep "opened $(wc -l <files) source files" out
'

test_expect_success 'R=2 and --replicate val: two holders, val on all three, still read once' '
	mpirun_n 3 "$DSTAGE" stage src --to "$SHM" --job t2 -R 2 --replicate val --node-per-rank \
		>out2 &&
	"$T/storecheck" "$SHM/dstage.$uid.t2" src >holders2 &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 3 : \$2 != 2" holders2 >wrong2 &&
	test_cmp /dev/null wrong2 &&
	test_grep "read from shared FS: $(cat bytes) bytes" out2 &&
	test_grep "forwarded over MPI: [1-9]" out2
'

test_expect_success STRACE 'each source file opened once in the whole job (strace), 3 nodes, R=3' '
	mkdir trace.d && strace -ff -qq -s 4096 -e trace=openat,openat2,open -o trace.d/t \
		$ds_mpiexec -n 3 "$DSTAGE" stage src --to "$SHM" --job t3 -R 3 --node-per-rank -q &&
	cat trace.d/t.* >trace &&
	"$T/storecheck" "$SHM/dstage.$uid.t3" src >/dev/null &&
	while read -r f; do
		n=$(grep -c -F "\"$f\"" trace || test $? = 1) &&
		test "$n" = 1 || { echo "$f opened $n times"; exit 1; }
	done <files
'

test_expect_success 'the stores do not depend on the number of ranks sharing the walk' '
	mpirun_n 1 "$DSTAGE" stage src --to "$SHM" --job w1 -q &&
	mpirun_n 3 "$DSTAGE" stage src --to "$SHM" --job w3 -q &&
	cmp "$SHM/dstage.$uid.w1/0/store" "$SHM/dstage.$uid.w3/0/store" &&
	"$T/storecheck" "$SHM/dstage.$uid.w3" src >/dev/null
'

test_expect_success STRACE 'the walk is shared: every rank lists directories of a one-directory tree' '
	for c in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15; do
		mkdir -p one/train/c$c/s && seq 1 $((1$c * 7)) >one/train/c$c/f && echo $c >one/train/c$c/s/g || exit 1
	done &&
	mkdir wtrace.d && strace -ff -qq -s 4096 -e trace=openat2,openat -o wtrace.d/t \
		$ds_mpiexec -n 3 "$DSTAGE" stage one --to "$SHM" --job one --node-per-rank -q &&
	grep -l "\"train/c.*O_DIRECTORY" wtrace.d/t.* >pids &&
	test "$(wc -l <pids)" = 3 &&
	"$T/storecheck" "$SHM/dstage.$uid.one" one >h1 && test "$(wc -l <h1)" = 32 &&
	mpirun_n 1 "$DSTAGE" stage one --to "$SHM" --job one1 -q &&
	mpirun_n 3 "$DSTAGE" stage one --to "$SHM" --job one3 -q &&
	cmp "$SHM/dstage.$uid.one1/0/store" "$SHM/dstage.$uid.one3/0/store"
'

test_expect_success 'the spill tier: what does not fit the RAM room goes to --spill' '
	mkdir spill &&
	DSTAGE_RAM_ROOM=$(( $(cat bytes) / 3 )) mpirun_n 2 "$DSTAGE" stage src --to "$SHM" \
		--job sp --spill "$PWD/spill" --node-per-rank -q &&
	"$T/storecheck" "$SHM/dstage.$uid.sp" src >/dev/null &&
	test -s spill/dstage.$uid.sp/0/store
'

timeout -k 5 "${DSTAGE_TEST_MPI_TIMEOUT:-120}" $ds_mpiexec -n 2 \
	"$DSTAGE" run src --to "$SHM" --job "$JOB" --node-per-rank -q >serve.log 2>&1 &
SERVE_PID=$!
test_bg $SERVE_PID
test_expect_success 'dstage run SRC: the tree staged and served' 'serve_up 2'
test_expect_success 'every file read through the shim on node 1 is the source file' '
	while read -r f; do
		shim_on 1 cat "$MOUNT/$f" | cmp - "src/$f" || { echo "differs: $f"; exit 1; }
	done <files &&
	test "$(shim_on 1 readlink "$MOUNT/train/link")" = numbers.txt
'
serve_stop
test_expect_success 'dstage stop ends the run, exit 0' 'test "$(cat serve.rc)" = 0'

test_expect_code 1 '--replicate of a path not in the tree: refused, nothing staged' '
	mpirun_n 2 "$DSTAGE" stage src --to "$SHM" --job bad --replicate nosuch --node-per-rank \
		2>err; rc=$?
	test_grep "dstage: stage: .nosuch.: --replicate path not in the staged tree" err || exit 9
	test ! -e "$SHM/dstage.$uid.bad" || exit 9
	exit $rc
'

test_expect_code 1 'an empty tree is refused' '
	mkdir empty && mpirun_n 2 "$DSTAGE" stage empty --to "$SHM" --job e --node-per-rank 2>err;
	rc=$?; test_grep "nothing to stage" err || exit 9; exit $rc
'

test_done
