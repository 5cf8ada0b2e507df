#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A fresh reader of a big node index pays page faults that do not grow with
# the index (issue 27): the index written by ds_index_write (stage,
# mkstore) is kept in 2 MiB pages and the shim maps it 2 MiB-aligned, so a
# process that reads 3,000 random files of a 300k-name store through the
# shim takes one fault per 2 MiB of the index, not one per 64 KiB (0.076
# faults per file with 4 KiB pages, ~0.016 with 2 MiB ones, the rest the
# store's); and DSTAGE_INDEX_HUGE=0 leaves it in 4 KiB pages.  Counts
# faults (getrusage), never time.  Needs a kernel that collapses a file of
# /dev/shm into 2 MiB pages (MADV_COLLAPSE, Linux 6.1 with THP).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_lazy_prereq HUGE '"$T/ixscale" probe-huge "$SHM"' \
	"the kernel does not collapse a file of $SHM into 2 MiB pages (MADV_COLLAPSE: Linux >= 6.1 with THP)"
test_require HUGE

N=300000 CLASSES=5085 # ImageNet-21k-shaped, 59 files a class
BOUND=0.04

# faults per file of one fresh reader, from its output
fpf() { awk '$1 == "faults_per_file" { print $2 }' "$1"; }

test_expect_success 'setup: a node store of 300k names, and 3,000 random files of it' '
	rm -rf "$JOBDIR" &&
	test "$("$T/ixscale" store $N $CLASSES "$SHM")" = "$JOBDIR" &&
	"$T/ixscale" paths $N $CLASSES 3000 >paths &&
	test $(wc -l <paths) = 3000
'

test_expect_success 'a fresh reader of 3,000 files: every byte right, < 0.04 faults per file' '
	shim "$T/shim-faults" "$MOUNT" <paths >out &&
	cat out &&
	grep "^files 3000$" out && grep "^bad 0$" out &&
	awk -v f="$(fpf out)" -v b=$BOUND "BEGIN { exit !(f != \"\" && f < b) }"
'

test_expect_success 'DSTAGE_INDEX_HUGE=0: 4 KiB pages, over the bound (what the test tells apart)' '
	rm -rf "$JOBDIR" &&
	DSTAGE_INDEX_HUGE=0 "$T/ixscale" store $N $CLASSES "$SHM" >/dev/null &&
	shim "$T/shim-faults" "$MOUNT" <paths >out0 &&
	cat out0 &&
	grep "^bad 0$" out0 &&
	awk -v f="$(fpf out0)" -v b=$BOUND "BEGIN { exit !(f != \"\" && f >= b) }"
'

test_done
