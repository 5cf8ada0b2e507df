#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The same tree and options give byte-identical packs serially and under
# mpiexec -n 2 and -n 3; a failure on any rank stops every rank, exit 1,
# nothing left behind.
. "$(dirname "$0")/test-lib.sh"

test_require MPI

# cmp every file of two packs, and that they hold the same files
same_pack() {
	(cd "$1" && ls -A) >a.list && (cd "$2" && ls -A) >b.list &&
	test_cmp a.list b.list &&
	for f in $(cat a.list); do cmp "$1/$f" "$2/$f" || return 1; done
}

test_expect_success 'setup: a tree of several directories' '
	for d in a b c d e; do
		mkdir -p src/$d/sub &&
		i=0 && while [ $i -lt 40 ]; do
			seq 1 $((i * 37 + 1)) >src/$d/f$i && i=$((i + 1)) || exit 1
		done &&
		head -c 20000 /dev/urandom >src/$d/sub/rand
	done &&
	mkdir src/val src/empty && echo v >src/val/v1 && echo w >src/val/v2 &&
	ln -s ../a/f1 src/b/link
'

for opts in "-p 5" "-p 7 -z zlib --replicate val" "-S 20KiB -z zlib:9"; do
	name=$(echo "$opts" | tr -cs "a-zA-Z0-9\n" _)
	test_expect_success "serial pack $opts" '
		$DSTAGE pack -q '"$opts"' src serial'$name' &&
		$DSTAGE verify -q --against src serial'$name'
	'
	test_expect_success "a second serial run is byte-identical ($opts)" '
		sleep 1 && touch src &&
		$DSTAGE pack -q '"$opts"' src again'$name' &&
		same_pack serial'$name' again'$name'
	'
	for n in 2 3; do
		test_expect_success "mpiexec -n $n is byte-identical ($opts)" '
			mpirun_n '$n' $DSTAGE pack -q '"$opts"' src mpi'$n$name' &&
			same_pack serial'$name' mpi'$n$name'
		'
	done
done

test_expect_success 'replicated files have partitions of their own' '
	$DSTAGE ls -l serial_p_7_z_zlib_replicate_val >/dev/null &&
	h5dump -a /nparts serial_p_7_z_zlib_replicate_val/index.h5 >a &&
	test_grep "(0): 8" a
'

test_expect_success 'a file vanishing on rank 1: every rank exits 1, nothing left' '
	test_status 1 mpirun_n 2 env DSTAGE_TEST_AFTER_SCAN="rm src/e/f39" $DSTAGE pack -p 2 src gone 2>err &&
	test_grep "dstage: pack: rank 1: .src/e/f39.: vanished while packing" err &&
	test_grep "dstage: pack: .gone.: pack failed, nothing written" err &&
	! test -e gone
'

test_expect_success 'a failure on rank 0 stops rank 1 too' '
	echo x >src/a/f0 &&
	test_status 1 mpirun_n 2 env DSTAGE_TEST_AFTER_SCAN="echo more >>src/a/f0" $DSTAGE pack -p 2 src changed 2>err &&
	test_grep "dstage: pack: .src/a/f0.: changed while packing" err &&
	! test -e changed
'

test_expect_success 'pack without mpiexec does not need MPI' '
	env -u PMI_RANK -u PMI_SIZE -u PMI_FD $DSTAGE pack -q -p 2 src plain &&
	$DSTAGE verify -q plain
'

test_done
