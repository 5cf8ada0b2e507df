#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""failover-reader.py MOUNT SRC LIST STOPFILE OUT: a reader under the shim
that, pass after pass, reads every path of LIST (one per line, relative to
MOUNT; a path may repeat) and every file of the tree under MOUNT, and
compares each file's bytes with SRC/PATH.  After STOPFILE appears it does
one more pass and leaves.  OUT gets one line per pass and a summary:
  pass N files F slowest S
  done passes P files F errors E slow W
(slow: reads that took over 0.5 s, i.e. waited for a restarted service).
Every error is printed as 'ERROR path: reason'.  Exit 1 on any error."""
import os, sys, time

mount, src, listf, stopf, outf = sys.argv[1:6]
with open(listf) as f:
    lst = [l.rstrip("\n") for l in f if l.strip()]
out = open(outf, "w", buffering=1)
errors = files = slow = passes = 0
last = False
while True:
    if os.path.exists(stopf):
        last = True
    tree = []
    for d, dirs, fs in os.walk(mount):
        dirs.sort()
        if os.path.relpath(d, mount).startswith(".dstage"):
            continue
        for n in sorted(fs):
            tree.append(os.path.relpath(os.path.join(d, n), mount))
    slowest = 0.0
    for p in lst + tree:
        t0 = time.monotonic()
        try:
            with open(os.path.join(mount, p), "rb") as f:
                got = f.read()
        except OSError as e:
            errors += 1
            out.write("ERROR %s: %s\n" % (p, e.strerror))
            continue
        dt = time.monotonic() - t0
        slowest = max(slowest, dt)
        slow += dt > 0.5
        with open(os.path.join(src, p), "rb") as f:
            want = f.read()
        files += 1
        if got != want:
            errors += 1
            out.write("ERROR %s: wrong bytes\n" % p)
    passes += 1
    out.write("pass %d files %d slowest %.3f\n" % (passes, len(lst) + len(tree), slowest))
    if last:
        break
out.write("done passes %d files %d errors %d slow %d\n" % (passes, files, errors, slow))
sys.exit(1 if errors else 0)
