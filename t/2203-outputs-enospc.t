#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A full output area (docs/outputs.md): --outputs-to on a 4 MiB tmpfs.  A
# write past the space fails with ENOSPC in the writer (dd says so), never a
# silent loss; a create in a full area is ENOSPC at open; unlinking the
# partial output gives the space back.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
MNT="$TRASH/mnt"
mkdir -p "$MNT"
test_require TMPFS
test_atexit 'umount "$MNT"'

test_expect_success 'a 4 MiB tmpfs for the outputs; two nodes staged' '
	mount -t tmpfs -o size=4m tmpfs "$MNT" &&
	make_samples src 2 &&
	pack_stage src 2
'
serve_start 2 --outputs out --outputs-to "$MNT" --drain-to "$TRASH/drain" --drain-rate 0
test_expect_success 'served, outputs on the small tmpfs' '
	serve_up 2 && test -d "$MNT/dstage.$(id -u).$JOB/0.out/ns"
'
test_expect_success 'a write past the space: ENOSPC in the writer' '
	! shim_on 0 dd if=/dev/zero of="$MOUNT/out/big" bs=1M count=8 2>err &&
	cat err && grep -q "No space left on device" err
'
test_expect_success 'a create in the full area: ENOSPC at open' '
	! shim_on 1 sh -c "echo x >$MOUNT/out/small" 2>err && cat err &&
	grep -q "No space left on device" err
'
test_expect_success 'unlinking the partial output gives the space back' '
	shim_on 1 rm "$MOUNT/out/big" &&
	shim_on 1 sh -c "echo x >$MOUNT/out/small" &&
	test "$(shim_on 0 cat "$MOUNT/out/small")" = x &&
	test "$(df -k "$MNT" | awk "NR==2 {print \$3}")" -lt 1024
'
serve_stop
test_expect_success 'stop: exit 0; the drain has the small file and not the partial one' '
	test "$(cat serve.rc)" = 0 && test "$(cat "$TRASH/drain/small")" = x &&
	! test -e "$TRASH/drain/big"
'
test_expect_success 'dstage clean removes the output areas on the other file system too' '
	test -d "$MNT/dstage.$(id -u).$JOB/1.out" &&
	"$DSTAGE" clean --to "$SHM" --job "$JOB" &&
	! test -e "$MNT/dstage.$(id -u).$JOB" && ! test -e "$JOBDIR"
'
umount "$MNT"
test_done
