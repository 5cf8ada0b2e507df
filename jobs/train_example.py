#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""jobs/train_example.py: a small PyTorch training run on a dataset staged
by dstage, meant as the training step of jobs/train.sbatch:

    DSTAGE_PACK=/lustre/sample.pack sbatch -N4 jobs/train.sbatch \\
        /usr/bin/python3 jobs/train_example.py --epochs 2 --record $PWD/record

It runs on every node (one task per node, or several: see below) with the
dstage shim preloaded, so the staged tree appears under $DSTAGE_MOUNT
(default /dstage) as ordinary read-only files:

- the dataset is the image folder $DSTAGE_MOUNT/<subdir> (default train:
  one directory per class, as torchvision's ImageFolder wants), read with
  dstage.DstageFiles;
- dstage.EpochSampler gives the DataLoader this reader's share of every
  epoch, in the order dstage's node service has prefetched it (it takes
  the place of DistributedSampler: dstage already splits each epoch between
  the nodes, and between the readers of a node by SLURM_LOCALID /
  SLURM_NTASKS_PER_NODE or torchrun's LOCAL_RANK / LOCAL_WORLD_SIZE);
- a DataLoader with worker processes decodes the images with Pillow, and a
  linear classifier takes one SGD step per batch (a stand-in for a model).

Every path of the epoch lists must be a sample of the dataset: pack the
files that are not (a README, label maps, the validation set) with
`dstage pack --replicate PATH` (every node gets them; they are not shuffled)
or leave them out with --exclude.

With --record DIR, each reader writes DIR/epoch<E>.node<K>.<l>-of-<n>: one
line per sample it read, "PATH SHA256" (PATH relative to the mount, SHA-256
of the bytes read through the shim), in the order read.  The nodes' files
of one epoch together are a permutation of the training set.
"""

import argparse
import hashlib
import io
import os
import sys
import time

import torch
import torch.nn.functional as F
import torch.utils.data as tud
from PIL import Image

try:
    import dstage
except ImportError:
    sys.exit("train_example.py: no 'dstage' Python module: run under "
             "eval \"$(dstage env --to DIR)\" (jobs/train.sbatch does), which puts it on PYTHONPATH")


def parse_args():
    ap = argparse.ArgumentParser(description="train a toy classifier on a dstage-staged image folder")
    ap.add_argument("--subdir", default="train", help="image folder under the mount (default train)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes (default 2)")
    ap.add_argument("--image-size", type=int, default=16, help="images are resized to SIZE x SIZE")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--record", metavar="DIR", help="write what each reader read, per epoch, into DIR")
    return ap.parse_args()


class Decode:
    """bytes of an image file -> (sha256 of the bytes, CHW float tensor)."""

    def __init__(self, size):
        self.size = size

    def __call__(self, item):
        path, data = item
        img = Image.open(io.BytesIO(data)).convert("RGB").resize((self.size, self.size))
        x = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
        x = x.view(self.size, self.size, 3).permute(2, 0, 1).float().div(255.0)
        return path, hashlib.sha256(data).hexdigest(), x


def main():
    args = parse_args()
    torch.set_num_threads(1)  # the DataLoader workers and the node service need the cores
    node = int(os.environ.get("SLURM_NODEID") or os.environ.get("DSTAGE_NODE") or 0)
    mount = dstage.mount_point()

    def load(path):  # runs in the DataLoader workers: reads through the shim
        with open(path, "rb") as f:
            return os.path.relpath(path, mount), f.read()

    ds = dstage.DstageFiles(args.subdir, loader=load, transform=Decode(args.image_size))
    sampler = dstage.EpochSampler(ds)
    who = "node %d reader %d-of-%d" % (node, sampler.rank, sampler.num_replicas)
    if not len(ds.classes):
        sys.exit("train_example.py: %s: no class directories under '%s'" % (who, ds.root))
    loader = tud.DataLoader(ds, sampler=sampler, batch_size=args.batch_size,
                            num_workers=args.workers)
    torch.manual_seed(0)
    model = torch.nn.Linear(3 * args.image_size ** 2, len(ds.classes))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    print("%s: %d samples in %d classes under '%s', %d epochs" %
          (who, len(ds), len(ds.classes), ds.root, args.epochs), flush=True)
    if args.record:
        os.makedirs(args.record, exist_ok=True)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # this reader's list of the epoch, from the shim
        t0 = time.time()
        seen, loss_sum, batches = [], 0.0, 0
        for (paths, sums, x), y in loader:
            loss = F.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            batches += 1
            seen.extend(zip(paths, sums))
        if len(seen) != len(sampler):
            sys.exit("train_example.py: %s: epoch %d: read %d samples, the list has %d" %
                     (who, epoch, len(seen), len(sampler)))
        if args.record:
            name = "epoch%d.node%d.%d-of-%d" % (epoch, node, sampler.rank, sampler.num_replicas)
            tmp = os.path.join(args.record, "." + name)
            with open(tmp, "w") as f:
                f.writelines("%s %s\n" % s for s in seen)
            os.rename(tmp, os.path.join(args.record, name))
        print("%s: epoch %d: %d samples, %d batches, mean loss %.4f, %.2f s" %
              (who, epoch, len(seen), batches, loss_sum / max(batches, 1), time.time() - t0),
              flush=True)


if __name__ == "__main__":
    main()
