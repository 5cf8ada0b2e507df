#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The PyTorch helper (io/python/dstage): EpochSampler gives a DataLoader the
# indices of this reader's epoch list; DstageFiles (and torchvision's
# ImageFolder) map the list's paths to samples; bytes equal the source; after
# the first epoch's prefetch every read is node-local.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_require TORCH

export PYTHONPATH="$SRCDIR/io/python"

test_expect_success 'two nodes staged' '
	make_samples src 24 &&
	pack_stage src 2
'
serve_start 2 --seed 3
test_expect_success 'served' 'serve_up 2'

cat >train.py <<'PYEOF'
import hashlib, os, sys, time
import torch, torch.utils.data as tud
import dstage

src, node, nreaders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mount = os.environ["DSTAGE_MOUNT"]
ds = dstage.DstageFiles("train")
assert ds.classes == ["cat", "dog", "fox", "owl"], ds.classes
assert len(ds) == 96, len(ds)

def stat(field):
    # struct ds_stats: 8-byte words; see t/lib-serve.sh stat_val
    words = {"remote_reads": 7, "stalls": 9, "cache_reads": 5, "prefetch_epoch": 14,
             "prefetch_done": 15, "prefetch_total": 16}
    with open("%s/%d/stats" % (os.environ["DSTAGE_STORE"], node), "rb") as f:
        f.seek(8 * words[field]); return int.from_bytes(f.read(8), "little")

def prefetched(e):
    pe = stat("prefetch_epoch")
    return pe > e or (pe == e and stat("prefetch_done") == stat("prefetch_total"))

# the readers of a node move through the epochs together, as DDP ranks do
readers = []
for r in range(nreaders):
    sampler = dstage.EpochSampler(ds, rank=r, num_replicas=nreaders)
    loader = tud.DataLoader(ds, sampler=sampler, batch_size=4, num_workers=2,
                            collate_fn=lambda b: b)
    readers.append((sampler, loader, []))
for e in range(3):
    t = time.time()
    while not prefetched(e) and time.time() - t < 30:
        time.sleep(0.05)
    r0, s0 = stat("remote_reads"), stat("stalls")
    for r, (sampler, loader, seen) in enumerate(readers):
        sampler.set_epoch(e)
        want = dstage.epoch_list(e, r, nreaders)
        idx = list(sampler)
        assert [ds.paths[i] for i in idx] == want, "sampler order != the shim's list"
        assert len(sampler) == len(want)
        n = 0
        for batch in loader:
            for data, target in batch:
                p = want[n]
                with open(os.path.join(src, p), "rb") as f:
                    assert data == f.read(), "bytes of %s differ" % p
                assert target == ds.class_to_idx[p.split("/")[1]]
                n += 1
        assert n == len(want)
        seen.append(want)
    assert stat("remote_reads") == r0 and stat("stalls") == s0, \
        "epoch %d: remote reads %d -> %d, stalls %d -> %d" % (e, r0, stat("remote_reads"), s0, stat("stalls"))
for r, (sampler, loader, seen) in enumerate(readers):
    assert seen[0] != seen[1] != seen[2]
    print("reader %d of %d: 3 epochs, %d samples each, bytes ok, all local" % (r, nreaders, len(seen[0])))
PYEOF

test_expect_success 'node 0, one reader: DataLoader with EpochSampler, 3 epochs' '
	shim_on 0 "$PY" train.py src 0 1
'
test_expect_success 'node 1, two local readers: each its l-of-2 list' '
	shim_on 1 "$PY" train.py src 1 2
'

cat >folder.py <<'PYEOF'
import os, sys
import torchvision.datasets as tvd
import dstage
mount = os.environ["DSTAGE_MOUNT"]
ds = tvd.ImageFolder(os.path.join(mount, "train"), loader=lambda p: open(p, "rb").read(),
                     is_valid_file=lambda p: True)
s = dstage.EpochSampler(ds, rank=0, num_replicas=1)
s.set_epoch(1)
idx = list(s)
paths = [os.path.relpath(ds.samples[i][0], mount) for i in idx]
assert paths == dstage.epoch_list(1), "ImageFolder indices do not follow the list"
print("ImageFolder: %d samples in epoch-1 order" % len(paths))
PYEOF
test_expect_success TORCHVISION 'torchvision ImageFolder works with EpochSampler too' '
	shim_on 1 "$PY" folder.py
'

test_expect_success 'without the shim: a clear error, not an empty epoch' '
	! DSTAGE_MOUNT=$MOUNT "$PY" -c "import dstage; dstage.epoch_list(0)" 2>err &&
	cat err && grep -q "is libdstage-preload.so preloaded" err
'
serve_stop
test_expect_success 'stopped' 'test "$(cat serve.rc)" = 0'
test_done
