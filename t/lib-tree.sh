# SPDX-License-Identifier: BSD-3-Clause
# lib-tree.sh: metadata-heavy trees for the memory-per-name tests (t/3020,
# t/4030, t/4031): many ImageNet-shaped names, few bytes.
#
#   hardlink_tree DIR N [CLASS]
#       DIR/.seed/s0..s3 (40-43 bytes each) and N hard links to them,
#       DIR/train/nKKKKKKKK/nKKKKKKKK_M.JPEG, CLASS names a directory
#       (default 1000), M = 10000 + the link's number.  Hard links make
#       the names cost inodes and metadata only, as bench/scale.py does.

hardlink_tree() {
	"$PY" - "$1" "$2" "${3:-1000}" <<-\EOF
	import os, sys
	root, n, cls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
	os.makedirs(root + "/.seed")
	seeds = []
	for i in range(4):
	    p = "%s/.seed/s%d" % (root, i)
	    open(p, "wb").write(bytes([i]) * (40 + i))
	    seeds.append(p)
	for k in range(n):
	    d = "%s/train/n%08d" % (root, k // cls)
	    if k % cls == 0:
	        os.makedirs(d)
	    os.link(seeds[k % 4], "%s/n%08d_%d.JPEG" % (d, k // cls, 10000 + k))
	EOF
}
