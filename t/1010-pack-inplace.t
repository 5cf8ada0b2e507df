#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage pack --in-place SRC OUT (issue 28): OUT holds only the manifest (a
# small fraction of SRC); ls, cat, verify and stage read the files where they
# are; a file changed after the pack is caught and named.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'

test_expect_success 'a tree, packed in place (serial, and on 2 ranks: the same bytes)' '
	"$T/mksample" -c 3 -n 12 -v 2 src && head -c 3000000 /dev/urandom >src/train/big.bin &&
	seq 1 30000 >src/train/numbers.txt && : >src/train/empty && ln -s numbers.txt src/train/link &&
	find src -type f | sed "s|^src/||" | sort >files &&
	"$DSTAGE" pack --in-place src out >out.log &&
	test_grep "indexed $(wc -l <files) files" out.log &&
	mpirun_n 2 "$DSTAGE" pack -q --in-place src out2 && cmp out/index.h5 out2/index.h5 &&
	ls out >names && echo index.h5 >want && test_cmp want names
'

test_expect_success 'OUT is a small fraction of SRC' '
	src=$(find src -type f -exec cat {} + | wc -c) && idx=$(stat -c %s out/index.h5) &&
	echo "src $src index $idx" && test $((idx * 50)) -lt $src
'

test_expect_success 'ls lists what a pack of the same tree lists' '
	"$DSTAGE" pack -q src full && "$DSTAGE" ls -l out >ls-in && "$DSTAGE" ls -l full >ls-full &&
	test_cmp ls-full ls-in
'

test_expect_success 'verify (and --against SRC) reads every file where it is: ok' '
	"$DSTAGE" verify out >v && test_grep "$(wc -l <files) files .* ok, 0 problems" v &&
	"$DSTAGE" verify --against src out
'

test_expect_success 'cat gives back every file' '
	while read -r f; do
		"$DSTAGE" cat out "$f" | cmp - "src/$f" || { echo "differs: $f"; exit 1; }
	done <files
'

test_expect_success STRACE 'stage of OUT on 3 nodes, R=2: bytes and CRCs right, each file opened once' '
	mkdir trace.d && strace -ff -qq -s 4096 -e trace=openat,openat2,open -o trace.d/t \
		$ds_mpiexec -n 3 "$DSTAGE" stage out --to "$SHM" --job s1 -R 2 --node-per-rank >st &&
	cat trace.d/t.* >trace &&
	"$T/storecheck" "$SHM/dstage.$uid.s1" src >holders &&
	awk "\$2 != 2" holders >wrong && test_cmp /dev/null wrong &&
	test_grep "in place from .$PWD/src.: opened $(wc -l <files) source files" st &&
	while read -r f; do
		n=$(grep -c -F "\"$f\"" trace || test $? = 1) &&
		test "$n" = 1 || { echo "$f opened $n times"; exit 1; }
	done <files
'

test_expect_code 1 'a file changed after the pack (same size and mtime): its CRC names it' '
	cp -p src/train/numbers.txt keep && touch -r src/train/numbers.txt ref &&
	sed -i "s/^1$/9/" src/train/numbers.txt && touch -r ref src/train/numbers.txt &&
	cmp -s keep src/train/numbers.txt && exit 9
	mpirun_n 2 "$DSTAGE" stage out --to "$SHM" --job c1 --node-per-rank 2>err; rc=$?
	cat err
	test_grep "src/train/numbers.txt.*checksum mismatch.*changed since the in-place pack" err ||
		exit 9
	test ! -e "$SHM/dstage.$uid.c1" || exit 9
	! "$DSTAGE" cat out train/numbers.txt >/dev/null 2>cerr || exit 9
	test_grep "checksum mismatch" cerr || exit 9
	! "$DSTAGE" verify out >/dev/null 2>verr || exit 9
	test_grep "numbers.txt" verr || exit 9
	exit $rc
'

test_expect_code 1 'a file that grew after the pack: named when it is opened' '
	cp -p keep src/train/numbers.txt && echo more >>src/train/numbers.txt &&
	mpirun_n 2 "$DSTAGE" stage out --to "$SHM" --job c2 --node-per-rank 2>err; rc=$?
	cat err
	test_grep "src/train/numbers.txt.: changed since the in-place pack was made" err || exit 9
	test ! -e "$SHM/dstage.$uid.c2" || exit 9
	exit $rc
'

test_expect_code 1 'a file removed after the pack: named' '
	cp -p keep src/train/numbers.txt && rm src/train/empty &&
	mpirun_n 2 "$DSTAGE" stage out --to "$SHM" --job c3 --node-per-rank 2>err; rc=$?
	cat err
	test_grep "src/train/empty.: vanished since the in-place pack was made" err || exit 9
	exit $rc
'

test_expect_code 1 'a directory of SRC swapped for a symlink after the pack: not followed' '
	: >src/train/empty && touch -r ref src/train/empty &&
	mv src/val elsewhere-val && ln -s ../elsewhere-val src/val &&
	"$DSTAGE" verify out 2>err; rc=$?
	cat err
	test_grep "src/val/.*symlink" err || exit 9
	exit $rc
'

test_expect_code 2 '--in-place with -z: usage' '"$DSTAGE" pack --in-place -z zlib src o3'
test_expect_code 2 '--in-place with --dereference: usage' '
	"$DSTAGE" pack --in-place --dereference src o4'

test_done
