#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Bad input to pack: a clear message naming the culprit, the right exit
# status, and nothing half-written left behind.
. "$(dirname "$0")/test-lib.sh"

# run a command, require its exit status
expect_exit() {
	want=$1
	shift
	"$@"
	rc=$?
	[ "$rc" = "$want" ] || { echo "exit $rc, want $want: $*"; return 1; }
}

# pack must fail with exit 1, say $2, and leave no OUT ($1) behind
pack_fails() {
	out=$1 msg=$2
	shift 2
	expect_exit 1 $DSTAGE pack "$@" 2>err &&
	test_grep -e "$msg" err &&
	test_grep "dstage: pack: .$out.: pack failed, nothing written" err &&
	! test -e "$out"
}

test_expect_success 'setup' '
	mkdir -p good/d && echo a >good/a && echo b >good/d/b
'

# ---- source files ----------------------------------------------------------
test_expect_success 'an unreadable file: exit 1, named, nothing left' '
	cp -r good unreadable && echo secret >unreadable/d/locked && chmod 000 unreadable/d/locked &&
	chmod -R a+rX unreadable && chmod 000 unreadable/d/locked && chmod 777 . &&
	if [ "$(id -u)" = 0 ]; then
		# root reads anything: run as nobody
		as="setpriv --reuid=65534 --regid=65534 --clear-groups"
	else
		as=
	fi &&
	test_status 1 $as $DSTAGE pack unreadable out-unreadable 2>err &&
	test_grep "dstage: pack: .unreadable/d/locked.: Permission denied" err &&
	! test -e out-unreadable
'

test_expect_success 'an unreadable directory: exit 1, named' '
	cp -r good unreadable-dir && chmod -R a+rX unreadable-dir && chmod 000 unreadable-dir/d &&
	if [ "$(id -u)" = 0 ]; then as="setpriv --reuid=65534 --regid=65534 --clear-groups"; else as=; fi &&
	test_status 1 $as $DSTAGE pack unreadable-dir out-unreadable-dir 2>err &&
	test_grep "unreadable-dir/d.: Permission denied" err &&
	! test -e out-unreadable-dir
'

test_expect_success 'a file vanishing between the scan and its reading' '
	cp -r good vanish &&
	(export DSTAGE_TEST_AFTER_SCAN="rm vanish/d/b" &&
	 pack_fails out-vanish "dstage: pack: .vanish/d/b.: vanished while packing" vanish out-vanish)
'

test_expect_success 'a file changing between the scan and its reading' '
	cp -r good change &&
	(export DSTAGE_TEST_AFTER_SCAN="echo more >>change/a" &&
	 pack_fails out-change "dstage: pack: .change/a.: changed while packing" change out-change)
'

test_expect_success 'a file replaced by a symlink between the scan and its reading' '
	cp -r good swap &&
	(export DSTAGE_TEST_AFTER_SCAN="rm swap/a && ln -s /etc/passwd swap/a" &&
	 pack_fails out-swap "dstage: pack: .swap/a.: changed while packing" swap out-swap)
'

test_expect_success 'SIGTERM: exit 1, nothing left' '
	(export DSTAGE_TEST_AFTER_SCAN="kill -TERM \$PPID" &&
	 pack_fails out-int "interrupted" good out-int)
'

# ---- special files and symlinks ---------------------------------------------
test_expect_success 'FIFOs, sockets and devices are skipped with a warning' '
	cp -r good special && mkfifo special/fifo &&
	"$PY" -c "import socket; socket.socket(socket.AF_UNIX).bind(\"special/sock\")" &&
	{ mknod special/null c 1 3 2>/dev/null || true; } &&
	$DSTAGE pack special out-special >/dev/null 2>err &&
	test_grep "warning: .special/fifo.: FIFO, skipped" err &&
	test_grep "warning: .special/sock.: socket, skipped" err &&
	{ ! test -e special/null || test_grep "warning: .special/null.: character device, skipped" err; } &&
	$DSTAGE ls out-special >l && printf "%s\n" a d/ d/b >want && test_cmp want l
'

test_expect_success 'symlinks leaving SRC are skipped with a warning' '
	mkdir outside && echo out >outside/o && mkdir outside/dir && echo in >outside/dir/x &&
	cp -r good links && ln -s /etc/hostname links/abs && ln -s ../../outside/o links/d/up &&
	ln -s ../outside/dir links/dirlink && ln -s d/b links/fine &&
	$DSTAGE pack links out-links >/dev/null 2>err &&
	test_grep "warning: .links/abs.: symlink points outside the source tree" err &&
	test_grep "warning: .links/d/up.: symlink points outside the source tree" err &&
	test_grep "warning: .links/dirlink.: symlink points outside the source tree" err &&
	$DSTAGE ls out-links >l && printf "%s\n" a d/ d/b fine >want && test_cmp want l
'

test_expect_success '--dereference packs what they point to' '
	$DSTAGE pack --dereference links out-deref >/dev/null 2>err &&
	! test_grep -q warning err &&
	$DSTAGE ls out-deref >l &&
	printf "%s\n" a abs d/ d/b d/up dirlink/ dirlink/x fine >want && test_cmp want l &&
	$DSTAGE cat out-deref d/up >o && cmp o outside/o &&
	$DSTAGE cat out-deref abs >h && cmp h /etc/hostname &&
	$DSTAGE verify --against links out-deref
'

# ---- names ---------------------------------------------------------------
test_expect_success 'a name that is not UTF-8: exit 1, named with \x escapes' '
	cp -r good latin1 && : >"latin1/d/caf$(printf "\351")" &&
	pack_fails out-latin1 "dstage: pack: .latin1/d/caf\\\\xe9.: name is not valid UTF-8" latin1 out-latin1
'

test_expect_success 'a name with a newline: exit 1' '
	cp -r good nl && : >"nl/two
lines" &&
	pack_fails out-nl "dstage: pack: .nl/two\\\\x0alines.: newline in name" nl out-nl
'

test_expect_success 'a path longer than PATH_MAX: exit 1' '
	cp -r good long &&
	n=$(printf "%0200d" 0) && p=$n && i=0 &&
	while [ $i -lt 20 ]; do p=$p/$n; i=$((i + 1)); done &&
	(cd long && mkdir -p "$p") &&
	pack_fails out-long "name longer than PATH_MAX" long out-long
'

# ---- the tree and OUT ------------------------------------------------------
test_expect_success 'an empty tree: exit 1' '
	mkdir -p empty/only/dirs &&
	pack_fails out-empty "dstage: pack: .empty.: nothing to pack (no regular files)" empty out-empty
'

test_expect_success 'SRC missing: exit 1' '
	pack_fails out-missing "dstage: pack: .missing.: No such file or directory" missing out-missing
'

test_expect_success 'OUT not empty: refused, left as it was' '
	mkdir busy && echo keep >busy/mine &&
	expect_exit 1 $DSTAGE pack good busy 2>err &&
	test_grep "dstage: pack: .busy.: not empty (--force replaces a pack in it)" err &&
	ls -A busy >l && echo mine >want && test_cmp want l
'

test_expect_success '--force replaces a pack and leaves other files alone' '
	$DSTAGE pack -q -p 2 good busy2 && echo keep >busy2/notes &&
	ls busy2 >before && test_grep part-00001.h5 before &&
	$DSTAGE pack -f -p 1 good busy2 >/dev/null 2>err &&
	test_grep "warning: .busy2/notes.: not part of a pack, left alone" err &&
	ls -A busy2 >l && printf "%s\n" index.h5 notes part-00000.h5 >want && test_cmp want l &&
	$DSTAGE verify -q busy2
'

test_expect_success 'OUT inside SRC: exit 1' '
	cp -r good self &&
	expect_exit 1 $DSTAGE pack self self/out 2>err &&
	test_grep "dstage: pack: .self/out.: inside the source tree" err &&
	! test -e self/out
'

test_expect_success '--files-from naming a missing file or an unsafe name: exit 1' '
	echo d/nope >list &&
	pack_fails out-list "good/d/nope.: vanished while packing" --files-from list good out-list &&
	echo ../good/a >list2 &&
	pack_fails out-list2 "line 1 (.\\.\\./good/a.): .\\.\\.. path component" --files-from list2 good out-list2
'

# ---- a full disk ------------------------------------------------------------
mkdir small
test_have_prereq TMPFS && mount -t tmpfs -o size=512k tmpfs small
test_expect_success TMPFS 'a full disk: exit 1, nothing left' '
	mkdir bigsrc && head -c 2000000 /dev/urandom >bigsrc/big && echo s >bigsrc/s &&
	pack_fails small/out "dstage: pack: .small/out/part-00000.h5.: No space left on device" bigsrc small/out &&
	test "$(ls -A small)" = ""
'
test_expect_success TMPFS 'a full disk while writing index.h5: exit 1, nothing left' '
	# empty files: the partitions hold their tables, index.h5 all of them
	mkdir manyfiles && i=0 && while [ $i -lt 4000 ]; do : >manyfiles/f$i; i=$((i + 1)); done &&
	pack_fails small/out2 "dstage: pack: .small/out2/index.h5.: No space left on device" manyfiles small/out2 &&
	test "$(ls -A small)" = ""
'
test_expect_success TMPFS 'a full disk under mpiexec -n 2: every rank exits 1' '
	test_status 1 mpirun_n 2 $DSTAGE pack -p 2 bigsrc small/out3 2>err &&
	test_grep "No space left on device" err &&
	test "$(ls -A small)" = ""
'
test_have_prereq TMPFS && umount small

# ---- empty selections, the reserved top-level .dstage --------------------------
test_expect_success 'an empty selection is an error, named (--exclude everything, empty --files-from)' '
	expect_exit 1 $DSTAGE pack --exclude "*" good e1 2>err &&
	test_grep "nothing to pack (no regular files left after --exclude)" err && ! test -e e1 &&
	: >empty.list && expect_exit 1 $DSTAGE pack --files-from empty.list good e2 2>err &&
	test_grep "nothing to pack (no regular files listed in --files-from)" err && ! test -e e2
'
# The UBSan build: qsort_r(NULL, 0, ...) on an empty selection was undefined
ASAN_BIN="$SRCDIR/build-asan/bin/dstage"
test_expect_success ASAN 'the empty selections under UBSan/ASan: a clean error, no runtime error' '
	for sel in "--exclude=*" "--files-from=empty.list"; do
		test_status --show out 1 env UBSAN_OPTIONS=print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
			"$ASAN_BIN" pack "$sel" good e3 >out 2>&1 &&
		test_grep "nothing to pack" out &&
		! grep -q "runtime error\|Sanitizer" out || exit 1
	done
'
test_expect_success 'a top-level .dstage (the shim'"'"'s virtual directory) is refused at pack time' '
	mkdir -p vd/.dstage/epochs/0 vd/a/.dstage && echo x >vd/.dstage/epochs/0/all &&
	echo y >vd/a/.dstage/f && echo z >vd/b &&
	expect_exit 1 $DSTAGE pack vd v1 2>err && ! test -e v1 &&
	test_grep "vd/.dstage.: a top-level .\.dstage. is reserved" err &&
	printf ".dstage/epochs/0/all\nb\n" >vd.list &&
	expect_exit 1 $DSTAGE pack --files-from vd.list vd v2 2>err && ! test -e v2 &&
	test_grep "reserved" err
'
test_expect_success 'a .dstage below the top is ordinary data; --exclude leaves the top one out' '
	rm -rf vd/.dstage && $DSTAGE pack -q vd v3 && $DSTAGE cat v3 a/.dstage/f >out &&
	echo y >want && test_cmp want out
'

# ---- usage -----------------------------------------------------------------
test_expect_success 'usage errors exit 2' '
	expect_exit 2 $DSTAGE pack 2>err && test_grep "wants SRC and OUT" err &&
	expect_exit 2 $DSTAGE pack good 2>err &&
	expect_exit 2 $DSTAGE pack -p 0 good x 2>err && test_grep "partition count" err &&
	expect_exit 2 $DSTAGE pack -p 2 -S 1MiB good x 2>err && test_grep "exclude each other" err &&
	expect_exit 2 $DSTAGE pack -S lots good x 2>err &&
	expect_exit 2 $DSTAGE pack -z gzip good x 2>err && test_grep "zlib:LEVEL" err &&
	expect_exit 2 $DSTAGE pack -z zlib:10 good x 2>err &&
	expect_exit 2 $DSTAGE pack --bogus good x 2>err && test_grep "unknown option" err &&
	expect_exit 2 $DSTAGE verify 2>err &&
	expect_exit 2 $DSTAGE verify --bogus x 2>err &&
	expect_exit 2 $DSTAGE ls 2>err &&
	expect_exit 2 $DSTAGE ls -x y 2>err &&
	expect_exit 2 $DSTAGE cat x 2>err &&
	! test -e x
'

test_expect_success 'nothing left anywhere: no .tmp directories' '
	! find . -name ".tmp-*" | grep .
'

test_done
