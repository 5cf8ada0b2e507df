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

[ -x /usr/bin/time ] || skip_all "no /usr/bin/time (GNU time) to read a rank's peak RSS"

# tree DIR N: N files (hard links to 4) in classes of 1000, ImageNet-shaped names
tree() {
	"$PY" - "$1" "$2" <<-\EOF
	import os, sys
	root, n = sys.argv[1], int(sys.argv[2])
	os.makedirs(root + "/.seed")
	seeds = []
	for i in range(4):
	    p = "%s/.seed/s%d" % (root, i)
	    open(p, "wb").write(bytes([i]) * (40 + i))
	    seeds.append(p)
	for k in range(n):
	    d = "%s/train/n%08d" % (root, k // 1000)
	    if k % 1000 == 0:
	        os.makedirs(d)
	    os.link(seeds[k % 4], "%s/n%08d_%d.JPEG" % (d, k // 1000, 10000 + k))
	EOF
}

# peak RSS (KiB) of each rank of a stage of pack $1 into job $2: rss.$2.RANK
stage_rss() {
	mpirun_n 2 sh -c '/usr/bin/time -f %M -o "rss.$0.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" "$@"' \
		"$2" "$DSTAGE" stage "$1" --to "$SHM" --job "$2" -q &&
	test -s "rss.$2.0" && test -s "rss.$2.1"
}

test_expect_success 'setup: packs of 20000 and 80000 names, 4 partitions' '
	tree small 20000 && tree big 80000 &&
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
test_done
