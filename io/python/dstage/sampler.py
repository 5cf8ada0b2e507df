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

import array
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


def _dstage_epoch(args, raw=False):
    """Run `dstage epoch` for this reader's job and node (DSTAGE_STORE,
    DSTAGE_NODE or SLURM_NODEID); the binary from $DSTAGE_BIN, else next to
    the preloaded library (PREFIX/lib -> PREFIX/bin), else on PATH.  Its
    output as text, or as bytes when raw."""
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
    return r.stdout if raw else r.stdout.decode("utf-8", "surrogateescape")


def _open_list(epoch, rank, num_replicas, mount):
    """The shim's list file of reader `rank` of `num_replicas`, open for
    reading in binary (lines are mount-relative paths, as bytes)."""
    if not 0 <= rank < num_replicas:
        raise ValueError("reader %d of %d: out of range" % (rank, num_replicas))
    path = "%s/.dstage/epochs/%d/%d-of-%d" % (mount_point(mount), epoch, rank, num_replicas)
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise FileNotFoundError(
            "'%s': no epoch list: is libdstage-preload.so preloaded "
            "(eval \"$(dstage env --to DIR)\") and DSTAGE_MOUNT right?" % path) from None


def epoch_list(epoch, rank=0, num_replicas=1, mount=None):
    """The paths (relative to the mount) local reader `rank` of `num_replicas`
    reads in `epoch`, in order.  Raises OSError when the shim is not there."""
    with _open_list(epoch, rank, num_replicas, mount) as f:
        data = f.read()
    return [p.decode("utf-8", "surrogateescape") for p in data.split(b"\n") if p]


# ---- the dataset's table, compact --------------------------------------------
# A reader process (and every DataLoader worker forked from it) holds the
# dataset's paths.  As Python objects (a tuple, a str for the path and one for
# the relative path, a dict entry each) that is ~700 B per file: 1 GB per
# process at ImageNet-1k, ~8 GB per reader at 14M files.  Here a file costs
# its name's bytes and one offset: the names of a directory are one run of a
# bytes object, in the order the walk gives them; directories (few) keep their
# path and class.  A path is decoded when a sample is fetched, and a lookup is
# a binary search in its directory's run (names are sorted there).

_SEP = os.sep.encode()


def _u64_array():
    return array.array("Q")


class _Table:
    """The files under one root: per directory (walk order) its absolute
    path, its mount-relative path (bytes) and its class index; per file its
    name in `blob` between off[i] and off[i + 1]."""

    def __init__(self):
        self.dir_abs = []     # str, as os.walk gives it
        self.dir_rel = []     # bytes, relative to the mount ("" for the mount itself)
        self.dir_target = array.array("l")
        self.dir_start = _u64_array()  # first file of each directory; one more at the end
        self.dir_bytes_sorted = array.array("b")  # names sorted as bytes too (binary search on bytes)
        self.dir_ids = {}     # dir_rel -> directory number
        self._chunks = []
        self._blob_len = 0
        self.off = _u64_array()
        self.off.append(0)
        self.blob = b""

    def add_dir(self, dirpath, rel, target, names):
        """names: str, sorted (as os.walk + sorted() give them)."""
        d = len(self.dir_abs)
        self.dir_abs.append(dirpath)
        relb = b"" if rel == "." else os.fsencode(rel)
        self.dir_rel.append(relb)
        self.dir_target.append(target)
        self.dir_start.append(len(self.off) - 1)
        enc = [os.fsencode(n) for n in names]
        ok = all(a < b for a, b in zip(enc, enc[1:]))
        self.dir_bytes_sorted.append(1 if ok else 0)
        # the first directory of a relative path wins, as the first file of
        # a path did in the dict it replaces (only symlinked trees repeat one)
        self.dir_ids.setdefault(relb, d)
        pos = self._blob_len
        off = self.off
        for e in enc:
            pos += len(e)
            off.append(pos)
        self._blob_len = pos
        self._chunks.append(b"".join(enc))

    def finish(self):
        self.dir_start.append(len(self.off) - 1)
        self.blob = b"".join(self._chunks)
        self._chunks = None

    def __len__(self):
        return len(self.off) - 1

    def dir_of(self, i):
        # the last directory starting at or before i (empty ones share a start)
        lo, hi, ds = 0, len(self.dir_abs), self.dir_start
        while lo < hi:
            mid = (lo + hi) >> 1
            if ds[mid] <= i:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def name(self, i):
        return self.blob[self.off[i]:self.off[i + 1]]

    def find(self, rel):
        """Index of a mount-relative path (bytes), or -1."""
        k = rel.rfind(_SEP)
        d = self.dir_ids.get(rel[:k] if k >= 0 else b"")
        if d is None:
            return -1
        name = rel[k + 1:]
        lo, hi = self.dir_start[d], self.dir_start[d + 1]
        blob, off = self.blob, self.off
        if self.dir_bytes_sorted[d]:
            while lo < hi:
                mid = (lo + hi) >> 1
                s = blob[off[mid]:off[mid + 1]]
                if s < name:
                    lo = mid + 1
                elif s > name:
                    hi = mid
                else:
                    return mid
            return -1
        # names that are not UTF-8 sort by their decoded (surrogate) form
        key = os.fsdecode(name)
        while lo < hi:
            mid = (lo + hi) >> 1
            s = os.fsdecode(blob[off[mid]:off[mid + 1]])
            if s < key:
                lo = mid + 1
            elif s > key:
                hi = mid
            else:
                return mid
        return -1


class _View:
    """A read-only sequence over the table, built on demand per item."""

    __slots__ = ("_t", "_f")

    def __init__(self, table, fn):
        self._t = table
        self._f = fn

    def __len__(self):
        return len(self._t)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._f(self._t, j) for j in range(*i.indices(len(self._t)))]
        n = len(self._t)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index out of range")
        return self._f(self._t, i)

    def __iter__(self):
        t, f = self._t, self._f
        for i in range(len(t)):
            yield f(t, i)

    def __eq__(self, other):
        try:
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return "<%d items>" % len(self)


def _sample_at(t, i):
    d = t.dir_of(i)
    return (os.path.join(t.dir_abs[d], os.fsdecode(t.name(i))), t.dir_target[d])


def _path_at(t, i):
    d = t.dir_of(i)
    rel = t.dir_rel[d]
    return os.fsdecode(rel + _SEP + t.name(i) if rel else t.name(i))


def _target_at(t, i):
    return t.dir_target[t.dir_of(i)]


class DstageFiles(_Dataset):
    """The files under mount/subdir as a Dataset, ImageFolder-compatible:
    classes are the directories right under subdir, a sample is
    (loader(path), class index) after transform/target_transform.

    The default loader returns the file's bytes; pass loader=PIL-style for
    images (e.g. torchvision.datasets.folder.default_loader).  `paths` holds
    the mount-relative paths, the names the epoch lists use.  `samples`,
    `targets` and `paths` are read-only sequences that build an item when it
    is asked for: a file costs its name's bytes and an offset, not Python
    objects (see _Table)."""

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
        t = _Table()
        for c in self.classes or [""]:
            top = os.path.join(self.root, c) if c else self.root
            target = self.class_to_idx.get(c, 0)
            for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
                dirnames.sort()
                filenames.sort()
                if exts:
                    filenames = [n for n in filenames if n.lower().endswith(exts)]
                t.add_dir(dirpath, os.path.relpath(dirpath, self.mount), target, filenames)
        t.finish()
        self._table = t
        self.samples = _View(t, _sample_at)
        self.targets = _View(t, _target_at)
        self.paths = _View(t, _path_at)

    @staticmethod
    def _read_bytes(path):
        with open(path, "rb") as f:
            return f.read()

    def index_of(self, relpath):
        """Index of a mount-relative path (as in the epoch lists); KeyError if absent."""
        i = self._table.find(os.fsencode(relpath))
        if i < 0:
            raise KeyError(relpath)
        return i

    def _index_of_bytes(self, relpath):
        i = self._table.find(relpath)
        if i < 0:
            raise KeyError(os.fsdecode(relpath))
        return i

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
    ImageFolder/DatasetFolder (samples), or anything with `paths`.  The
    list is read line by line and held as one array of indices (8 bytes a
    sample of this reader's share)."""

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
        """A function from a list line (bytes, mount-relative) to an index."""
        if hasattr(ds, "_index_of_bytes"):
            return ds._index_of_bytes
        if hasattr(ds, "index_of"):
            f = ds.index_of
            return lambda p: f(os.fsdecode(p))
        if hasattr(ds, "samples"):
            paths = [s[0] if isinstance(s, (tuple, list)) else s for s in ds.samples]
        elif hasattr(ds, "paths"):
            paths = list(ds.paths)
        else:
            raise TypeError("EpochSampler: the dataset needs index_of(), samples or paths")
        table = {}
        for i, p in enumerate(paths):
            rel = os.path.relpath(p, self.mount) if os.path.isabs(p) else p
            table[os.fsencode(rel)] = i
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

    def _lines(self):
        """This reader's list of the current epoch: mount-relative paths as
        bytes, one at a time (the list is never held whole)."""
        if self._resume and self._resume[0] == self.epoch:
            out = _dstage_epoch(["--resume", self._resume[1],
                                 "%d-of-%d" % (self.rank, self.num_replicas)], raw=True)
            for p in out.split(b"\n"):
                if p:
                    yield p
            return
        skip = self.start if self.start and self.epoch == self._start_epoch else 0
        with _open_list(self.epoch, self.rank, self.num_replicas, self.mount) as f:
            for line in f:
                p = line[:-1] if line.endswith(b"\n") else line
                if not p:
                    continue
                if skip:
                    skip -= 1
                    continue
                yield p

    def _indices(self):
        if self._cached and self._cached[0] == self.epoch:
            return self._cached[1]
        out = array.array("q")
        lookup = self._lookup
        for p in self._lines():
            try:
                out.append(lookup(p))
            except KeyError:
                raise KeyError("'%s' (epoch %d list) is not in the dataset: build it over the "
                               "staged tree under '%s'; every file outside the pack's "
                               "--replicate subtrees is a training sample, so pack files "
                               "that are not samples with --replicate or --exclude"
                               % (os.fsdecode(p), self.epoch, self.mount)) from None
        self._cached = (self.epoch, out)
        return out

    def __iter__(self):
        return iter(self._indices())

    def __len__(self):
        return len(self._indices())
