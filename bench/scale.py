# SPDX-License-Identifier: BSD-3-Clause
"""bench/scale.py: the reader side of bench/scale.sh (issue 27).

    scale.py make DIR N CLASSES          a metadata-only tree: DIR/train/<class>/<name>.JPEG,
                                         N hard links to 4 small files (DIR/.seed)
    scale.py dstage [L]                  DstageFiles("train") + EpochSampler(rank L of 8,
                                         default 0) under the shim ($DSTAGE_MOUNT)
    scale.py folder ROOT NREPLICAS       torchvision ImageFolder(ROOT) + DistributedSampler
                                         (rank 0 of NREPLICAS), natively
    scale.py list L N                    read .dstage/epochs/0/L-of-N through the shim (the
                                         median of 5, the shim started before)
    scale.py dist NSAMPLES NREPLICAS     DistributedSampler's index list alone (its peer)

Each prints one line: seconds; the private (anonymous) memory the process
holds at the end over what it held after its imports, in bytes; its peak RSS
over the RSS after its imports (this counts the pages of files it mapped:
the shim's index, shared by every process of the node); the samples of the
reader's share; and the CPU seconds (user + system) of the same span: on a
box shared with other work the wall time also counts the waits for a core."""
import os
import resource
import sys
import time


def rss_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


A0 = [0]
C0 = [0.0]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def start():
    A0[0] = rss_kb("RssAnon")
    C0[0] = cpu()
    return rss_kb("VmRSS")


def out(secs, peak, n, cpus=None):
    print("%.6f %d %d %d %.6f" % (secs, (rss_kb("RssAnon") - A0[0]) * 1024, peak, n,
                                  cpu() - C0[0] if cpus is None else cpus))


# links per seed file: ext4 caps an inode at 65000 links (EMLINK past it),
# so a tree of millions of names on /var/tmp takes a fresh set of 4 seeds
# every 4 * LINKS_PER_SEED names
LINKS_PER_SEED = 60000


def make(root, n, classes):
    seed = os.path.join(root, ".seed")
    os.makedirs(seed, exist_ok=True)
    seeds = []

    def seed_for(k):
        g = k // (4 * LINKS_PER_SEED)
        while len(seeds) <= 4 * g + 3:
            i = len(seeds)
            p = os.path.join(seed, "s%d" % i if i < 4 else "s%d.%d" % (i % 4, i // 4))
            with open(p, "wb") as f:
                f.write(bytes([i % 4]) * (48 + 16 * (i % 4)))
            seeds.append(p)
        return seeds[4 * g + k % 4]

    seed_for(0)
    per = -(-n // classes)
    k = 0
    for c in range(classes):
        wn = "n%08d" % (1440764 + 7919 * c)
        d = os.path.join(root, "train", wn)
        os.makedirs(d, exist_ok=True)
        for j in range(per):
            if k == n:
                return
            os.link(seed_for(k), os.path.join(d, "%s_%d.JPEG" % (wn, 10000 + 7 * j)))
            k += 1


def main():
    mode = sys.argv[1]
    if mode == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    if mode == "dstage":
        import dstage
        r0 = start()
        t = time.perf_counter()
        ds = dstage.DstageFiles("train")
        rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
        s = dstage.EpochSampler(ds, rank=rank, num_replicas=8)
        s.set_epoch(0)
        n = sum(1 for _ in s)
        secs = time.perf_counter() - t
        # a sample fetched: its path decoded (not its bytes read)
        assert ds.samples[next(iter(s))][0].startswith(ds.root)
        out(secs, (rss_kb("VmHWM") - r0) * 1024, n)
    elif mode == "folder":
        import torch.utils.data as tud
        import torchvision.datasets as tvd
        r0 = start()
        t = time.perf_counter()
        ds = tvd.ImageFolder(sys.argv[2])
        s = tud.DistributedSampler(ds, num_replicas=int(sys.argv[3]), rank=0, shuffle=True, seed=0)
        s.set_epoch(0)
        n = sum(1 for _ in s)
        secs = time.perf_counter() - t
        out(secs, (rss_kb("VmHWM") - r0) * 1024, n)
    elif mode == "list":
        # what a reader pays per epoch: the shim started first (its first
        # call maps the index), then the median of 5 opens + reads
        mnt = os.environ["DSTAGE_MOUNT"]
        os.listdir(mnt)
        path = "%s/.dstage/epochs/0/%s-of-%s" % (mnt, sys.argv[2], sys.argv[3])
        r0 = start()
        ts, cs = [], []
        for _ in range(5):
            t, c = time.perf_counter(), cpu()
            with open(path, "rb") as f:
                data = f.read()
            ts.append(time.perf_counter() - t)
            cs.append(cpu() - c)
        secs = sorted(ts)[2]
        out(secs, (rss_kb("VmHWM") - r0) * 1024, data.count(b"\n"), sorted(cs)[2])
    elif mode == "dist":
        import torch.utils.data as tud
        ns, nr = int(sys.argv[2]), int(sys.argv[3])
        s = tud.DistributedSampler(range(ns), num_replicas=nr, rank=0, shuffle=True, seed=0)
        s.set_epoch(0)
        r0 = start()
        t = time.perf_counter()
        n = len(list(iter(s)))
        secs = time.perf_counter() - t
        out(secs, (rss_kb("VmHWM") - r0) * 1024, n)
    else:
        sys.exit("scale.py: unknown mode %s" % mode)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
