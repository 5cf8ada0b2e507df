# SPDX-License-Identifier: BSD-3-Clause
"""EpochSampler and DstageFiles: a thin PyTorch face of dstage's epoch lists.

    import dstage
    ds = dstage.DstageFiles(subdir="train", transform=tf)      # or ImageFolder
    sampler = dstage.EpochSampler(ds)                          # l, n: local rank/size
    loader = torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=64,
                                         num_workers=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)                               # like DistributedSampler
        for x, y in loader:
            ...

The sampler replaces DistributedSampler: dstage already splits every epoch
between nodes (a global shuffle, or one that keeps --locality L of a node's
own data), and between the readers of a node the way DistributedSampler
does (reader l takes items l, l+n, ... of the node's share).
"""

import json
import os
import subprocess

try:
    import torch.utils.data as _tud

    _Sampler = _tud.Sampler
    _Dataset = _tud.Dataset
except ImportError:  # usable (and testable) without torch
    _Sampler = object
    _Dataset = object


def mount_point(mount=None):
    """The prefix readers see: the argument, else $DSTAGE_MOUNT, else /dstage."""
    return (mount or os.environ.get("DSTAGE_MOUNT") or "/dstage").rstrip("/") or "/"


def _env_int(names, default):
    for name in names:
        v = os.environ.get(name)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                pass
    return default


def local_rank_and_size():
    """This process's reader number on its node and the readers per node:
    torchrun's LOCAL_RANK/LOCAL_WORLD_SIZE, else Slurm's SLURM_LOCALID and
    SLURM_NTASKS_PER_NODE, else Open MPI's or MPICH's local rank, else 0 of 1."""
    l = _env_int(["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"], 0)
    n = _env_int(["LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                  "MPI_LOCALNRANKS"], 1)
    return l, max(n, 1)


def _dstage_epoch(args):
    """Run `dstage epoch` for this reader's job and node (DSTAGE_STORE,
    DSTAGE_NODE or SLURM_NODEID); the binary from $DSTAGE_BIN, else next to
    the preloaded library (PREFIX/lib -> PREFIX/bin), else on PATH."""
    store = os.environ.get("DSTAGE_STORE")
    if not store:
        raise RuntimeError("DSTAGE_STORE is not set: eval \"$(dstage env --to DIR)\" first")
    store = store.rstrip("/")
    base = os.path.basename(store)
    parts = base.split(".", 2)
    if len(parts) != 3 or parts[0] != "dstage":
        raise RuntimeError("DSTAGE_STORE '%s': not a dstage job directory" % store)
    exe = None
    if os.environ.get("DSTAGE_BIN"):
        exe = os.path.join(os.environ["DSTAGE_BIN"], "dstage")
    else:
        for lib in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
            if lib.endswith("libdstage-preload.so"):
                cand = os.path.join(os.path.dirname(os.path.dirname(lib)), "bin", "dstage")
                if os.path.exists(cand):
                    exe = cand
    cmd = [exe or "dstage", "epoch", "--to", os.path.dirname(store), "--job", parts[2]] + list(args)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if r.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.decode(errors="replace").strip()))
    return r.stdout.decode("utf-8", "surrogateescape")


def epoch_list(epoch, rank=0, num_replicas=1, mount=None):
    """The paths (relative to the mount) local reader `rank` of `num_replicas`
    reads in `epoch`, in order.  Raises OSError when the shim is not there."""
    if not 0 <= rank < num_replicas:
        raise ValueError("reader %d of %d: out of range" % (rank, num_replicas))
    path = "%s/.dstage/epochs/%d/%d-of-%d" % (mount_point(mount), epoch, rank, num_replicas)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            "'%s': no epoch list: is libdstage-preload.so preloaded "
            "(eval \"$(dstage env --to DIR)\") and DSTAGE_MOUNT right?" % path) from None
    return [p.decode("utf-8", "surrogateescape") for p in data.split(b"\n") if p]


class DstageFiles(_Dataset):
    """The files under mount/subdir as a Dataset, ImageFolder-compatible:
    classes are the directories right under subdir, a sample is
    (loader(path), class index) after transform/target_transform.

    The default loader returns the file's bytes; pass loader=PIL-style for
    images (e.g. torchvision.datasets.folder.default_loader).  `paths` holds
    the mount-relative paths, the names the epoch lists use."""

    def __init__(self, subdir="train", mount=None, transform=None, target_transform=None,
                 loader=None, extensions=None):
        self.mount = mount_point(mount)
        self.root = os.path.join(self.mount, subdir) if subdir else self.mount
        self.transform = transform
        self.target_transform = target_transform
        self.loader = loader or self._read_bytes
        if not os.path.isdir(self.root):
            raise FileNotFoundError("'%s': not a directory (is the shim preloaded?)" % self.root)
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        exts = tuple(e.lower() for e in extensions) if extensions else None
        self.samples = []
        for c in self.classes or [""]:
            top = os.path.join(self.root, c) if c else self.root
            for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
                dirnames.sort()
                for name in sorted(filenames):
                    if exts and not name.lower().endswith(exts):
                        continue
                    self.samples.append((os.path.join(dirpath, name), self.class_to_idx.get(c, 0)))
        self.targets = [t for _, t in self.samples]
        self.paths = [os.path.relpath(p, self.mount) for p, _ in self.samples]
        self._index = {p: i for i, p in enumerate(self.paths)}

    @staticmethod
    def _read_bytes(path):
        with open(path, "rb") as f:
            return f.read()

    def index_of(self, relpath):
        """Index of a mount-relative path (as in the epoch lists); KeyError if absent."""
        return self._index[relpath]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target


class EpochSampler(_Sampler):
    """Indices into `dataset` in the order dstage's epoch list gives this
    reader (rank l of num_replicas readers on this node; defaults from the
    launcher's environment, see local_rank_and_size).  set_epoch(e) picks
    the epoch, like DistributedSampler.set_epoch.

    `dataset` maps paths to indices: DstageFiles (index_of), torchvision's
    ImageFolder/DatasetFolder (samples), or anything with `paths`."""

    def __init__(self, dataset, rank=None, num_replicas=None, mount=None, epoch=0, start=0,
                 resume=None):
        """start=k: the first epoch iterated (`epoch`, or the one set_epoch
        picks) begins at sample k of this reader's list (a checkpoint taken
        after k samples, same nodes and readers).  resume=PATH: a state file
        saved by save_state(): the epoch it names yields exactly the samples
        not read yet, on the same or on another number of nodes/readers
        (docs/failover.md); set_epoch(state epoch) is implied."""
        l, n = local_rank_and_size()
        self.rank = l if rank is None else int(rank)
        self.num_replicas = n if num_replicas is None else int(num_replicas)
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError("reader %d of %d: out of range" % (self.rank, self.num_replicas))
        self.mount = mount_point(mount or getattr(dataset, "mount", None))
        self.epoch = epoch
        self._lookup = self._make_lookup(dataset)
        self._cached = None  # (epoch, indices)
        self.start = int(start)
        self._start_epoch = epoch
        self._resume = None
        if resume is not None:
            with open(resume) as f:
                st = json.load(f)
            if st.get("format") != "dstage-resume":
                raise ValueError("'%s': not a dstage resume state" % resume)
            self._resume = (int(st["epoch"]), os.path.abspath(resume))
            self.epoch = self._start_epoch = int(st["epoch"])
            self.start = 0

    def _make_lookup(self, ds):
        if hasattr(ds, "index_of"):
            return ds.index_of
        if hasattr(ds, "samples"):
            paths = [s[0] if isinstance(s, (tuple, list)) else s for s in ds.samples]
        elif hasattr(ds, "paths"):
            paths = list(ds.paths)
        else:
            raise TypeError("EpochSampler: the dataset needs index_of(), samples or paths")
        table = {}
        for i, p in enumerate(paths):
            rel = os.path.relpath(p, self.mount) if os.path.isabs(p) else p
            table[rel] = i
        return table.__getitem__

    def set_epoch(self, epoch, start=None):
        self.epoch = int(epoch)
        if start is not None:
            self.start = int(start)
            self._start_epoch = self.epoch
            self._cached = None

    def state(self, k):
        """The resume state (a dict) of a checkpoint taken after every reader
        read the first k samples of its list of the current epoch."""
        return json.loads(_dstage_epoch(["--state", str(self.epoch), str(int(k)),
                                         "--readers", str(self.num_replicas)]))

    def save_state(self, path, k):
        """Write state(k) to PATH (JSON, atomically): keep it next to the
        checkpoint and pass it back as EpochSampler(..., resume=PATH)."""
        st = self.state(k)
        tmp = "%s.tmp.%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump(st, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return st

    def _paths(self):
        if self._resume and self._resume[0] == self.epoch:
            return _dstage_epoch(["--resume", self._resume[1],
                                  "%d-of-%d" % (self.rank, self.num_replicas)]).splitlines()
        paths = epoch_list(self.epoch, self.rank, self.num_replicas, self.mount)
        if self.start and self.epoch == self._start_epoch:
            paths = paths[self.start:]
        return paths

    def _indices(self):
        if self._cached and self._cached[0] == self.epoch:
            return self._cached[1]
        out = []
        for p in self._paths():
            try:
                out.append(self._lookup(p))
            except KeyError:
                raise KeyError("'%s' (epoch %d list) is not in the dataset: build it over the "
                               "staged tree under '%s'; every file outside the pack's "
                               "--replicate subtrees is a training sample, so pack files "
                               "that are not samples with --replicate or --exclude"
                               % (p, self.epoch, self.mount)) from None
        self._cached = (self.epoch, out)
        return out

    def __iter__(self):
        return iter(self._indices())

    def __len__(self):
        return len(self._indices())
