#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stage memory per entry (issue 27): a rank holds a chunk of the manifest
# and the files of the partitions it handles, not the whole manifest
# (before: its image, its rows, every entry and path, ~410 B per entry on
# every rank).  Measured on the rank that holds no index builder (one node,
# two ranks: rank 1; the builder is common/index.c's, measured apart) as
# the growth of its peak RSS from a pack of 20000 names to one of 80000,
# per name: the process's own base cancels out.  It handles half the
# partitions: <= 100 B per name of the pack.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-tree.sh"

[ -x /usr/bin/time ] || skip_all "no /usr/bin/time (GNU time) to read a rank's peak RSS"

# peak RSS (KiB) of each rank of a stage of pack $1 into job $2: rss.$2.RANK
stage_rss() {
	mpirun_n 2 sh -c '/usr/bin/time -f %M -o "rss.$0.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" "$@"' \
		"$2" "$DSTAGE" stage "$1" --to "$SHM" --job "$2" -q &&
	test -s "rss.$2.0" && test -s "rss.$2.1"
}

test_expect_success 'setup: packs of 20000 and 80000 names, 4 partitions' '
	hardlink_tree small 20000 && hardlink_tree big 80000 &&
	"$DSTAGE" pack -q --no-fsync -p 4 --replicate .seed small psmall &&
	"$DSTAGE" pack -q --no-fsync -p 4 --replicate .seed big pbig
'

test_expect_success 'both stage on one node of two ranks' '
	stage_rss psmall s && stage_rss pbig b &&
	"$T/storecheck" "$SHM/dstage.$(id -u).b" big >holders && test $(wc -l <holders) = 80004
'

test_expect_success 'rank 1 (no index builder): <= 100 B per name of the pack' '
	s=$(tail -n 1 rss.s.1) && b=$(tail -n 1 rss.b.1) &&
	per=$(( (b - s) * 1024 / 60000 )) &&
	echo "rank 1: $s KiB at 20000 names, $b KiB at 80000: $per B per name" >figure &&
	test "$per" -le 100
'
[ -s figure ] && sed "s/^/# /" figure

# The stream reads the pool where rows point: a pool in another order than
# the rows (not what pack writes; the manifest is still valid) costs rank 0
# re-reads and gap reads, never a wrong entry or a wrong seal CRC.  20000
# names: two chunks of rows, the first naming the pool's end.
test_expect_success 'a manifest whose string pool runs backwards stages to the same store' '
	cp -r psmall rfwd && cp -r psmall rback &&
	"$PY" - rback/index.h5 <<-\EOF &&
	import struct, sys
	p = sys.argv[1]
	b = bytearray(open(p, "rb").read())
	eo, n, so, sl = struct.unpack("<QQQQ", b[48:80])
	rows = [eo + 70 * i for i in range(n)]
	refs = []  # (row offset of the off field, len field offset)
	for r in rows:
	    refs.append((r, r + 8))
	    if struct.unpack("<I", b[r + 12:r + 16])[0] & 0o170000 == 0o120000:
	        refs.append((r + 58, r + 66))
	strs = [bytes(b[so + struct.unpack("<Q", b[o:o + 8])[0]:][:struct.unpack("<I", b[l:l + 4])[0]])
	        for o, l in refs]
	pool, pos = bytearray(), {}
	for k in reversed(range(len(refs))):
	    pos[k] = len(pool)
	    pool += strs[k]
	assert len(pool) == sl
	b[so:so + sl] = pool
	for k, (o, l) in enumerate(refs):
	    b[o:o + 8] = struct.pack("<Q", pos[k])
	open(p, "wb").write(b)
	EOF
	"$PY" "$SRCDIR/t/helpers/hard-pack.py" reseal rback/index.h5 &&
	! cmp -s rfwd/index.h5 rback/index.h5 && "$DSTAGE" verify -q rback &&
	mkdir "$SHM/f" "$SHM/b" &&
	mpirun_n 2 "$DSTAGE" stage rfwd --to "$SHM/f" --job rv --node-per-rank -q &&
	mpirun_n 2 "$DSTAGE" stage rback --to "$SHM/b" --job rv --node-per-rank -q &&
	for k in 0 1; do
		cmp "$SHM/f/dstage.$(id -u).rv/$k/store" "$SHM/b/dstage.$(id -u).rv/$k/store" &&
		cmp "$SHM/f/dstage.$(id -u).rv/$k/index" "$SHM/b/dstage.$(id -u).rv/$k/index" || exit 1
	done
'
test_done
