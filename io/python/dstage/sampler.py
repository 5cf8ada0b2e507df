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
import bisect
import ctypes
import json
import os
import stat
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


def _where(ds, i):
    """Dataset index i: (class number, its entry id in the index when the
    class is a run of the index's entries, else -1, its index in the walked
    table, else -1)."""
    c = bisect.bisect_right(ds._cls_base, i) - 1
    off = i - ds._cls_base[c]
    id0 = ds._cls_id0[c]
    if id0 >= 0:
        return c, id0 + off, -1
    return c, -1, ds._cls_tab[c] + off


def _sample_at(ds, i):
    c, pos, k = _where(ds, i)
    if pos < 0:
        t = ds._table
        d = t.dir_of(k)
        return (os.path.join(t.dir_abs[d], os.fsdecode(t.name(k))), t.dir_target[d])
    name = _c_name(ds._lib.ds_py_entry_name, pos)
    top = os.path.join(ds.root, ds.classes[c]) if ds.classes else ds.root
    return (os.path.join(top, os.fsdecode(name[name.rfind(_SEP) + 1:])), c if ds.classes else 0)


def _path_at(ds, i):
    c, pos, k = _where(ds, i)
    if pos < 0:
        t = ds._table
        d = t.dir_of(k)
        rel = t.dir_rel[d]
        return os.fsdecode(rel + _SEP + t.name(k) if rel else t.name(k))
    return os.fsdecode(_c_name(ds._lib.ds_py_entry_name, pos))


def _target_at(ds, i):
    c = bisect.bisect_right(ds._cls_base, i) - 1
    return c if ds.classes else 0


# ---- the shim's entry points (io/pyapi.c) ---------------------------------------
# The preloaded library answers from its mapped index what a walk of the tree
# computes: a class directory that holds only sample files is a run of the
# index's sample table, in ImageFolder's order, so a dataset keeps three
# numbers for it, not a name per file.  Absent (no shim, another ABI,
# DSTAGE_PY_WALK=1), everything is walked as before.

_ABI = 2
_LIB = [False]


def _binding():
    """The preloaded shim's ds_py_* functions (ctypes), or None."""
    if _LIB[0] is not False:
        return _LIB[0]
    _LIB[0] = None
    if os.environ.get("DSTAGE_PY_WALK") not in (None, "", "0"):
        return None
    try:
        lib = ctypes.CDLL(None)
        abi = lib.ds_py_abi
    except (OSError, AttributeError):
        return None
    abi.restype = ctypes.c_int
    abi.argtypes = []
    if abi() != _ABI:
        return None
    c_u64p = ctypes.POINTER(ctypes.c_uint64)
    c_sizep = ctypes.POINTER(ctypes.c_size_t)
    lib.ds_py_mount.restype = ctypes.c_char_p
    lib.ds_py_mount.argtypes = []
    lib.ds_py_dir.restype = ctypes.c_int
    lib.ds_py_dir.argtypes = [ctypes.c_char_p, ctypes.c_size_t, c_u64p]
    lib.ds_py_entry_name.restype = ctypes.c_int64
    lib.ds_py_entry_name.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
    lib.ds_py_children.restype = ctypes.c_int64
    lib.ds_py_children.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                   ctypes.c_char_p, ctypes.c_size_t]
    lib.ds_py_lookup.restype = ctypes.c_int64
    lib.ds_py_lookup.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.ds_py_list.restype = ctypes.c_int
    lib.ds_py_list.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint32,
                               ctypes.POINTER(ctypes.c_void_p), c_sizep]
    lib.ds_py_map.restype = ctypes.c_int64
    lib.ds_py_map.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_void_p]
    lib.ds_py_free.restype = None
    lib.ds_py_free.argtypes = [ctypes.c_void_p]
    _LIB[0] = lib
    return lib


_NAME_BUF = 4096  # PATH_MAX: every entry's path fits


def _c_name(fn, k, buf=None):
    """Entry k's path from the shim's index, built into buf (one of
    _NAME_BUF bytes; a loop passes the same one)."""
    if buf is None:
        buf = ctypes.create_string_buffer(_NAME_BUF)
    n = fn(k, buf, _NAME_BUF)
    if n < 0:
        raise OSError("dstage: the shim's index has no entry %d" % k)
    return buf.raw[:n]


def _class_run(lib, rel):
    """The entries [id0, id1) of the index that are directory rel's files
    (bytes, mount-relative), every one a sample, in ImageFolder's order, or
    None (walk it)."""
    out = (ctypes.c_uint64 * 8)()
    if lib.ds_py_dir(rel, len(rel), out) != 0:
        return None
    # every entry of the subtree a child of it and a sample (io/pyapi.c)
    return (out[5], out[6]) if out[2] == 1 else None


def _class_dirs(lib, rel, root, exts=None):
    """The directories of directory rel (bytes, mount-relative; root: its
    path) from the index's directory table, in one call: {name: (id0, id1),
    the entries of the index that are that class's files, every one a
    sample, in ImageFolder's order, or None: walk it}; symlinks to directories are classes too (walked), as
    os.scandir's is_dir() says.  None when rel is not a directory of the
    index (a symlink, say): list it the usual way.  exts: ImageFolder's
    extensions, lowercase; a class is then a run when every file of it has
    one (the shim reads its names)."""
    out = (ctypes.c_uint64 * 8)()
    if lib.ds_py_dir(rel, len(rel), out) != 0:
        return None
    n = out[3]
    rows = array.array("q", [0]) * (6 * n)
    ext_b = b"".join(os.fsencode(e) + b"\0" for e in exts) if exts else None
    cap = 32 * n + 64
    for _ in range(2):
        buf = ctypes.create_string_buffer(cap)
        used = lib.ds_py_children(rel, len(rel), rows.buffer_info()[0] if n else None, n, buf,
                                  cap, ext_b, len(ext_b) if ext_b else 0)
        if used <= cap:
            break
        cap = used
    if used < 0:
        return None
    raw = buf.raw
    res = {}
    for k in range(0, 6 * n, 6):
        mode, off, ln = rows[k], rows[k + 1], rows[k + 2]
        name = raw[off:off + ln].decode("utf-8", "surrogateescape")
        if stat.S_ISDIR(mode):
            res[name] = (rows[k + 3], rows[k + 4]) if rows[k + 5] == 1 else None
        elif stat.S_ISLNK(mode) and os.path.isdir(os.path.join(root, name)):
            res[name] = None
    return res


class DstageFiles(_Dataset):
    """The files under mount/subdir as a Dataset, ImageFolder-compatible:
    classes are the directories right under subdir, a sample is
    (loader(path), class index) after transform/target_transform.

    The default loader returns the file's bytes; pass loader=PIL-style for
    images (e.g. torchvision.datasets.folder.default_loader).  `paths` holds
    the mount-relative paths, the names the epoch lists use.  `samples`,
    `targets` and `paths` are read-only sequences that build an item when it
    is asked for, in ImageFolder's order.  With the preloaded shim's entry
    points a class directory of sample files costs three numbers (a run of
    the index's entries), whatever its size; any other class is walked and
    costs its names' bytes and an offset a file (see _Table)."""

    def __init__(self, subdir="train", mount=None, transform=None, target_transform=None,
                 loader=None, extensions=None):
        self.mount = mount_point(mount)
        self.root = os.path.join(self.mount, subdir) if subdir else self.mount
        self.transform = transform
        self.target_transform = target_transform
        self.loader = loader or self._read_bytes
        if not os.path.isdir(self.root):
            raise FileNotFoundError("'%s': not a directory (is the shim preloaded?)" % self.root)
        exts = tuple(e.lower() for e in extensions) if extensions else None
        # with the shim's entry points, a class that is a run of the index's
        # sample table costs three numbers; any other is walked into t
        lib = _binding()
        if lib is not None and os.fsdecode(lib.ds_py_mount() or b"") != self.mount:
            lib = None
        self._lib = lib
        dirs = None
        relroot = os.path.relpath(self.root, self.mount)
        if lib is not None and not relroot.startswith(".."):
            relroot = b"" if relroot == "." else os.fsencode(relroot)
            dirs = _class_dirs(lib, relroot, self.root, exts)
        if dirs is None:
            dirs = {e.name: None for e in os.scandir(self.root) if e.is_dir()}
        # classes as ImageFolder's find_classes: the directories, sorted
        self.classes = sorted(dirs)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        t = _Table()
        base, id0s, tabs = array.array("q"), array.array("q"), array.array("q")
        runs = []
        n = 0
        for c in self.classes or [""]:
            top = os.path.join(self.root, c) if c else self.root
            target = self.class_to_idx.get(c, 0)
            base.append(n)
            if c:
                run = dirs[c]
            elif lib is not None and isinstance(relroot, bytes) and not exts:
                run = _class_run(lib, relroot)  # no classes: the files of the root
            else:
                run = None
            if run:
                id0s.append(run[0])
                tabs.append(-1)
                runs.append((run[0], run[1], n))
                n += run[1] - run[0]
                continue
            id0s.append(-1)
            tabs.append(len(t))
            k = len(t)
            # ImageFolder's order: directories by their path as a str
            # (not the walk's: class/a/b comes after class/a.b)
            for dirpath, _, filenames in sorted(os.walk(top, followlinks=True)):
                filenames.sort()
                if exts:
                    filenames = [f for f in filenames if f.lower().endswith(exts)]
                t.add_dir(dirpath, os.path.relpath(dirpath, self.mount), target, filenames)
            n += len(t) - k
        base.append(n)
        t.finish()
        self._table = t
        self._n = n
        self._cls_base, self._cls_id0, self._cls_tab = base, id0s, tabs
        # the runs by their entry ids: (id0, id1, first index)
        runs.sort()
        self._runs = array.array("q", [x for r in runs for x in r])
        self._run_id0 = array.array("q", [r[0] for r in runs])
        # the walked classes by their place in t: (first in t, first index)
        walked = [(tabs[i], base[i]) for i in range(len(tabs)) if tabs[i] >= 0]
        self._walk_t0 = array.array("q", [w[0] for w in walked])
        self._walk_base = array.array("q", [w[1] for w in walked])
        self.samples = _View(self, _sample_at)
        self.targets = _View(self, _target_at)
        self.paths = _View(self, _path_at)

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_lib"] = st["_lib"] is not None
        return st

    def __setstate__(self, st):
        self.__dict__.update(st)
        if self._lib:
            self._lib = _binding()
            if self._lib is None:
                raise RuntimeError("DstageFiles: unpickled where the shim is not preloaded")
        else:
            self._lib = None

    @staticmethod
    def _read_bytes(path):
        with open(path, "rb") as f:
            return f.read()

    def index_of(self, relpath):
        """Index of a mount-relative path (as in the epoch lists); KeyError if absent."""
        return self._index_of_bytes(os.fsencode(relpath))

    def _index_of_bytes(self, relpath):
        if self._lib is not None and self._runs:
            ident = self._lib.ds_py_lookup(relpath, len(relpath))
            if ident >= 0:
                r = bisect.bisect_right(self._run_id0, ident) - 1
                if r >= 0 and ident < self._runs[3 * r + 1]:
                    return self._runs[3 * r + 2] + ident - self._runs[3 * r]
        k = self._table.find(relpath)
        if k < 0:
            raise KeyError(os.fsdecode(relpath))
        w = bisect.bisect_right(self._walk_t0, k) - 1
        return self._walk_base[w] + k - self._walk_t0[w]

    def _dstage_list(self, epoch, rank, num_replicas, skip=0):
        """Epoch `epoch`'s list of reader rank of num_replicas as an array of
        indices (from sample `skip` on), straight from the shim: no text,
        no path decoded but for samples of walked classes.  None without
        the shim's entry points."""
        lib = self._lib
        if lib is None:
            return None
        ids = ctypes.c_void_p()
        cnt = ctypes.c_size_t()
        rc = lib.ds_py_list(epoch, rank, num_replicas, ctypes.byref(ids), ctypes.byref(cnt))
        if rc:
            raise OSError(-rc, "epoch %d list of reader %d of %d: %s"
                          % (epoch, rank, num_replicas, os.strerror(-rc)))
        try:
            k = max(cnt.value - skip, 0)
            out = array.array("q", [0]) * k
            if k == 0:
                return out
            first = ids.value + 4 * min(skip, cnt.value)
            miss = lib.ds_py_map(first, k, self._runs.buffer_info()[0] if self._runs else None,
                                 len(self._runs) // 3, out.buffer_info()[0])
            if miss:
                at = (ctypes.c_uint32 * k).from_address(first)
                name = ctypes.create_string_buffer(_NAME_BUF)
                for j in range(k):
                    if out[j] < 0:
                        out[j] = self._index_of_bytes(_c_name(lib.ds_py_entry_name, at[j], name))
            return out
        finally:
            lib.ds_py_free(ids)

    def __len__(self):
        return self._n

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
    ImageFolder/DatasetFolder (samples), or anything with `paths`.  Over a
    DstageFiles with the shim's entry points the list comes as entry ids,
    mapped to indices in C; else it is read line by line.  Either way it is
    held as one array of indices (8 bytes a sample of this reader's
    share)."""

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
        # DstageFiles with the shim's entry points: the list as entry ids,
        # mapped to indices in C (no text, no lookup per path in Python)
        fast = getattr(dataset, "_dstage_list", None)
        self._fast = (fast if fast and getattr(dataset, "_lib", None) is not None and
                      getattr(dataset, "mount", None) == self.mount else None)
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
        out = None
        if self._fast and not (self._resume and self._resume[0] == self.epoch):
            skip = self.start if self.start and self.epoch == self._start_epoch else 0
            try:
                out = self._fast(self.epoch, self.rank, self.num_replicas, skip)
            except KeyError as e:
                self._not_in_dataset(os.fsencode(e.args[0]))
        if out is None:
            out = array.array("q")
            lookup = self._lookup
            for p in self._lines():
                try:
                    out.append(lookup(p))
                except KeyError:
                    self._not_in_dataset(p)
        self._cached = (self.epoch, out)
        return out

    def _not_in_dataset(self, p):
        raise KeyError("'%s' (epoch %d list) is not in the dataset: build it over the "
                       "staged tree under '%s'; every file outside the pack's "
                       "--replicate subtrees is a training sample, so pack files "
                       "that are not samples with --replicate or --exclude"
                       % (os.fsdecode(p), self.epoch, self.mount)) from None

    def __iter__(self):
        return iter(self._indices())

    def __len__(self):
        return len(self._indices())
