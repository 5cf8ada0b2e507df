# SPDX-License-Identifier: BSD-3-Clause
"""hard-reader.py MOUNT SRC [--strict]: a reader that touches everything
under MOUNT through the shim (run it with LD_PRELOAD set) and compares what it
gets with the source tree SRC (read natively: SRC is outside the mount).

  walk    os.walk of the mount (errors collected, not fatal)
  files   every regular file of SRC: stat, open, read, compared byte for byte
  links   every symlink of SRC: readlink
  dirs    every directory of SRC: listdir, chdir into it, then ".." back up
          twice, getcwd
  epochs  the virtual epoch lists .dstage/epochs/0/all and 0/1-of-2

Prints one summary line: counts of calls that returned the source's answer,
and of errors by errno name.  A call may fail (ENOENT, EIO, ...); what must
never happen is wrong bytes or a wrong symlink target from a call that
succeeded: with --strict that is an exit 1, and so is an errno outside
{ENOENT, EIO, ENOTDIR, EISDIR, ELOOP, ENOMEM, EACCES, EINVAL, ENAMETOOLONG}
(the answers of a shim that refuses a damaged entry; Python's MemoryError for
a file whose damaged size it cannot allocate counts as ENOMEM).  Without --strict (random
damage can move a file's bytes inside the store: those are not re-checked
on the local read path), only the errno classes are checked."""

import errno
import os
import sys

ALLOWED = {errno.ENOENT, errno.EIO, errno.ENOTDIR, errno.EISDIR, errno.ELOOP,
           errno.ENOMEM, errno.EACCES, errno.EINVAL, errno.ENAMETOOLONG}

mount, src = sys.argv[1], sys.argv[2]
strict = "--strict" in sys.argv[3:]
counts = {}
bad = []


def note(what, err=None):
    key = what if err is None else errno.errorcode.get(err.errno, str(err.errno))
    counts[key] = counts.get(key, 0) + 1
    if err is not None and err.errno not in ALLOWED:
        bad.append("%s: unexpected %s" % (what, err))


def attempt(what, fn):
    try:
        return fn()
    except OSError as e:
        note(what, e)
        return None
    except MemoryError:
        note(what, OSError(errno.ENOMEM, "MemoryError"))
        return None


files, links, dirs = [], [], [""]
for d, ds, fs in os.walk(src):
    rel = os.path.relpath(d, src)
    rel = "" if rel == "." else rel
    for n in ds + fs:
        p = os.path.join(rel, n)
        full = os.path.join(src, p)
        if os.path.islink(full):
            links.append(p)
        elif os.path.isdir(full):
            dirs.append(p)
        elif os.path.isfile(full):
            files.append(p)

walk_errors = []
for d, ds, fs in os.walk(mount, onerror=walk_errors.append):
    for n in fs:
        attempt("walk-stat", lambda: os.lstat(os.path.join(d, n)))
for e in walk_errors:
    note("walk", e)

for p in files:
    want = open(os.path.join(src, p), "rb").read()
    # metadata comes from the index: a damaged size inside the bounds the
    # shim checks (a zlib file's size is only bounded by deflate's ratio) is
    # reported as it is; what matters is that no read returns wrong bytes
    attempt("stat", lambda: os.stat(os.path.join(mount, p)))

    def rd():
        with open(os.path.join(mount, p), "rb") as f:
            return f.read()
    got = attempt("read", rd)
    if got is None:
        continue
    if got == want:
        note("read-ok")
    else:
        note("read-wrong")
        if strict:
            bad.append("%s: %d bytes differ from the source's %d" % (p, len(got), len(want)))

for p in links:
    got = attempt("readlink", lambda: os.readlink(os.path.join(mount, p)))
    if got is not None and got != os.readlink(os.path.join(src, p)) and strict:
        bad.append("%s: readlink %r" % (p, got))

here = os.getcwd()
for p in dirs:
    attempt("listdir", lambda: os.listdir(os.path.join(mount, p)))
    if attempt("chdir", lambda: os.chdir(os.path.join(mount, p)) or True):
        for _ in range(2):
            attempt("chdir-up", lambda: os.chdir(".."))
            attempt("getcwd", os.getcwd)
    os.chdir(here)

for lst in ("all", "1-of-2"):
    def ep():
        with open(os.path.join(mount, ".dstage/epochs/0", lst), "rb") as f:
            return f.read()
    attempt("epoch-list", ep)

print(" ".join("%s=%d" % kv for kv in sorted(counts.items())))
for b in bad[:20]:
    print("BAD " + b)
sys.exit(1 if bad else 0)
