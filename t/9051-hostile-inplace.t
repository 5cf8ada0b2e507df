#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hostile in-place packs (issue 28): an index.h5 of `pack --in-place` whose
# sources table or seal was crafted, then resealed (both CRCs right, so only
# dstage's checks stand in the way): a root that is not an absolute path, a
# source named with '..', a source range that overflows, a source on a
# directory, sources that reuse the string pool, a seal version that does
# not match its flags, and a file's source swapped for another file of the
# tree.  verify, ls and stage refuse each, naming the entry; nothing staged.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
test_require PYTHON

cat >mutate.py <<\EOS
import struct, sys
UB = 4096
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    T.append(c)
def crc(d, c=0):
    c ^= 0xFFFFFFFF
    for b in d:
        c = T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
path, what = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read())
def u32(o): return struct.unpack_from("<I", b, o)[0]
def u64(o): return struct.unpack_from("<Q", b, o)[0]
ent, nent, strs, sof, slen = u64(48), u64(56), u64(64), u64(96), u64(104)
def row(i):  # sources row i: (src_off, str_off, str_len) and its file offset
    o = sof + 20 * i
    return struct.unpack_from("<QQI", b, o) + (o,)
def setrow(i, off, s, n):
    struct.pack_into("<QQI", b, row(i)[3], off, s, n)
def entry(i):  # path and mode of entry i
    o = ent + 70 * i
    po, pl, mode = struct.unpack_from("<QII", b, o)
    return bytes(b[strs + po:strs + po + pl]).decode(), mode
def find(p):
    return next(i for i in range(nent) if entry(i)[0] == p)
r0 = row(0)
if what == "root-empty":
    setrow(0, 0, r0[1], 0)
elif what == "root-relative":
    setrow(0, 0, r0[1] + 1, r0[2] - 1)
elif what == "src-dotdot":
    # the root's last 6 bytes become "a/../b", a file's source; the root shrinks
    e = strs + r0[1] + r0[2] - 6
    b[e:e + 6] = b"a/../b"
    setrow(0, 0, r0[1], r0[2] - 6)
    setrow(1 + find("a/f1"), 0, r0[1] + r0[2] - 6, 6)
elif what == "src-overflow":
    setrow(1 + find("a/f1"), (1 << 64) - 1, 0, 0)
elif what == "src-own-offset":
    setrow(1 + find("a/f1"), 7, 0, 0)
elif what == "src-on-dir":
    setrow(1 + find("a"), 0, r0[1], 3)
elif what == "pool-reuse":
    for i in range(nent):
        if entry(i)[1] & 0o170000 == 0o100000:
            setrow(1 + i, 0, r0[1], r0[2])
elif what == "seal-v2-noflag":
    struct.pack_into("<I", b, 116, 0)
elif what == "seal-v1-flag":
    struct.pack_into("<I", b, 16, 1)
elif what == "src-other-file":
    # a/f2's bytes come from a/f1: its source string is a/f1's path
    po, pl = struct.unpack_from("<QI", b, ent + 70 * find("a/f1"))
    setrow(1 + find("a/f2"), 0, po, pl)
else:
    sys.exit("unknown mutation " + what)
# reseal: the tables' CRC (in place: every byte after the user block), then the header's
flags = u32(116)
if flags & 2 or u32(16) == 2:
    meta = crc(b[UB:])
else:
    meta = crc(b[UB:sof]) if slen else crc(b[UB:])
    if slen:
        meta = crc(b[sof + slen:], meta)
struct.pack_into("<I", b, 120, meta)
struct.pack_into("<I", b, 124, crc(b[:124]))
open(path, "wb").write(b)
EOS

test_expect_success 'a tree and its in-place pack' '
	mkdir -p src/a/b && seq 1 3000 >src/a/f1 && echo two >src/a/f2 && seq 1 50 >src/a/b/f3 &&
	"$DSTAGE" pack -q --in-place src good && "$DSTAGE" verify -q good
'

# refused M MESSAGE: the mutation M of the good pack is refused by verify, ls
# and stage (on 2 simulated nodes), MESSAGE in what they say; nothing staged
refused() {
	rm -rf "$1" && mkdir "$1" && cp good/index.h5 "$1/" && "$PY" mutate.py "$1/index.h5" "$1" &&
	! "$DSTAGE" verify "$1" >/dev/null 2>err.v && test_grep "$2" err.v &&
	if [ "${3:-}" != stage-only ]; then ! "$DSTAGE" ls "$1" >/dev/null 2>err.l && test_grep "$2" err.l; fi &&
	! mpirun_n 2 "$DSTAGE" stage "$1" --to "$SHM" --job "$1" --node-per-rank 2>err.s &&
	test_grep "$2" err.s && test ! -e "$SHM/dstage.$uid.$1"
}

test_expect_success 'a root that is empty: refused' '
	refused root-empty "without a valid source root"'
test_expect_success 'a root that is not an absolute path: refused' '
	refused root-relative "without a valid source root"'
test_expect_success 'a source named with "..": refused, the entry named' "
	refused src-dotdot \"entry [0-9]* ('a/f1'): .*\\.\\.\""
test_expect_success 'a source range that overflows: refused' '
	refused src-overflow "(.a/f1.): source range overflows"'
test_expect_success 'an offset into a file that reads its own path: refused' '
	refused src-own-offset "(.a/f1.): offset into its own file"'
test_expect_success 'a source on a directory: refused' '
	refused src-on-dir "(.a.): a source on a non-file"'
test_expect_success 'sources that reuse the string pool: refused' '
	refused pool-reuse "string pool reused across sources"'
test_expect_success 'seal version 2 without the in-place flag: refused' '
	refused seal-v2-noflag "corrupt seal"'
test_expect_success 'the in-place flag under seal version 1: refused' '
	refused seal-v1-flag "corrupt seal"'
test_expect_success 'a file whose source is swapped for another file of the tree: named by its CRC' '
	refused src-other-file "a/f2.*checksum mismatch\\|checksum mismatch.*a/f2" stage-only
'

test_done
