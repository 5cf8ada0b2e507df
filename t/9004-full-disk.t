#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A full node-local disk.  The capacity check (free space + 64 MiB, and for
# tmpfs the available memory) refusing before any write is t/4001's; here
# the disk fills DURING the step, after the check passed:
#  - tmpfs (no reservation: posix_fallocate would zero every page): another
#    file takes the space while the ranks are reading (DSTAGE_FAULT
#    stage.read:action=sleep holds them there), the store writes get ENOSPC:
#    every rank exits 1 naming it, nothing of the job is left;
#  - ext4 on a loop device: stage reserved the whole store with
#    posix_fallocate before the first byte moved, so the same filler gets
#    ENOSPC and the stage completes, every byte checked;
#  - ext4 already too full: refused before writing, nothing left.
# Skipped with the reason when tmpfs or loop mounts are not allowed.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hard.sh"

uid=$(id -u)
MNT="$TRASH/mnt"
mkdir -p "$MNT"
mounted=
umount_all() {
	[ -n "$mounted" ] && umount "$MNT" 2>/dev/null
	mounted=
	[ -n "$loopimg" ] && rm -f "$loopimg"
}
test_atexit umount_all

# fill_when_writing JOB: wait for the job's partial store, then fill the
# file system (in the background of the test; the filler's own ENOSPC is
# expected)
fill_when_writing() {
	k=0
	while [ $k -lt 200 ]; do
		ls -d "$MNT/dstage.$uid.$1"/*.partial/store >/dev/null 2>&1 && break
		sleep 0.05
		k=$((k + 1))
	done
	dd if=/dev/zero of="$MNT/filler" bs=1M >/dev/null 2>&1
	df -k "$MNT" | tail -n 1 >fill.df
}

test_expect_success 'setup: 6 MiB of samples in 4 partitions' '
	"$T/mksample" -c 4 -n 24 -s 7 src &&
	head -c 3000000 /dev/urandom >src/big1 && head -c 3000000 /dev/urandom >src/big2 &&
	"$DSTAGE" pack -q -p 4 src pack
'

test_have_prereq TMPFS && mount -t tmpfs -o size=72m tmpfs "$MNT" && mounted=1
test_expect_success TMPFS 'tmpfs filled during the write: every rank exits 1, ENOSPC named, nothing left' '
	(fill_when_writing t1) &
	filler=$! &&
	rc=0 && { DSTAGE_FAULT=stage.read:action=sleep:secs=1.5 mpirun_n 2 "$DSTAGE" stage pack \
		--to "$MNT" --job t1 --node-per-rank 2>err || rc=$?; } &&
	{ wait $filler || :; } &&
	cat err fill.df && test $rc != 0 &&
	test_grep "No space left on device" err &&
	test $(grep -c "^dstage: stage:" err) -ge 2 &&
	test ! -e "$MNT/dstage.$uid.t1" &&
	ls -A "$MNT" >left && echo filler >want && test_cmp want left
'
test_expect_success TMPFS 'the same tmpfs, emptied: the same stage succeeds' '
	rm -f "$MNT/filler" &&
	mpirun_n 2 "$DSTAGE" stage pack --to "$MNT" --job t1 --node-per-rank -q &&
	"$T/storecheck" "$MNT/dstage.$uid.t1" src >/dev/null &&
	"$DSTAGE" clean --to "$MNT" --job t1 && test -z "$(ls -A "$MNT")"
'
[ -n "$mounted" ] && umount "$MNT" && mounted=

loopimg="$TRASH/ext4.img"
if test_have_prereq LOOP; then
	truncate -s 100M "$loopimg" && mkfs.ext4 -q -F "$loopimg" >/dev/null 2>&1 &&
		mount -o loop "$loopimg" "$MNT" && mounted=1
fi
test_expect_success LOOP 'ext4: the store is reserved before the first byte, a filler cannot take it' '
	(fill_when_writing e1) &
	filler=$! &&
	rc=0 && { DSTAGE_FAULT=stage.read:action=sleep:secs=1.5 mpirun_n 2 "$DSTAGE" stage pack \
		--to "$MNT" --job e1 --node-per-rank -q 2>err || rc=$?; } &&
	{ wait $filler || :; } &&
	cat err fill.df && test $rc = 0 &&
	test "$(awk "{print \$4}" fill.df)" -lt 1024 &&
	"$T/storecheck" "$MNT/dstage.$uid.e1" src >/dev/null &&
	rm -f "$MNT/filler" && "$DSTAGE" clean --to "$MNT" --job e1
'
test_expect_success LOOP 'ext4 already too full: refused before writing, nothing left' '
	! dd if=/dev/zero of="$MNT/filler" bs=1M >/dev/null 2>&1 &&
	! mpirun_n 2 "$DSTAGE" stage pack --to "$MNT" --job e2 --node-per-rank 2>err &&
	test_grep "not enough room: needs" err &&
	test ! -e "$MNT/dstage.$uid.e2" && rm -f "$MNT/filler"
'
[ -n "$mounted" ] && umount "$MNT" && mounted=
umount_all
test_done
