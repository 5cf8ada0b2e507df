#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A fresh reader of a big node index pays page faults that do not grow with
# the index (issue 27): the index written by ds_index_write (stage,
# mkstore) is kept in 2 MiB pages and the shim maps it 2 MiB-aligned, so a
# process that reads 3,000 random files of a 300k-name store through the
# shim takes one fault per 2 MiB of the index, not one per 64 KiB (0.076
# faults per file with 4 KiB pages, ~0.016 with 2 MiB ones, the rest the
# store's); and DSTAGE_INDEX_HUGE=0 leaves it in 4 KiB pages.  A shuffled
# reader of small files takes pread, whole or in pieces (0.99 faults a
# 4 KiB file before, each in a 64 KiB window of its own; a window it comes
# back to is mapped: 0.08), one in store order, or one that reads every
# file of a region in random order, still copies out of the mapping, where
# a fault serves 16 files (io/sread.c).  Counts faults (getrusage), never time.  Needs a kernel that collapses a file of
# /dev/shm into 2 MiB pages (MADV_COLLAPSE, Linux 6.1 with THP).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_lazy_prereq HUGE '"$T/ixscale" probe-huge "$SHM"' \
	"the kernel does not collapse a file of $SHM into 2 MiB pages (MADV_COLLAPSE: Linux >= 6.1 with THP)"
test_require HUGE

N=300000 CLASSES=5085 # ImageNet-21k-shaped, 59 files a class
BOUND=0.04
SMALL=0.2 # shuffled 4 KiB files: 0.08 (a window read before is mapped), main 0.99

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

test_expect_success 'setup: the store again with files of 4 KiB (sparse: only the files read are written)' '
	rm -rf "$JOBDIR" &&
	test "$("$T/ixscale" store $N $CLASSES "$SHM" 4096)" = "$JOBDIR" &&
	"$T/ixscale" paths $N $CLASSES 3000 run >run &&
	test $(wc -l <run) = 3000
'

test_expect_success 'a shuffled reader of 4 KiB files takes pread: < 0.2 faults per file' '
	shim "$T/shim-faults" "$MOUNT" 4096 <paths >out4 &&
	cat out4 &&
	grep "^files 3000$" out4 && grep "^bad 0$" out4 &&
	awk -v f="$(fpf out4)" -v b=$SMALL "BEGIN { exit !(f != \"\" && f < b) }"
'

test_expect_success 'the same, each file read in pieces of 1 KiB: the first decides, pread too' '
	shim "$T/shim-faults" "$MOUNT" 4096 1024 <paths >outc &&
	cat outc &&
	grep "^files 3000$" outc && grep "^bad 0$" outc &&
	awk -v f="$(fpf outc)" -v b=$SMALL "BEGIN { exit !(f != \"\" && f < b) }"
'

test_expect_success 'the same files in store order still copy out of the mapping (a fault per 16)' '
	shim "$T/shim-faults" "$MOUNT" 4096 <run >outr &&
	cat outr &&
	grep "^files 3000$" outr && grep "^bad 0$" outr &&
	awk -v f="$(fpf outr)" "BEGIN { exit !(f != \"\" && f > 0.03 && f < 0.1) }"
'

test_expect_success 'every file of a region once, in random order: a window read before is mapped (a fault per 16)' '
	awk "BEGIN { srand(7) } { print rand() \"\t\" \$0 }" run | sort -n | cut -f 2- >mixed &&
	test $(wc -l <mixed) = 3000 &&
	shim "$T/shim-faults" "$MOUNT" 4096 <mixed >outm &&
	cat outm &&
	grep "^files 3000$" outm && grep "^bad 0$" outm &&
	awk -v f="$(fpf outm)" "BEGIN { exit !(f != \"\" && f > 0.03 && f < 0.1) }"
'

test_done
