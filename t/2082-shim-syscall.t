#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Programs that reach the kernel through syscall(2) rather than libc's
# wrappers (libuv in node.js and cmake stats with syscall(SYS_statx)) see the
# staged tree like the native one (issue 18.3); other numbers pass through
# untouched with all six arguments.  Each run is compared with the same run
# on the source tree: stdout, stderr and exit status.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a tree with a node.js package and a cmake-readable file' '
	make_tree "$TRASH/src" &&
	rm "$TRASH/src/links/loop1" "$TRASH/src/links/loop2" "$TRASH/src/links/self" "$TRASH/src/a/b/up" &&
	mkdir -p src/js/lib &&
	printf "module.exports = { n: require(\"./lib/two\").two + 40 };\n" >src/js/index.js &&
	printf "exports.two = 2;\n" >src/js/lib/two.js &&
	cat >src/js/main.js <<-\EOF &&
	const path = require("path"), fs = require("fs");
	console.log(path.basename(__filename), require("./index.js").n);
	console.log(fs.readFileSync(path.join(__dirname, "../a/x.txt"), "utf8").trim());
	EOF
	touch -d "2019-03-04 05:06:07" src/js/main.js &&
	touch_root src &&
	stage_tree "$TRASH/src" -N 1 -p 3
'

# same CMD: CMD with ROOT set to the source tree, then through the shim with
# ROOT the mount; the root's name replaced by ROOT in both outputs
same() {
	(ROOT="$TRASH/src"; eval "$1") >native.raw 2>&1
	echo "exit $?" >>native.raw
	(ROOT="$MOUNT"; export LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" \
		DSTAGE_NODE=0; eval "$1") >staged.raw 2>&1
	echo "exit $?" >>staged.raw
	sed "s,$TRASH/src,ROOT,g" native.raw >native.out &&
	sed "s,$MOUNT,ROOT,g" staged.raw >staged.out &&
	test_cmp native.out staged.out
}

test_expect_success 'raw syscall(): statx, newfstatat, openat, read, pread64, lseek, fstat, close, readlinkat, faccessat2' '
	cat >sc.py <<-\EOF &&
	import ctypes, os, sys
	libc = ctypes.CDLL(None, use_errno=True)
	sc = libc.syscall
	sc.restype = ctypes.c_long
	L = ctypes.c_long
	AT = L(-100)
	root = sys.argv[1].encode()
	def err(r):
	    return "%d %s" % (r, os.strerror(ctypes.get_errno()) if r < 0 else "")
	st = ctypes.create_string_buffer(256)
	for p in (b"/a/b/c/seq.txt", b"/links/tofile", b"/a/missing", b"/a"):
	    r = sc(L(332), AT, root + p, L(0), L(0x7ff), st)          # statx
	    size = int.from_bytes(st.raw[40:48], "little")
	    mode = int.from_bytes(st.raw[28:30], "little")
	    print("statx", p, err(r), size if r == 0 else "", oct(mode) if r == 0 else "")
	    r = sc(L(262), AT, root + p, st, L(0x100))                 # newfstatat, nofollow
	    print("fstatat", p, err(r), int.from_bytes(st.raw[48:56], "little") if r == 0 else "")
	fd = sc(L(257), AT, root + b"/a/b/c/seq.txt", L(os.O_RDONLY))  # openat
	buf = ctypes.create_string_buffer(64)
	print("read", sc(L(0), L(fd), buf, L(10)), buf.raw[:10])
	print("pread64", sc(L(17), L(fd), buf, L(6), L(100)), buf.raw[:6])
	print("lseek", sc(L(8), L(fd), L(-6), L(2)), sc(L(0), L(fd), buf, L(64)), buf.raw[:6])
	print("fstat", sc(L(5), L(fd), st), int.from_bytes(st.raw[48:56], "little"))
	print("close", sc(L(3), L(fd)), "again", err(sc(L(3), L(fd))))
	r = sc(L(267), AT, root + b"/links/tofile", buf, L(64))        # readlinkat
	print("readlinkat", r, buf.raw[:max(r, 0)])
	print("faccessat2", err(sc(L(439), AT, root + b"/a/x.txt", L(os.R_OK), L(0))),
	      err(sc(L(439), AT, root + b"/a", L(os.X_OK), L(0x200))))
	# other numbers untouched, six arguments included
	print("getpid", sc(L(39)) == os.getpid())
	fd = os.open(sys.argv[2], os.O_RDONLY)
	m = sc(L(9), L(0), L(8192), L(1), L(2), L(fd), L(4096))        # mmap, offset 4096
	print("mmap", ctypes.string_at(m, 8192) == open(sys.argv[2], "rb").read()[4096:12288])
	EOF
	same "\"$PY\" sc.py \"\$ROOT\" \"$TRASH/src/a/b/c/r128k\"" &&
	test_grep "statx b./a/b/c/seq.txt. 0  288894" staged.out &&
	test_grep "mmap True" staged.out
'

test_expect_success 'getdents64 (syscall and libc) on a staged directory: names, types, inodes, rewind' '
	cat >gd.py <<-\EOF &&
	import ctypes, os, sys
	libc = ctypes.CDLL(None, use_errno=True)
	libc.syscall.restype = ctypes.c_long
	L = ctypes.c_long
	def entries(fd, raw, size=4096):
	    buf = ctypes.create_string_buffer(size)
	    out = []
	    while True:
	        n = libc.syscall(L(217), L(fd), buf, L(size)) if raw else libc.getdents64(fd, buf, ctypes.c_size_t(size))
	        if n < 0:
	            return os.strerror(ctypes.get_errno())
	        if n == 0:
	            return out
	        o = 0
	        while o < n:
	            ino = int.from_bytes(buf.raw[o:o + 8], "little")
	            rl = int.from_bytes(buf.raw[o + 16:o + 18], "little")
	            name = buf.raw[o + 19:o + rl].split(b"\0")[0].decode()
	            out.append((name, buf.raw[o + 18], ino))
	            o += rl
	d = sys.argv[1]
	for sub in ("a", "a/b", "links", "empty"):
	    fd = os.open(d + "/" + sub, os.O_RDONLY | os.O_DIRECTORY)
	    e = entries(fd, True)
	    inos = all(ino == os.lstat(d + "/" + sub + "/" + n).st_ino for n, t, ino in e)
	    os.lseek(fd, 0, os.SEEK_SET)
	    again = entries(fd, False, 64)
	    print(sub, sorted((n, t) for n, t, i in e), inos, again == e)
	    os.close(fd)
	fd = os.open(d + "/a/x.txt", os.O_RDONLY)
	print("file:", entries(fd, True))
	EOF
	same "\"$PY\" gd.py \"\$ROOT\"" &&
	test_grep "^a/b .*True True" staged.out
'

NODE_JS=$(command -v node || command -v nodejs)
test_lazy_prereq CMAKE 'command -v cmake' 'cmake is not installed'
test_expect_success NODE 'node -e: statSync, lstatSync, realpathSync, readFileSync, readdirSync, require' '
	same "\"$NODE_JS\" -e \"
const fs = require(\\\"fs\\\"), r = process.argv[1];
for (const p of [\\\"/a/x.txt\\\", \\\"/a/b\\\", \\\"/links/chain\\\", \\\"/links/todir/c/seq.txt\\\"]) {
  const s = fs.statSync(r + p), l = fs.lstatSync(r + p);
  console.log(p, s.size, s.mode.toString(8), s.isDirectory(), l.isSymbolicLink(), s.mtimeMs, fs.realpathSync(r + p));
}
console.log(fs.readFileSync(r + \\\"/a/b/c/seq.txt\\\", \\\"utf8\\\").length, fs.readdirSync(r + \\\"/a\\\").sort().join(\\\",\\\"));
console.log(require(r + \\\"/js\\\").n, fs.existsSync(r + \\\"/a/missing\\\"));
try { fs.statSync(r + \\\"/a/missing\\\"); } catch (e) { console.log(e.code); }
\" \"\$ROOT\"" &&
	test_grep "^/a/x.txt 6 100644 false false" staged.out
'
test_expect_success NODE 'node ROOT/js/main.js: the script and its requires from the mount' '
	printf "cd \"\$1/js\" && exec \"\$2\" main.js\n" >incwd.sh &&
	same "\"$NODE_JS\" \"\$ROOT/js/main.js\"; sh incwd.sh \"\$ROOT\" \"$NODE_JS\"" &&
	test_grep "main.js 42" staged.out
'

test_expect_success CMAKE 'cmake -P: file(TIMESTAMP), file(READ), file(SIZE), file(GLOB), EXISTS, IS_DIRECTORY' '
	cat >t.cmake <<-\EOF &&
	file(TIMESTAMP "${R}/js/main.js" ts "%Y-%m-%d %H:%M:%S" UTC)
	message("timestamp ${ts}")
	file(READ "${R}/a/b/grep.txt" c)
	message("read ${c}")
	file(SIZE "${R}/a/b/c/r1500k" n)
	message("size ${n}")
	file(SHA256 "${R}/a/b/p4097" h)
	message("sha256 ${h}")
	file(GLOB_RECURSE g RELATIVE "${R}" "${R}/a/*")
	list(SORT g)
	message("glob ${g}")
	if(EXISTS "${R}/a/x.txt" AND IS_DIRECTORY "${R}/a/b" AND NOT EXISTS "${R}/a/missing")
	  message("exists ok")
	endif()
	EOF
	same "cmake -DR=\"\$ROOT\" -P t.cmake" &&
	test_grep "timestamp 2019-03-04 05:06:07" staged.out
'

test_done
