# SPDX-License-Identifier: BSD-3-Clause
"""bench/mktree.py: a tree of files of random bytes (stdlib only).

  mktree.py ROOT COUNT MIN MAX [SEED]
      COUNT files in directories of 100, sizes log-uniform in [MIN, MAX]
      bytes; prints the total bytes.
"""
import math
import os
import random
import sys

root, count, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 7)
pool = os.urandom(hi + 65536)
total = 0
for i in range(count):
    d = os.path.join(root, "d%04d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    n = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    o = rng.randrange(65536)
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(pool[o:o + n])
    total += n
print(total)
