# SPDX-License-Identifier: BSD-3-Clause
# lib-tree.sh: metadata-heavy trees for the memory-per-name tests (t/3020,
# t/4030, t/4031, t/4032, t/4033): many ImageNet-shaped names, few bytes,
# and their stages under GNU time.
#
#   hardlink_tree DIR N [CLASS [SEED]]
#       DIR/.seed/s0..s3 (SEED+0..SEED+3 bytes each, default 40; byte i
#       repeated: compressible) and N hard links to them,
#       DIR/train/nKKKKKKKK/nKKKKKKKK_M.JPEG, CLASS names a directory
#       (default 1000), M = 10000 + the link's number.  Hard links make
#       the names cost inodes and metadata only, as bench/scale.py does.
#   stage_rss PACK JOB [OPTION...]
#       stage PACK into $SHM as job JOB with 2 ranks (and the options), each
#       under GNU time: rss.JOB.RANK, the rank's peak RSS in KiB

hardlink_tree() {
	"$PY" - "$1" "$2" "${3:-1000}" "${4:-40}" <<-\EOF
	import os, sys
	root, n, cls, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
	os.makedirs(root + "/.seed")
	seeds = []
	for i in range(4):
	    p = "%s/.seed/s%d" % (root, i)
	    open(p, "wb").write(bytes([i]) * (seed + i))
	    seeds.append(p)
	for k in range(n):
	    d = "%s/train/n%08d" % (root, k // cls)
	    if k % cls == 0:
	        os.makedirs(d)
	    os.link(seeds[k % 4], "%s/n%08d_%d.JPEG" % (d, k // cls, 10000 + k))
	EOF
}

stage_rss() {
	_p=$1 _j=$2 && shift 2 &&
	mpirun_n 2 sh -c '/usr/bin/time -f %M -o "rss.$0.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" "$@"' \
		"$_j" "$DSTAGE" stage "$_p" --to "$SHM" --job "$_j" -q "$@" &&
	test -s "rss.$_j.0" && test -s "rss.$_j.1"
}
