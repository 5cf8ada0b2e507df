# SPDX-License-Identifier: BSD-3-Clause
"""bench/walk.py: the Python side of bench/small.sh (stdlib only).

  walk.py make ROOT TOP SUB FILES SIZE   a tree of TOP x SUB directories of
                                         FILES files of SIZE bytes each
  walk.py walk ROOT                      os.walk + os.stat of every entry;
                                         prints "entries seconds"
"""
import os
import sys
import time


def make(root, top, sub, files, size):
    data = b"w" * size
    for a in range(top):
        for b in range(sub):
            d = os.path.join(root, "t%03d" % a, "s%03d" % b)
            os.makedirs(d, exist_ok=True)
            for f in range(files):
                with open(os.path.join(d, "f%04d" % f), "wb") as fh:
                    fh.write(data)


def walk(root):
    t0 = time.perf_counter()
    n = 0
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            os.stat(os.path.join(d, name))
            n += 1
    print(n, "%.6f" % (time.perf_counter() - t0))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], *map(int, sys.argv[3:7]))
    else:
        walk(sys.argv[2])
