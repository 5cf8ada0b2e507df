#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stage memory per entry of a node leader (issue 27): the leader builds its
# node's index of the whole manifest as the entries stream by, and holds
# about 10 bytes a name for it (the front-coded names, the directory
# table): the 32-byte rows go to the index file as they come
# (before: a 64-byte record and the path of every entry, then the whole
# index once more in a buffer: ~160 B per name at the builder's peak).
# Two simulated nodes (--node-per-rank), both ranks leaders handling half
# the partitions, measured as the growth of each rank's peak RSS from a
# pack of 50000 names to one of 110000, per name: <= 100 B (t/4030 holds
# the rank without a builder to the same).  Both indexes are over 2 MiB,
# so both are collapsed into 2 MiB pages (ds_index_hugify, a window at a
# time): the window the collapse maps cancels out.  The index must come
# out the same as the one built from the whole manifest (--inflate of a
# pack without zlib: the same bytes, the manifest read whole).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-tree.sh"

[ -x /usr/bin/time ] || skip_all "no /usr/bin/time (GNU time) to read a rank's peak RSS"

test_expect_success 'setup: packs of 50000 and 110000 names (hard links, classes of 1000), 4 partitions' '
	hardlink_tree small 50000 && hardlink_tree big 110000 &&
	"$DSTAGE" pack -q --no-fsync -p 4 --replicate .seed small psmall &&
	"$DSTAGE" pack -q --no-fsync -p 4 --replicate .seed big pbig
'

test_expect_success 'both stage on two simulated nodes, every name held' '
	stage_rss psmall s --node-per-rank && stage_rss pbig b --node-per-rank &&
	"$T/storecheck" "$SHM/dstage.$(id -u).b" big >holders && test $(wc -l <holders) = 110004
'

test_expect_success 'each node leader: <= 100 B per name of the pack' '
	for r in 0 1; do
		s=$(tail -n 1 rss.s.$r) && b=$(tail -n 1 rss.b.$r) &&
		per=$(( (b - s) * 1024 / 60000 )) &&
		echo "rank $r: $s KiB at 50000 names, $b KiB at 110000: $per B per name" >>figure &&
		test "$per" -le 100 || exit 1
	done
'
[ -s figure ] && sed "s/^/# /" figure

test_expect_success 'the streamed index is the one built from the whole manifest' '
	mkdir "$SHM/w" &&
	mpirun_n 2 "$DSTAGE" stage psmall --to "$SHM/w" --job s --node-per-rank --inflate -q &&
	for k in 0 1; do
		cmp "$SHM/dstage.$(id -u).s/$k/index" "$SHM/w/dstage.$(id -u).s/$k/index" || exit 1
	done
'
test_done
