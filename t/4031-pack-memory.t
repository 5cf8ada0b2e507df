#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Pack memory per entry (issue 27): pack's rank 0 holds the scanned tree
# (one 64-byte entry a name, one name arena, what few entries have apart)
# and each file's result, and writes index.h5's and the partitions' tables
# in pieces (before: every row, the whole pool and their encoded copy at
# once, and 96-byte entries: ~370 B per entry).  Measured as the growth of
# its peak RSS from a tree of 40000 names to one of 160000, per name (the
# process's own base cancels out): <= 150 B, issue 27's goal.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-tree.sh"

[ -x /usr/bin/time ] || skip_all "no /usr/bin/time (GNU time) to read pack's peak RSS"

test_expect_success 'setup: trees of 40000 and 160000 names' '
	hardlink_tree small 40000 && hardlink_tree big 160000
'

test_expect_success 'both packed, peak RSS measured' '
	/usr/bin/time -f %M -o rss.s "$DSTAGE" pack -q --no-fsync -p 4 small psmall &&
	/usr/bin/time -f %M -o rss.b "$DSTAGE" pack -q --no-fsync -p 4 big pbig &&
	"$DSTAGE" ls pbig | grep -c "\.JPEG$" >n && echo 160000 >want && test_cmp want n
'

test_expect_success 'pack: <= 150 B per name' '
	s=$(tail -n 1 rss.s) && b=$(tail -n 1 rss.b) &&
	per=$(( (b - s) * 1024 / 120000 )) &&
	echo "pack: $s KiB at 40000 names, $b KiB at 160000: $per B per name" >figure &&
	test "$per" -le 150
'
[ -s figure ] && sed "s/^/# /" figure
test_done
