# SPDX-License-Identifier: BSD-3-Clause
"""bench/e2e.py: the end-to-end row of bench/run.sh (row 7), for /usr/bin/python3.

  e2e.py gen ROOT CLASSES PER_CLASS
      an ImageFolder tree ROOT/train/cNNN/iNNNNN.jpg of JPEGs like ImageNet's
      (about 480x360: smooth colour fields with noise, quality 92; 64
      distinct images, copied)
  e2e.py worker ROOT
      imports torch once, then for each line "decode" or "raw" on stdin runs
      one epoch of ImageFolder(ROOT/train) + DataLoader(num_workers=2,
      batch_size=32, shuffle) and prints "images seconds":
        decode: PIL decode (default loader), CenterCrop(224), ToTensor
        raw:    the file's bytes read (open().read()), no decode
  e2e.py drive ROUNDS NAME=ROOT[,ENV=VALUE...] ...
      starts one worker per NAME (ENV=VALUE pairs go into its environment,
      e.g. LD_PRELOAD for the shim), then ROUNDS rounds, each running
      decode and raw on every worker in turn (A B C, B C A, C A B, ...); before each
      run of a worker whose NAME has a file NAME.remount next to this
      process's cwd, that file is run (squashfuse: fresh caches);
      prints "NAME MODE images seconds" per run.
"""
import os
import subprocess
import sys
import time


def gen(root, classes, per):
    import random
    from PIL import Image, ImageFilter

    import io

    rng = random.Random(3)
    # 64 distinct images, then copies of their bytes (making each JPEG is
    # slower than reading it many times over)
    pool = []
    for _ in range(64):
        w, h = rng.randint(400, 560), rng.randint(300, 420)
        small = Image.new("RGB", (w // 16, h // 16))
        small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256))
                       for _ in range((w // 16) * (h // 16))])
        img = small.resize((w, h), Image.BICUBIC)
        noise = Image.effect_noise((w, h), 60).convert("RGB")
        img = Image.blend(img, noise, 0.3).filter(ImageFilter.SMOOTH)
        b = io.BytesIO()
        img.save(b, format="JPEG", quality=92)
        pool.append(b.getvalue())
    k = 0
    for c in range(classes):
        d = os.path.join(root, "train", "c%03d" % c)
        os.makedirs(d, exist_ok=True)
        for i in range(per):
            with open(os.path.join(d, "i%05d.jpg" % i), "wb") as f:
                f.write(pool[k % len(pool)])
            k += 1


def worker(root):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    torch.set_num_threads(1)
    dec = datasets.ImageFolder(os.path.join(root, "train"),
                               transform=transforms.Compose([transforms.CenterCrop(224),
                                                             transforms.ToTensor()]))

    def raw_loader(p):
        with open(p, "rb") as f:
            return len(f.read())

    raw = datasets.ImageFolder(os.path.join(root, "train"), loader=raw_loader)
    print("ready", len(dec), flush=True)
    for line in sys.stdin:
        mode = line.strip()
        ds = dec if mode == "decode" else raw
        t0 = time.perf_counter()
        n = 0
        for x, _ in DataLoader(ds, batch_size=32, shuffle=True, num_workers=2):
            n += len(x)
        print(n, "%.6f" % (time.perf_counter() - t0), flush=True)


def drive(rounds, specs):
    workers = []
    for spec in specs:
        name, rest = spec.split("=", 1)
        parts = rest.split(",")
        env = dict(os.environ)
        for kv in parts[1:]:
            k, v = kv.split("=", 1)
            env[k] = v
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", parts[0]],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                             universal_newlines=True, bufsize=1)
        workers.append((name, p))
    for name, p in workers:
        line = p.stdout.readline()
        if not line.startswith("ready"):
            sys.exit("e2e: worker %s did not start" % name)
    for r in range(rounds):
        # the order rotates from round to round: no contender is always first
        order = workers[r % len(workers):] + workers[:r % len(workers)]
        for mode in ("decode", "raw"):
            for name, p in order:
                if os.path.exists(name + ".remount"):
                    subprocess.run(["sh", name + ".remount"], check=True)
                p.stdin.write(mode + "\n")
                p.stdin.flush()
                n, secs = p.stdout.readline().split()
                print(name, mode, n, secs, flush=True)
    for name, p in workers:
        p.stdin.close()
        if p.wait():
            sys.exit("e2e: worker %s failed" % name)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "worker":
        worker(sys.argv[2])
    elif cmd == "drive":
        drive(int(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(__doc__)
