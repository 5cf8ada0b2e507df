#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A reader pays for its own share, not for the dataset (issue 27):
# DstageFiles + EpochSampler hold <= 64 B per sample of the reader's share
# (Python's own allocations, tracemalloc: exact, not a timing; and the
# private memory the process gained, from /proc), and the same share costs
# the same whether the dataset is 2400 files or four times that: the
# dataset's names come from the shim's mapped index, not from a walk of
# the tree, and the list's ids are mapped to indices without its text.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
. "$SRCDIR/t/lib-tree.sh"

test_require PYTHON

test_expect_success 'two datasets, 2400 and 9600 files, each packed and staged' '
	hardlink_tree small 2400 600 && hardlink_tree big 9600 600 &&
	"$DSTAGE" pack -q --no-fsync -p 2 --replicate .seed small psmall &&
	"$DSTAGE" pack -q --no-fsync -p 2 --replicate .seed big pbig &&
	mpirun_n 1 "$DSTAGE" stage psmall --to "$SHM" --job "${JOB}s" -q &&
	mpirun_n 1 "$DSTAGE" stage pbig --to "$SHM" --job "${JOB}b" -q
'

cat >mem.py <<'PYEOF'
import os, sys, tracemalloc
sys.path.insert(0, os.environ["PYDIR"])
import dstage

def anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024

files, rank, nr = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
os.listdir(os.environ["DSTAGE_MOUNT"])  # the shim started (its own mappings)
a0 = anon()
tracemalloc.start()
ds = dstage.DstageFiles("train")
s = dstage.EpochSampler(ds, rank=rank, num_replicas=nr)
share = len(s)
held, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
grown = anon() - a0
print("%d files, reader %d of %d, share %d: held %.1f B, peak %.1f B, private +%d B per sample"
      " of the share" % (files, rank, nr, share, held / share, peak / share, grown // share))
assert len(ds) == files and share == files // nr, (len(ds), share)
assert [ds.paths[i] for i in s] == dstage.epoch_list(0, rank, nr), "order != the shim's list"
assert held <= 64 * share and peak <= 64 * share, (held, peak, share)
# the private memory the process gained (whole pages, malloc's arenas)
assert grown <= 64 * share + (1 << 20), (grown, share)
print(held, peak)
PYEOF
run_mem() {
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$SHM/dstage.$(id -u).$JOB$1" DSTAGE_NODE=0 \
		DSTAGE_MOUNT="$MOUNT" PYDIR="$SRCDIR/io/python" "$PY" mem.py "$2" "$3" "$4"
}
test_expect_success 'the same share of 2400, from 2400 and from 9600 files: <= 64 B per sample' '
	run_mem s 2400 0 1 >small.out && cat small.out &&
	run_mem b 9600 3 4 >big.out && cat big.out
'
test_expect_success 'what the share costs does not grow with the dataset (4x the files)' '
	read sh sp <<-EOF &&
	$(tail -n 1 small.out)
	EOF
	read bh bp <<-EOF &&
	$(tail -n 1 big.out)
	EOF
	echo "held $sh -> $bh, peak $sp -> $bp" &&
	test "$bh" -le $((sh + sh / 4 + 4096)) && test "$bp" -le $((sp + sp / 4 + 4096))
'
test_done
