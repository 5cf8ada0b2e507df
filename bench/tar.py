# SPDX-License-Identifier: BSD-3-Clause
"""bench/tar.py: the tar-shard benchmark's fixture and readers (stdlib only).

  tar.py shards DIR NSHARDS NSAMPLES [SEED]
      WebDataset-style shards DIR/shard-NNNNNN.tar, each NSAMPLES samples:
      KEY.jpg (random bytes, 8..64 KiB log-uniform) and KEY.cls (a label);
      prints the total member bytes
  tar.py files ROOT LIST [SEED]
      read every file of LIST (paths relative to ROOT) once with open/read,
      in LIST's order, or shuffled with SEED (a global shuffle); prints
      "FILES BYTES SECONDS"
  tar.py stream SHARD...
      what WebDataset does: each shard streamed with tarfile (mode "r|"),
      every member's bytes read, shards in the order given; prints
      "FILES BYTES SECONDS"
"""
import math
import os
import random
import sys
import tarfile
import io
import time


def shards(d, ns, nm, seed=7):
    rng = random.Random(seed)
    pool = os.urandom((64 << 10) + 65536)
    os.makedirs(d, exist_ok=True)
    total = 0
    for s in range(ns):
        with tarfile.open(os.path.join(d, "shard-%06d.tar" % s), "w", format=tarfile.GNU_FORMAT) as t:
            for k in range(nm):
                key = "%06d%06d" % (s, k)
                n = int(math.exp(rng.uniform(math.log(8 << 10), math.log(64 << 10))))
                o = rng.randrange(65536)
                for ext, data in (("jpg", pool[o:o + n]), ("cls", b"%d\n" % rng.randrange(1000))):
                    ti = tarfile.TarInfo("%s.%s" % (key, ext))
                    ti.size = len(data)
                    ti.mtime = 1700000000
                    t.addfile(ti, io.BytesIO(data))
                    total += len(data)
    print(total)


def files(root, lst, seed=None):
    paths = [l.rstrip("\n") for l in open(lst)]
    if seed is not None:
        random.Random(int(seed)).shuffle(paths)
    n = b = 0
    t0 = time.perf_counter()
    for p in paths:
        with open(os.path.join(root, p), "rb") as f:
            b += len(f.read())
        n += 1
    print(n, b, "%.6f" % (time.perf_counter() - t0))


def stream(paths):
    n = b = 0
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh, tarfile.open(fileobj=fh, mode="r|") as t:
            for m in t:
                if m.isfile():
                    b += len(t.extractfile(m).read())
                    n += 1
    print(n, b, "%.6f" % (time.perf_counter() - t0))


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "shards":
        shards(a[2], int(a[3]), int(a[4]), *(int(x) for x in a[5:6]))
    elif a[1] == "files":
        files(a[2], a[3], *a[4:5])
    elif a[1] == "stream":
        stream(a[2:])
    else:
        sys.exit(__doc__)
