#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The pack format as documented: h5py reads files out of a pack with only the
# recipe in docs/formats.md (the code is taken from there and run as it is), the
# payload offset works without HDF5, and HDF5's own tools read every file.
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'setup: a pack with raw, zlib, empty and unicode files' '
	mkdir -p src/d src/empty-dir &&
	seq 1 20000 >src/d/text.txt &&
	head -c 100000 /dev/urandom >src/d/random.bin &&
	: >src/d/empty &&
	echo "ünïcødé" >"src/d/名前 with space.txt" &&
	ln -s d/text.txt src/link &&
	$DSTAGE pack -q -p 2 -z zlib src pack
'

test_expect_success 'h5ls -r and h5dump -H read index.h5 and the partitions' '
	h5ls -r pack/index.h5 >ls &&
	test_grep "^/entries  *Dataset {7}" ls &&
	test_grep "^/partitions  *Dataset {2}" ls &&
	test_grep "^/strings  *Dataset" ls &&
	for f in pack/*.h5; do h5dump -H "$f" >/dev/null || exit 1; done &&
	h5dump -H pack/part-00000.h5 >h &&
	test_grep "DATASET \"payload\"" h && test_grep "H5T_STD_U8LE" h &&
	h5dump -a /format pack/index.h5 >fmt && test_grep "\"dstage-pack\"" fmt
'

test_expect_success 'setup: a pack holding "123456789"' '
	mkdir crcsrc && printf 123456789 >crcsrc/check && $DSTAGE pack -q crcsrc crcpack
'

test_expect_success H5PY 'extract the recipe from docs/formats.md' '
	sed -n "/<!-- recipe:begin -->/,/<!-- recipe:end -->/p" "$SRCDIR/docs/formats.md" |
		sed -e "/^<!--/d" -e "/^\`\`\`/d" >recipe.py &&
	test_grep "def read_file" recipe.py
'

test_expect_success H5PY 'h5py + the recipe give back every file' '
	cat >run.py <<-\EOF &&
	import os, sys
	exec(open("recipe.py").read())
	ok = 0
	for root, dirs, files in os.walk("src"):
	    for f in files:
	        p = os.path.join(root, f)
	        if os.path.islink(p):
	            continue
	        rel = os.path.relpath(p, "src")
	        want = open(p, "rb").read()
	        got = read_file("pack", rel)
	        assert got == want, rel
	        ok += 1
	print(ok)
	EOF
	"$PY" run.py >n && echo 4 >want && test_cmp want n
'

test_expect_success H5PY 'the CRC-32C: the check value, in the recipe and in a pack' '
	cat >crc.py <<-\EOF &&
	import h5py
	exec(open("recipe.py").read())
	assert crc32c(b"123456789") == 0xE3069283
	assert h5py.File("crcpack/index.h5", "r")["entries"][0]["crc"] == 0xE3069283
	assert read_file("crcpack", "check") == b"123456789"
	EOF
	"$PY" crc.py
'

test_expect_success H5PY 'the recipe notices a corrupt file' '
	cp -r pack bad && set -- $("$T/h5-packtool" payload-offset bad/part-00000.h5) &&
	"$T/h5-packtool" flip bad/part-00000.h5 $(($1 + 3)) &&
	cat >bad.py <<-\EOF &&
	exec(open("recipe.py").read())
	import zlib
	try:
	    read_file("bad", "d/random.bin")
	    read_file("bad", "d/text.txt")
	except (AssertionError, zlib.error):
	    print("caught")
	EOF
	"$PY" bad.py >out && test_grep caught out
'

test_expect_success H5PY 'codec, flags, symlinks and directories as documented' '
	cat >fields.py <<-\EOF &&
	import h5py, stat
	ix = h5py.File("pack/index.h5", "r")
	assert ix.attrs["format"] == b"dstage-pack"
	assert ix.attrs["version"] == 1 and ix.attrs["checksum"] == b"crc32c"
	assert ix.attrs["codec"] == b"zlib" and ix.attrs["nparts"] == 2
	pool = ix["strings"][...].tobytes()
	e = {pool[r["path_off"]:r["path_off"] + r["path_len"]].decode(): r for r in ix["entries"][...]}
	assert e["d/text.txt"]["codec"] == 1, "text is compressed"
	assert e["d/random.bin"]["codec"] == 0, "random bytes stay raw"
	assert e["d/random.bin"]["stored"] == 100000
	assert e["d/empty"]["size"] == 0 and e["d/empty"]["stored"] == 0
	assert stat.S_ISDIR(int(e["empty-dir"]["mode"])) and e["empty-dir"]["part"] == 0xFFFFFFFF
	l = e["link"]
	assert stat.S_ISLNK(int(l["mode"]))
	assert pool[l["target_off"]:l["target_off"] + l["target_len"]] == b"d/text.txt"
	names = list(e)
	assert names == sorted(names, key=lambda s: s.encode().replace(b"/", b"\x00")), names
	parts = ix["partitions"][...]
	assert sum(parts["nfiles"]) == 4
	for p in range(2):
	    with h5py.File(f"pack/part-{p:05d}.h5", "r") as f:
	        assert f.attrs["format"] == b"dstage-part" and f.attrs["part"] == p
	        assert f.attrs["pack_id"] == ix.attrs["pack_id"]
	        assert f["payload"].shape[0] == parts[p]["size"]
	        assert f["entries"].shape[0] == parts[p]["nfiles"]
	print("ok")
	EOF
	"$PY" fields.py >out && test_grep ok out
'

test_expect_success H5PY 'the payload read without HDF5, at H5Dget_offset' '
	cat >raw.py <<-\EOF &&
	import h5py, os, zlib
	exec(open("recipe.py").read())
	ix = h5py.File("pack/index.h5", "r")
	pool = ix["strings"][...].tobytes()
	for r in ix["entries"][...]:
	    if r["part"] == 0xFFFFFFFF:
	        continue
	    name = "pack/part-%05d.h5" % r["part"]
	    with h5py.File(name, "r") as f:
	        off = f["payload"].id.get_offset()
	    assert off % 4096 == 0
	    fd = os.open(name, os.O_RDONLY)
	    raw = os.pread(fd, int(r["stored"]), off + int(r["offset"]))
	    os.close(fd)
	    data = zlib.decompress(raw) if r["codec"] == 1 else raw
	    assert crc32c(data) == r["crc"]
	print("ok")
	EOF
	"$PY" raw.py >out && test_grep ok out
'

test_done
