#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""failover-reader.py MOUNT LIST COMPUTE_MS OUT [START]: read the paths of
LIST (relative to MOUNT) in order from position START, spending COMPUTE_MS
of "training" after each (a sleep: the model step runs on a GPU; a busy
loop would make 4 readers fight over the 2 cores of this machine, and
killing one would speed up the others);
write "t_end N" (CLOCK_REALTIME seconds, samples read) to OUT.  Any read
error is fatal (exit 1).  Run under the shim (bench/failover.sh)."""
import os, sys, time

mount, lst, compute_ms, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
start = int(sys.argv[5]) if len(sys.argv) > 5 else 0
with open(lst) as f:
    paths = [l.rstrip("\n") for l in f if l.strip()][start:]
n = 0
half = len(paths) // 2
for p in paths:
    with open(os.path.join(mount, p), "rb") as f:
        f.read()
    n += 1
    if n == half:
        open(out + ".half", "w").close()
    if compute_ms > 0:
        time.sleep(compute_ms / 1000.0)
with open(out, "w") as f:
    f.write("%.6f %d\n" % (time.time(), n))
