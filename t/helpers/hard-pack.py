# SPDX-License-Identifier: BSD-3-Clause
"""hard-pack.py: craft hostile packs from a good one, for t/9000 and t/9001.

  hard-pack.py list                    the name of every mutation
  hard-pack.py IN OUT MUTATION         write pack IN, changed, into OUT; print
                                       the path `dstage cat` should try
  hard-pack.py IN OUT identity         the same, unchanged (must verify)
  hard-pack.py all IN DIR              every mutation: DIR/NAME/ (the pack)
                                       and DIR/NAME.cat (the path), one run
  hard-pack.py reseal FILE             make FILE's seal match its bytes again
                                       (keeps its table directory)
  hard-pack.py flip FILE SEED N        overwrite N bytes after the user block

The crafted packs are whole, valid HDF5 files written by h5py with the
layout of docs/formats.md, "The pack" (packed little-endian tables, contiguous
datasets, the 4 KiB user block) and a valid seal: magic, directory of the
tables, CRC-32C of the metadata and of the seal itself (hdf5/seal.c).  So
the seal's CRC lets every one of them through, and only dstage's semantic
checks (names, bounds, order, overlaps, duplicates, types, agreement between
the manifest and the partitions) stand between them and a node store.

IN is a pack made by `dstage pack` from a tree with at least: a directory
holding a subdirectory, regular files (one zlib-compressed), a symlink.
The path printed is the one the mutation touches."""

import os
import shutil
import struct
import sys
import zlib

import h5py
import numpy as np

UB = 4096
S_IFMT, S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR = 0o170000, 0o040000, 0o100000, 0o120000, 0o020000

# ---- CRC-32C (Castagnoli), as ds_crc32c -------------------------------------
_T = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 & -(_c & 1))
    _T.append(_c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _T
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---- the seal ----------------------------------------------------------------
SEAL = struct.Struct("<16sIIII QQ QQ QQ QQ QQ III I")  # 128 bytes with the last CRC
assert SEAL.size == 128


def seal_decode(b):
    v = SEAL.unpack(b[:128])
    keys = ("magic", "version", "ubsize", "used", "part", "file_size", "pack_id",
            "entries_off", "nentries", "strings_off", "strings_len", "parts_off",
            "nparts_rows", "payload_off", "payload_len", "nparts", "flags", "meta_crc",
            "hdr_crc")
    return dict(zip(keys, v))


def seal_write(path, s):
    """Fill in file_size and both CRCs from the file's bytes, write the seal."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        s["file_size"] = len(data)
        po, pl = s["payload_off"], s["payload_len"]
        if pl and UB <= po <= len(data) and pl <= len(data) - po:
            meta = crc32c(data[UB:po])
            meta = crc32c(data[po + pl:], meta)
        else:
            s["payload_off"] = s["payload_len"] = 0
            meta = crc32c(data[UB:])
        s["meta_crc"] = meta
        s.setdefault("version", 1)
        s.setdefault("ubsize", UB)
        s.setdefault("used", 128)
        vals = [s["magic"], s["version"], s["ubsize"], s["used"], s["part"], s["file_size"],
                s["pack_id"], s["entries_off"], s["nentries"], s["strings_off"],
                s["strings_len"], s["parts_off"], s["nparts_rows"], s["payload_off"],
                s["payload_len"], s["nparts"], s["flags"], s["meta_crc"], 0]
        head = SEAL.pack(*vals)[:124]
        f.seek(0)
        f.write(head + struct.pack("<I", crc32c(head)))


def reseal(path):
    with open(path, "rb") as f:
        s = seal_decode(f.read(128))
    seal_write(path, s)


# ---- the model of a pack --------------------------------------------------------
FIELDS = ("path_off", "path_len", "mode", "mtime_ns", "size", "part", "offset", "stored",
          "codec", "flags", "crc", "target_off", "target_len")


def attrs_of(obj):
    return [(k, obj.attrs[k], obj.attrs.get_id(k).dtype) for k in obj.attrs.keys()]


def rows_of(f):
    pool = f["strings"][...].tobytes() if f["strings"].shape[0] else b""
    rows = []
    for r in f["entries"][...]:
        d = {k: int(r[k]) for k in FIELDS}
        d["path"] = pool[d["path_off"]:d["path_off"] + d["path_len"]]
        d["target"] = pool[d["target_off"]:d["target_off"] + d["target_len"]] \
            if (d["mode"] & S_IFMT) == S_IFLNK else b""
        rows.append(d)
    return rows, f["entries"].dtype


class Pack:
    def __init__(self, d):
        with h5py.File(os.path.join(d, "index.h5"), "r") as f:
            self.attrs = attrs_of(f)
            self.rows, self.dtype = rows_of(f)
            self.prows = [dict(size=int(p["size"]), nfiles=int(p["nfiles"]),
                               replicated=int(p["replicated"])) for p in f["partitions"][...]]
            self.pdtype = f["partitions"].dtype
        self.parts = []
        for i in range(len(self.prows)):
            with h5py.File(os.path.join(d, "part-%05d.h5" % i), "r") as f:
                rows, _ = rows_of(f)
                self.parts.append(dict(attrs=attrs_of(f), rows=rows,
                                       payload=bytearray(f["payload"][...].tobytes())))
        self.seal_over = {}       # index.h5 seal fields to force
        self.part_seal_over = {}  # part -> fields
        self.pool_over = None     # index.h5: rows keep their own path_off/len

    # -- helpers for mutations
    def find(self, pred):
        for r in self.rows:
            if pred(r):
                return r
        raise SystemExit("hard-pack: the pack has no entry for this mutation")

    def file(self, codec=None, replicated=False):
        return self.find(lambda r: (r["mode"] & S_IFMT) == S_IFREG and r["size"] > 0 and
                         (codec is None or r["codec"] == codec) and
                         bool(r["flags"] & 1) == replicated)

    def prow(self, r):
        """The partition table row of file r."""
        for x in self.parts[r["part"]]["rows"]:
            if x["path"] == r["path"]:
                return x
        raise SystemExit("hard-pack: file not in its partition's table")

    def set_file(self, r, **kv):
        """Change a file in the manifest and in its partition's own table."""
        p = self.prow(r)
        r.update(kv)
        p.update(kv)

    def sort(self):
        key = lambda r: r["path"].replace(b"/", b"\x01")
        self.rows.sort(key=key)
        for p in self.parts:
            p["rows"].sort(key=key)

    def attr(self, attrs, name, value):
        for i, (k, v, t) in enumerate(attrs):
            if k == name:
                attrs[i] = (k, value, t)

    # -- writing
    def _write(self, path, attrs, rows, tables, payload, seal):
        keep_offsets = self.pool_over is not None and "partitions" in tables
        pool = bytearray()
        for r in rows:
            if not keep_offsets:
                r["path_off"], r["path_len"] = len(pool), len(r["path"])
            pool += r["path"]
            if (r["mode"] & S_IFMT) == S_IFLNK or r.get("force_target"):
                if not keep_offsets:
                    r["target_off"], r["target_len"] = len(pool), len(r["target"])
                pool += r["target"]
            elif not keep_offsets:
                r["target_off"], r["target_len"] = 0, 0
        if keep_offsets:
            pool = bytearray(self.pool_over)
        ents = np.zeros(len(rows), dtype=self.dtype)
        for i, r in enumerate(rows):
            for k in FIELDS:
                ents[i][k] = r[k] & ((1 << (8 * self.dtype[k].itemsize)) - 1) \
                    if self.dtype[k].kind == "u" else r[k]
        with h5py.File(path, "w", userblock_size=UB, libver=("earliest", "v108"),
                       alignment_threshold=4096, alignment_interval=4096) as f:
            for k, v, t in attrs:
                f.attrs.create(k, v, dtype=t)
            e = f.create_dataset("entries", data=ents)
            s = f.create_dataset("strings", data=np.frombuffer(bytes(pool), dtype=np.uint8))
            if "partitions" in tables:
                pr = np.zeros(len(self.prows), dtype=self.pdtype)
                for i, p in enumerate(self.prows):
                    for k in ("size", "nfiles", "replicated"):
                        pr[i][k] = p[k]
                pt = f.create_dataset("partitions", data=pr)
            if payload is not None:
                pl = f.create_dataset("payload", data=np.frombuffer(bytes(payload), dtype=np.uint8))
            f.flush()
            off = lambda d: (d.id.get_offset() or 0) if d.shape[0] else 0
            seal.update(entries_off=off(e), nentries=len(rows), strings_off=off(s),
                        strings_len=len(pool))
            if "partitions" in tables:
                seal.update(parts_off=off(pt), nparts_rows=len(self.prows))
            else:
                seal.update(parts_off=0, nparts_rows=0)
            if payload is not None:
                seal.update(payload_off=off(pl), payload_len=len(payload))
            else:
                seal.update(payload_off=0, payload_len=0)
        return seal

    def write(self, d):
        os.makedirs(d, exist_ok=True)
        pack_id = [v for k, v, t in self.attrs if k == "pack_id"][0]
        nparts = len(self.prows)
        for i, p in enumerate(self.parts):
            pid = [v for k, v, t in p["attrs"] if k == "pack_id"][0]
            rep = [v for k, v, t in p["attrs"] if k == "replicated"][0]
            path = os.path.join(d, "part-%05d.h5" % i)
            seal = dict(magic=b"dstage-part\n", part=i, pack_id=int(pid), nparts=nparts,
                        flags=int(rep) & 1)
            self._write(path, p["attrs"], p["rows"], (), p["payload"], seal)
            seal.update(self.part_seal_over.get(i, {}))
            seal_write(path, seal)
        path = os.path.join(d, "index.h5")
        seal = dict(magic=b"dstage-pack\n", part=0xFFFFFFFF, pack_id=int(pack_id),
                    nparts=nparts, flags=0)
        self._write(path, self.attrs, self.rows, ("partitions",), None, seal)
        seal.update(self.seal_over)
        seal_write(path, seal)


# ---- mutations -------------------------------------------------------------------
# Each takes the pack and returns the path `dstage cat` should be asked for.
M = {}


def mutation(fn):
    M[fn.__name__.replace("_", "-")] = fn
    return fn


def rename_file(pk, new):
    r = pk.file(codec=0)
    pk.set_file(r, path=new)
    return new


# the file a name that escapes would make: one per test script (t/9000 and
# t/9001 may run at the same time), /tmp/dstage-pwned by default
PWNED = os.environ.get("DSTAGE_TEST_PWNED", "dstage-pwned").encode()


@mutation
def dotdot(pk):
    return rename_file(pk, b"train/../../../../../../tmp/" + PWNED)


@mutation
def dstage_top(pk):
    # the shim's virtual directory would hide it: refused like an unsafe name
    return rename_file(pk, b".dstage/epochs/1/all")


@mutation
def dotdot_only(pk):
    return rename_file(pk, b"..")


@mutation
def absolute(pk):
    return rename_file(pk, b"/tmp/" + PWNED)


@mutation
def empty_component(pk):
    return rename_file(pk, b"train//x")


@mutation
def dot_component(pk):
    return rename_file(pk, b"train/./x")


@mutation
def newline(pk):
    return rename_file(pk, b"train/a\nb")


@mutation
def not_utf8(pk):
    return rename_file(pk, b"train/\xff\xfe.jpg")


@mutation
def nul_in_name(pk):
    return rename_file(pk, b"train/a\x00b")


@mutation
def long_component(pk):
    return rename_file(pk, b"train/" + b"x" * 300)


@mutation
def long_path(pk):
    return rename_file(pk, b"/".join([b"d" * 200] * 25))


def retarget(pk, target):
    r = pk.find(lambda r: (r["mode"] & S_IFMT) == S_IFLNK)
    r["target"] = target
    r["size"] = len(target)
    return r["path"]


@mutation
def symlink_escape(pk):
    return retarget(pk, b"../../../../../../etc/passwd")


@mutation
def symlink_absolute(pk):
    return retarget(pk, b"/etc/passwd")


@mutation
def symlink_escape_indirect(pk):
    return retarget(pk, b"../sub/../../../outside")


@mutation
def symlink_size_lie(pk):
    r = pk.find(lambda r: (r["mode"] & S_IFMT) == S_IFLNK)
    r["size"] = 1 << 40
    return r["path"]


@mutation
def duplicate_file(pk):
    r = pk.file(codec=0)
    p = pk.prow(r)
    i = pk.rows.index(r)
    pk.rows.insert(i + 1, dict(r))
    part = pk.parts[r["part"]]["rows"]
    part.insert(part.index(p) + 1, dict(p))
    pk.prows[r["part"]]["nfiles"] += 1
    return r["path"]


@mutation
def duplicate_dir(pk):
    r = pk.find(lambda r: (r["mode"] & S_IFMT) == S_IFDIR)
    pk.rows.insert(pk.rows.index(r) + 1, dict(r))
    return r["path"]


@mutation
def duplicate_file_dir(pk):
    # a directory and a file of the same name
    r = pk.file(codec=0)
    d = dict(r, mode=S_IFDIR | 0o755, part=0xFFFFFFFF, offset=0, stored=0, codec=0, crc=0,
             size=4096)
    pk.rows.insert(pk.rows.index(r), d)
    return r["path"]


@mutation
def dir_claims_file(pk):
    # a directory with children claims to be a file, with the bytes (and a
    # valid CRC) of a real file
    f = pk.file(codec=0)
    d = pk.find(lambda r: (r["mode"] & S_IFMT) == S_IFDIR and
                any(x["path"].startswith(r["path"] + b"/") for x in pk.rows))
    for k in ("size", "part", "offset", "stored", "codec", "crc", "flags"):
        d[k] = f[k]
    d["mode"] = S_IFREG | 0o644
    pk.prows[f["part"]]["nfiles"] += 1
    return d["path"]


@mutation
def file_claims_dir(pk):
    r = pk.file(codec=0)
    r["mode"] = S_IFDIR | 0o755
    return r["path"]


@mutation
def device(pk):
    r = pk.file(codec=0)
    pk.set_file(r, mode=S_IFCHR | 0o666)
    return r["path"]


@mutation
def mode_extra_bits(pk):
    r = pk.file(codec=0)
    pk.set_file(r, mode=r["mode"] | 0o1000000)
    return r["path"]


def raw_pair(pk):
    """Two raw files of one partition."""
    raw = [r for r in pk.rows if (r["mode"] & S_IFMT) == S_IFREG and r["size"] > 1 and
           r["codec"] == 0 and not r["flags"] & 1]
    for a in raw:
        for b in raw:
            if a is not b and a["part"] == b["part"]:
                return a, b
    raise SystemExit("hard-pack: no two raw files in one partition")


@mutation
def overlap_whole(pk):
    # two files share the same stored bytes: both CRCs hold
    a, b = raw_pair(pk)
    pk.set_file(b, offset=a["offset"], stored=a["stored"], size=a["size"], crc=a["crc"])
    return b["path"]


@mutation
def overlap_partial(pk):
    # b starts inside a; b's CRC made to match the bytes it now names
    a, b = raw_pair(pk)
    data = pk.parts[a["part"]]["payload"]
    off = a["offset"] + 1
    pk.set_file(b, offset=off, crc=crc32c(data[off:off + b["stored"]]))
    return b["path"]


@mutation
def offset_past_payload(pk):
    r = pk.file(codec=0)
    pk.set_file(r, offset=pk.prows[r["part"]]["size"] + 100)
    return r["path"]


@mutation
def offset_wraps(pk):
    r = pk.file(codec=0)
    pk.set_file(r, offset=(1 << 64) - 16)
    return r["path"]


@mutation
def stored_past_payload(pk):
    r = pk.file(codec=0)
    big = pk.prows[r["part"]]["size"] * 4
    pk.set_file(r, stored=big, size=big)
    return r["path"]


@mutation
def size_huge(pk):
    r = pk.file(codec=0)
    pk.set_file(r, size=1 << 62, stored=1 << 62)
    return r["path"]


@mutation
def zlib_size_lie(pk):
    r = pk.file(codec=1)
    pk.set_file(r, size=1 << 40)
    return r["path"]


@mutation
def zlib_bomb(pk):
    # 64 MiB of zeros in ~64 KiB of deflate, claimed as a 100-byte file
    r = pk.file(codec=1)
    bomb = zlib.compress(b"\0" * (64 << 20), 9)
    part = pk.parts[r["part"]]
    off = len(part["payload"])
    part["payload"] += bomb
    pk.prows[r["part"]]["size"] = len(part["payload"])
    pk.set_file(r, offset=off, stored=len(bomb), size=100, crc=crc32c(b"\0" * 100))
    return r["path"]


@mutation
def zlib_garbage(pk):
    r = pk.file(codec=0)
    pk.set_file(r, codec=1)
    return r["path"]


@mutation
def raw_size_lie(pk):
    r = pk.file(codec=0)
    pk.set_file(r, size=r["size"] + 1)
    return r["path"]


@mutation
def crc_wrong(pk):
    r = pk.file(codec=0)
    pk.set_file(r, crc=r["crc"] ^ 1)
    return r["path"]


@mutation
def crc_wrong_zlib(pk):
    r = pk.file(codec=1)
    pk.set_file(r, crc=r["crc"] ^ 0x80000000)
    return r["path"]


@mutation
def payload_flipped(pk):
    # a payload byte of a file changes, the seal is valid (the payload is
    # outside the seal's CRC): the file's CRC catches it
    r = pk.file(codec=0)
    pk.parts[r["part"]]["payload"][r["offset"]] ^= 0x40
    return r["path"]


@mutation
def part_out_of_range(pk):
    r = pk.file(codec=0)
    r["part"] = len(pk.prows) + 5
    return r["path"]


@mutation
def codec_unknown(pk):
    r = pk.file(codec=0)
    pk.set_file(r, codec=7)
    return r["path"]


@mutation
def flags_unknown(pk):
    r = pk.file(codec=0)
    pk.set_file(r, flags=0x80)
    return r["path"]


@mutation
def replicated_lie(pk):
    r = pk.file(codec=0)
    pk.set_file(r, flags=r["flags"] ^ 1)
    return r["path"]


@mutation
def target_on_file(pk):
    r = pk.file(codec=0)
    r["target"] = b"x"
    r["force_target"] = True
    return r["path"]


@mutation
def payload_on_dir(pk):
    d = pk.find(lambda r: (r["mode"] & S_IFMT) == S_IFDIR)
    d["part"], d["offset"], d["stored"] = 0, 0, 10
    return d["path"]


@mutation
def unsorted(pk):
    files = [r for r in pk.rows if (r["mode"] & S_IFMT) == S_IFREG]
    a, b = pk.rows.index(files[0]), pk.rows.index(files[1])
    pk.rows[a], pk.rows[b] = pk.rows[b], pk.rows[a]
    return files[0]["path"]


@mutation
def missing_parent(pk):
    d = pk.find(lambda r: (r["mode"] & S_IFMT) == S_IFDIR and
                any(x["path"].startswith(r["path"] + b"/") for x in pk.rows))
    pk.rows.remove(d)
    return [x for x in pk.rows if x["path"].startswith(d["path"] + b"/")][0]["path"]


@mutation
def pool_reused(pk):
    # every entry names the same bytes of the pool (an allocation bomb for a
    # reader that copies each name)
    name = b"d/" * 2000 + b"f"
    pk.pool_over = name
    pk.rows = [r for r in pk.rows if (r["mode"] & S_IFMT) != S_IFLNK]
    for r in pk.rows:
        r["path_off"], r["path_len"] = 0, len(name)
        r["target_off"], r["target_len"] = 0, 0
    return name


@mutation
def path_outside_pool(pk):
    pk.pool_over = b"".join(r["path"] + r["target"] for r in pk.rows)
    off = 0
    for r in pk.rows:
        r["path_off"], r["path_len"] = off, len(r["path"])
        off += len(r["path"])
        r["target_off"], r["target_len"] = off, len(r["target"])
        off += len(r["target"])
    pk.rows[-1]["path_off"] = len(pk.pool_over) + 10
    return pk.rows[-1]["path"]


@mutation
def nentries_huge(pk):
    pk.seal_over["nentries"] = 1 << 40
    return pk.file(codec=0)["path"]


@mutation
def nentries_beyond(pk):
    # more rows than the table has: the reader would decode other bytes
    pk.seal_over["nentries"] = len(pk.rows) + 40
    return pk.file(codec=0)["path"]


@mutation
def nparts_huge(pk):
    pk.seal_over["nparts"] = 0xFFFFFFFF
    pk.seal_over["nparts_rows"] = 0xFFFFFFFF
    return pk.file(codec=0)["path"]


@mutation
def nfiles_huge(pk):
    pk.prows[0]["nfiles"] = 0xFFFFFFFF
    return pk.file(codec=0)["path"]


@mutation
def part_size_huge(pk):
    r = pk.file(codec=0)
    pk.prows[r["part"]]["size"] = 1 << 60
    return r["path"]


@mutation
def part_size_differs(pk):
    r = pk.file(codec=0)
    pk.prows[r["part"]]["size"] += 4096
    return r["path"]


@mutation
def pack_id_differs(pk):
    r = pk.file(codec=0)
    pk.attr(pk.parts[r["part"]]["attrs"], "pack_id", np.uint64(12345))
    return r["path"]


@mutation
def part_numbers_swapped(pk):
    pk.parts[0], pk.parts[1] = pk.parts[1], pk.parts[0]
    return pk.file(codec=0)["path"]


@mutation
def part_table_disagrees(pk):
    r = pk.file(codec=0)
    pk.prow(r)["crc"] ^= 1
    return r["path"]


@mutation
def no_entries(pk):
    pk.rows = []
    for p in pk.prows:
        p["nfiles"] = 0
    return b"x"


@mutation
def no_partitions(pk):
    pk.rows = [r for r in pk.rows if (r["mode"] & S_IFMT) != S_IFREG]
    pk.prows, pk.parts = [], []
    pk.attr(pk.attrs, "nparts", np.uint32(0))
    return b"x"


@mutation
def payload_truncated(pk):
    # the last file's stored bytes run past a shorter payload, the manifest
    # says the shorter size too
    r = max((x for x in pk.rows if (x["mode"] & S_IFMT) == S_IFREG and x["size"] > 10),
            key=lambda x: x["offset"])
    part = pk.parts[r["part"]]
    del part["payload"][len(part["payload"]) - 5:]
    pk.prows[r["part"]]["size"] = len(part["payload"])
    return r["path"]


def main():
    a = sys.argv[1:]
    if a == ["list"]:
        for name, fn in M.items():
            print(name)
        return 0
    if len(a) == 2 and a[0] == "reseal":
        reseal(a[1])
        return 0
    if len(a) == 4 and a[0] == "flip":
        path, seed, n = a[1], int(a[2]), int(a[3])
        data = bytearray(open(path, "rb").read())
        x = seed * 0x9E3779B97F4A7C15 + 1
        for k in range(n):
            x ^= (x << 13) & (2 ** 64 - 1)
            x ^= x >> 7
            x ^= (x << 17) & (2 ** 64 - 1)
            at = UB + x % (len(data) - UB)
            data[at] ^= 1 << ((x >> 32) & 7)
        open(path, "wb").write(data)
        return 0
    if len(a) == 3 and a[0] == "all":
        for name, fn in M.items():
            pk = Pack(a[1])
            cat = fn(pk)
            out = os.path.join(a[2], name)
            if os.path.exists(out):
                shutil.rmtree(out)
            pk.write(out)
            with open(out + ".cat", "wb") as f:
                f.write(cat)
        return 0
    if len(a) == 3 and a[2] == "identity":
        pk = Pack(a[0])
        if os.path.exists(a[1]):
            shutil.rmtree(a[1])
        pk.write(a[1])
        return 0
    if len(a) != 3 or a[2] not in M:
        sys.stderr.write("usage: hard-pack.py list | IN OUT MUTATION | reseal FILE | "
                         "flip FILE SEED N\n")
        return 2
    src, out, name = a
    pk = Pack(src)
    cat = M[name](pk)
    if os.path.exists(out):
        shutil.rmtree(out)
    pk.write(out)
    sys.stdout.buffer.write(cat + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
