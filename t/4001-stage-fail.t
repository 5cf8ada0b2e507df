#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage stage failures: every rank exits non-zero with the reason, nothing
# is left behind.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
payload_offset() {
	h5dump -H -p -d /payload "$1" | sed -n 's/.*OFFSET \([0-9]*\).*/\1/p' | head -n 1
}
fresh_pack() {
	rm -rf pack && cp -r pack.orig pack
}
no_store_left() {
	test ! -e "$SHM/dstage.$uid.$1" || { find "$SHM/dstage.$uid.$1"; return 1; }
}

test_expect_success 'set up' '
	"$T/mksample" -c 2 -n 10 -v 2 src &&
	"$DSTAGE" pack -q -p 4 --replicate val src pack.orig
'

test_expect_success 'a missing partition: all ranks fail, named, no store left' '
	fresh_pack && rm pack/part-00001.h5 &&
	! mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f1 --node-per-rank 2>err &&
	test_grep "part-00001.h5" err && no_store_left f1
'

test_expect_success 'a flipped payload byte: checksum mismatch names the file' '
	fresh_pack && f=pack/part-00002.h5 && off=$(payload_offset $f) && test -n "$off" &&
	printf "\377" | dd of=$f bs=1 seek=$((off + 100)) conv=notrunc 2>/dev/null &&
	! mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f2 --node-per-rank 2>err &&
	test_grep "part-00002.h5.*checksum mismatch in .train/" err && no_store_left f2
'

test_expect_success 'a flipped byte is caught on the replica nodes too (R=3)' '
	! mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f3 -R 3 --node-per-rank 2>err &&
	test $(grep -c "checksum mismatch" err) -ge 1 && no_store_left f3
'

test_expect_success 'a truncated partition: clear error, no store' '
	fresh_pack && f=pack/part-00003.h5 && truncate -s $(( $(stat -c %s $f) - 50 )) $f &&
	! mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job f4 --node-per-rank 2>err &&
	test_grep "part-00003.h5" err && no_store_left f4
'

test_expect_success 'a missing manifest: clear error, no store' '
	fresh_pack && rm pack/index.h5 &&
	! mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job f5 --node-per-rank 2>err &&
	test_grep "index.h5" err && no_store_left f5
'

test_expect_success 'a failure does not touch an existing store of another job' '
	fresh_pack && mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job good --node-per-rank -q &&
	rm pack/part-00000.h5 &&
	! mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job f6 --node-per-rank 2>/dev/null &&
	"$T/storecheck" "$SHM/dstage.$uid.good" src >/dev/null && no_store_left f6
'

mkdir small
test_have_prereq TMPFS && mount -t tmpfs -o size=64k tmpfs small
test_expect_success TMPFS 'a full node-local disk is refused before writing (small tmpfs)' '
	fresh_pack &&
	rc=0 && { mpirun_n 2 "$DSTAGE" stage pack --to "$PWD/small" --job f7 --node-per-rank 2>err || rc=$?; } &&
	ls -A small >left && umount small &&
	test $rc != 0 && test_grep "not enough room: needs" err && test_cmp /dev/null left
'
test_expect_success 'an error on one rank right after the broadcast: every rank fails, no store' '
	fresh_pack &&
	! DSTAGE_FAULT=stage.after_bcast:rank=2 mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f7b \
		--node-per-rank 2>err &&
	test_grep "fault injected at .stage.after_bcast. (rank 2)" err && no_store_left f7b
'

test_expect_success 'an error on one rank while reading: every rank fails, no store' '
	fresh_pack &&
	! DSTAGE_FAULT=stage.read:rank=1 mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f8 \
		--node-per-rank 2>err &&
	test_grep "fault injected at .stage.read. (rank 1)" err && no_store_left f8
'

test_expect_success 'an error while forwarding a replica (R=3): every rank fails, no store' '
	! DSTAGE_FAULT=stage.forward:rank=2 mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f9 \
		-R 3 --node-per-rank 2>err &&
	test_grep "stage.forward" err && no_store_left f9
'

test_expect_success 'an error writing the store on one rank: every rank fails, no store' '
	! DSTAGE_FAULT=stage.write:rank=0 mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f10 \
		--node-per-rank 2>err && no_store_left f10
'

test_expect_success 'a rank killed mid-stage ends the step quickly; a new stage recovers' '
	start=$(date +%s) &&
	! DSTAGE_FAULT=stage.read:rank=1:action=kill DSTAGE_TEST_MPI_TIMEOUT=60 \
		mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f11 --node-per-rank 2>err &&
	test $(( $(date +%s) - start )) -lt 30 &&
	mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job f11 --node-per-rank -q &&
	"$T/storecheck" "$SHM/dstage.$uid.f11" src >/dev/null &&
	! ls -d "$SHM/dstage.$uid.f11"/*.partial 2>/dev/null
'
test_done
