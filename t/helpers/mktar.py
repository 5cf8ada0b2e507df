#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""mktar.py: tars for the tar-shard tests (t/0013, t/9052-t/9054), written
with Python's tarfile where it can and by hand where it refuses.

    mktar.py tree FORMAT SRC OUT     SRC's files into OUT (FORMAT gnu, pax,
                                     ustar: tarfile's formats)
    mktar.py CASE OUT                one crafted tar, CASE one of CASES below
    mktar.py list                    the crafted cases, one a line
    mktar.py ls TAR                  tarfile's view of TAR's regular files
                                     (the last of each name): SIZE DATA_OFF
                                     MTIME_NS NAME, sorted by name
"""
import decimal
import io
import os
import sys
import tarfile

BLK = 512


def info(name, data=b"", type=tarfile.REGTYPE, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = type
    ti.size = len(data) if type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    ti.mtime = kw.pop("mtime", 1700000000)
    ti.mode = kw.pop("mode", 0o644)
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def build(members, fmt=tarfile.GNU_FORMAT, pax_headers=None):
    """members: (TarInfo, data) pairs; returns the tar's bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt, pax_headers=pax_headers) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if data else None)
    return buf.getvalue()


def header(name, typ, size=0, linkname=b"", size_field=None, mtime_field=None, chksum=None):
    """One raw ustar header block; fields given as bytes where tarfile would refuse."""
    h = bytearray(BLK)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = size_field if size_field is not None else b"%011o\0" % size
    h[136:148] = mtime_field if mtime_field is not None else b"%011o\0" % 1700000000
    h[156:157] = typ
    h[157:157 + len(linkname)] = linkname
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    s = sum(h) if chksum is None else chksum
    h[148:156] = b"%06o\0 " % s
    return bytes(h)


def pad(data):
    return data + b"\0" * (-len(data) % BLK)


def pax_record(key, value):
    """b"LEN key=value\\n" with LEN counting itself."""
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n).encode()) + len(body) != n:
        n += 1
    return str(n).encode() + body


def raw_tar(*blocks):
    return b"".join(blocks) + b"\0" * (2 * BLK)


def pax_member(records, name, typ=b"0", data=b""):
    x = b"".join(pax_record(k, v) for k, v in records)
    return header(b"PaxHeaders/" + name[:80], b"x", len(x)) + pad(x) + \
        header(name, typ, len(data)) + pad(data)


def good(name=b"ok", data=b"fine\n"):
    return header(name, b"0", len(data)) + pad(data)


CASES = {
    # names
    "dotdot": lambda: build([(info("a/../../evil", b"x"), b"x")]),
    "absolute": lambda: build([(info("/etc/evil", b"x"), b"x")]),
    "dotdot-gnu-long": lambda: build([(info("d/" + "x" * 120 + "/../../../evil", b"x"), b"x")]),
    "dotdot-pax": lambda: raw_tar(pax_member([(b"path", b"../evil")], b"innocent")),
    "nul-pax": lambda: raw_tar(pax_member([(b"path", b"a\0b")], b"innocent")),
    "newline": lambda: build([(info("a\nb", b"x"), b"x")], tarfile.PAX_FORMAT),
    "not-utf8": lambda: raw_tar(good(b"caf\xe9")),
    "empty-name": lambda: raw_tar(good(b"")),
    "dot-component": lambda: raw_tar(good(b"a/./b")),
    "reg-trailing-slash": lambda: raw_tar(good(b"file/")),
    # links
    "symlink-out": lambda: build([(info("d/l", type=tarfile.SYMTYPE, linkname="../../x"), None)]),
    "symlink-abs": lambda: build([(info("l", type=tarfile.SYMTYPE, linkname="/etc/passwd"), None)]),
    "symlink-out-pax": lambda: raw_tar(pax_member([(b"linkpath", b"../" * 3 + b"x")], b"l", b"2")),
    "hardlink-missing": lambda: build([(info("h", type=tarfile.LNKTYPE, linkname="nothere"), None)]),
    "hardlink-later": lambda: build([(info("h", type=tarfile.LNKTYPE, linkname="f"), None),
                                     (info("f", b"x"), b"x")]),
    "hardlink-dir": lambda: build([(info("d", type=tarfile.DIRTYPE, mode=0o755), None),
                                   (info("h", type=tarfile.LNKTYPE, linkname="d"), None)]),
    "hardlink-symlink-out": lambda: build([
        (info("a/b/l", type=tarfile.SYMTYPE, linkname="../x"), None),
        (info("l2", type=tarfile.LNKTYPE, linkname="a/b/l"), None)]),
    "under-symlink": lambda: build([(info("l", type=tarfile.SYMTYPE, linkname="d"), None),
                                    (info("d", type=tarfile.DIRTYPE, mode=0o755), None),
                                    (info("l/f", b"x"), b"x")]),
    "under-file": lambda: build([(info("f", b"x"), b"x"), (info("f/g", b"y"), b"y")]),
    "dir-then-file": lambda: build([(info("d", type=tarfile.DIRTYPE, mode=0o755), None),
                                    (info("d", b"x"), b"x")]),
    # special members
    "device": lambda: build([(info("dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3), None),
                             (info("ok", b"fine\n"), b"fine\n")]),
    "fifo": lambda: build([(info("p", type=tarfile.FIFOTYPE), None),
                           (info("ok", b"fine\n"), b"fine\n")]),
    "gnu-sparse": lambda: raw_tar(header(b"sp", b"S", 0), good()),
    "pax-sparse": lambda: raw_tar(pax_member([(b"GNU.sparse.size", b"1048576"),
                                              (b"GNU.sparse.numblocks", b"1"),
                                              (b"GNU.sparse.offset", b"0"),
                                              (b"GNU.sparse.numbytes", b"0")], b"sp")),
    "multi-volume": lambda: raw_tar(header(b"mv", b"M", 0)),
    "unknown-type": lambda: raw_tar(header(b"u", b"Z", 0)),
    "dir-with-data": lambda: raw_tar(header(b"d", b"5", BLK) + b"\1" * BLK, good()),
    "symlink-with-data": lambda: raw_tar(header(b"l", b"2", BLK, b"ok") + b"\1" * BLK, good()),
    # structure
    "bad-checksum": lambda: raw_tar(header(b"f", b"0", 0, chksum=12345)),
    "not-a-tar": lambda: b"this is not a tar archive\n" * 100,
    "bad-size": lambda: raw_tar(header(b"f", b"0", size_field=b"12x4\0\0\0\0\0\0\0\0")),
    "negative-size": lambda: raw_tar(header(b"f", b"0", size_field=b"\xff" * 12)),
    "huge-size": lambda: raw_tar(header(b"f", b"0", size_field=b"\x80" + b"\x7f" + b"\xff" * 10)),
    "pax-bad-record": lambda: raw_tar(header(b"x", b"x", 9) + pad(b"99 path=a"), good()),
    "pax-bad-size": lambda: raw_tar(pax_member([(b"size", b"-5")], b"f")),
    "pax-size-past-end": lambda: pax_member([(b"size", b"1000000")], b"f") + b"\0" * 2048,
    "ext-without-member": lambda: raw_tar(header(b"././@LongLink", b"L", 4) + pad(b"abc\0")),
    "lone-zero-then-member": lambda: good() + b"\0" * BLK + good(b"hidden") + b"\0" * (2 * BLK),
    "no-end": lambda: good(),
    # a 4079-byte member path (20 components of 203): fine in the tar,
    # too long for PATH_MAX once under a tar a few directories down
    "long-path": lambda: raw_tar(pax_member([(b"path", b"/".join([b"c" * 203] * 20))], b"long",
                                            b"0", b"x")),
    # well-formed ones tarfile does not write for small members
    # base-256 size and a negative base-256 mtime (GNU): f, 5 bytes, 1 s before 1970
    "good-base256": lambda: raw_tar(
        header(b"f", b"0", size_field=b"\x80" + (5).to_bytes(11, "big"),
               mtime_field=b"\xff" * 11 + b"\xff") + pad(b"12345")),
    # a global pax header, then a member whose pax record gives its long
    # path, its size (the header says 0) and a fractional mtime
    "good-pax": lambda: raw_tar(
        header(b"pax_global_header", b"g", len(pax_record(b"comment", b"x"))) +
        pad(pax_record(b"comment", b"x")) +
        pax_member([(b"path", b"p/" + b"y" * 200), (b"size", b"5"),
                    (b"mtime", b"1700000000.25")], b"short", b"0", b"") +
        pad(b"abcde")),
}


def main(argv):
    if len(argv) == 2 and argv[1] == "list":
        print("\n".join(CASES))
        return 0
    if len(argv) == 5 and argv[1] == "tree":
        fmt = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT,
               "ustar": tarfile.USTAR_FORMAT}[argv[2]]
        with tarfile.open(argv[4], "w", format=fmt) as t:
            for top, dirs, files in os.walk(argv[3]):
                dirs.sort()
                for n in sorted(dirs + files):
                    p = os.path.join(top, n)
                    t.add(p, os.path.relpath(p, argv[3]), recursive=False)
        return 0
    if len(argv) == 3 and argv[1] == "ls":
        last = {}
        with tarfile.open(argv[2]) as t:
            for m in t:
                last[m.name.removeprefix("./")] = m
        for name in sorted(last):
            m = last[name]
            if m.isreg():
                # the pax record as written: a float loses the nanoseconds
                ns = int(decimal.Decimal(m.pax_headers.get("mtime", m.mtime)) * 10**9)
                print(m.size, m.offset_data, ns, name)
        return 0
    if len(argv) == 3 and argv[1] in CASES:
        with open(argv[2], "wb") as f:
            f.write(CASES[argv[1]]())
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
