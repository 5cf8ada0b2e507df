# SPDX-License-Identifier: BSD-3-Clause
# lib-tree.sh: metadata-heavy trees for the memory-per-name tests (t/3020,
# t/4030, t/4031, t/4033): many ImageNet-shaped names, few bytes.
#
#   hardlink_tree DIR N [CLASS [SEED]]
#       DIR/.seed/s0..s3 (SEED+0..SEED+3 bytes each, default 40; byte i
#       repeated: compressible) and N hard links to them,
#       DIR/train/nKKKKKKKK/nKKKKKKKK_M.JPEG, CLASS names a directory
#       (default 1000), M = 10000 + the link's number.  Hard links make
#       the names cost inodes and metadata only, as bench/scale.py does.

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
