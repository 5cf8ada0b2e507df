#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A reader pays for its share, not for Python objects of every file (issue
# 27): DstageFiles holds a file as its name's bytes and an offset, and
# EpochSampler reads its list line by line into one array.  Python's own
# allocations (tracemalloc: exact, not a timing) stay under a generous
# 200 B per file of the dataset at their peak and 100 B once built, where
# tuples, str and a dict per file took ~500; and the sampler still gives the
# shim's order.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_require PYTHON

N=24000
test_expect_success "$N files (hard links to 4), packed and staged on 2 nodes" '
	"$PY" - "$N" <<-\EOF &&
	import os, sys
	n = int(sys.argv[1])
	os.makedirs("src/.seed")
	seeds = []
	for i in range(4):
	    p = "src/.seed/s%d" % i
	    open(p, "wb").write(bytes([i]) * (40 + i))
	    seeds.append(p)
	for k in range(n):
	    d = "src/train/n%08d" % (k // 1200)
	    if k % 1200 == 0:
	        os.makedirs(d)
	    os.link(seeds[k % 4], "%s/n%08d_%d.JPEG" % (d, k // 1200, 10000 + k))
	EOF
	"$DSTAGE" pack -q --no-fsync -p 4 --replicate .seed src pack &&
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job "$JOB" --node-per-rank -q
'

cat >mem.py <<'PYEOF'
import os, sys, tracemalloc
sys.path.insert(0, os.environ["PYDIR"])
import dstage
n = int(sys.argv[1])
tracemalloc.start()
ds = dstage.DstageFiles("train")
s = dstage.EpochSampler(ds, rank=1, num_replicas=2)
m = len(s)
held, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print("files %d, share %d: peak %.0f B and held %.0f B per file" % (len(ds), m, peak / n, held / n))
assert len(ds) == n and m == n // 4, (len(ds), m)
assert [ds.paths[i] for i in s] == dstage.epoch_list(0, 1, 2), "order != the shim's list"
i = next(iter(s))
assert ds.samples[i] == (os.path.join(os.environ["DSTAGE_MOUNT"], ds.paths[i]), ds.targets[i])
assert peak < 200 * n, "peak %d B for %d files" % (peak, n)
assert held < 100 * n, "held %d B for %d files" % (held, n)
PYEOF
test_expect_success 'DstageFiles + EpochSampler: < 200 B per file at the peak, < 100 B held' '
	shim_on 0 env PYDIR="$SRCDIR/io/python" "$PY" mem.py "$N"
'
test_done
