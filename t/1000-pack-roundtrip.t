#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# pack -> verify --against -> ls -> cat gives back the tree, with and without
# zlib: many small files, empty files and directories, deep paths, in-tree
# symlinks, names with spaces and unicode, modes and nanosecond mtimes.
. "$(dirname "$0")/test-lib.sh"

make_tree() {
	mkdir -p src/many src/empty-dir "src/with space" &&
	i=0 && while [ $i -lt 300 ]; do echo "file $i" >src/many/f$i; i=$((i + 1)); done &&
	: >src/empty-file && : >src/many/also-empty &&
	d=src/deep && i=0 && while [ $i -lt 40 ]; do d=$d/level$i; i=$((i + 1)); done &&
	mkdir -p "$d" && echo leaf >"$d/leaf" &&
	echo sp >"src/with space/a b.txt" &&
	echo uni >"src/ünïcødé-名前.txt" &&
	ln -s many/f1 src/link-rel &&
	ln -s ../many/f2 "src/with space/up-link" &&
	ln -s empty-dir src/dir-link &&
	ln -s no-such-file src/dangling-in-tree &&
	head -c 300000 /dev/urandom >src/random.bin &&
	seq 1 100000 >src/text.txt &&
	chmod 0600 src/many/f3 && chmod 0755 src/many/f4 &&
	touch -d "2001-02-03 04:05:06.123456789" src/many/f5
}

# run a command, require its exit status
expect_exit() {
	want=$1
	shift
	"$@"
	rc=$?
	[ "$rc" = "$want" ] || { echo "exit $rc, want $want: $*"; return 1; }
}

# every path under src, directories with a trailing '/'
listing() {
	(cd src && find . -mindepth 1 \( -type d -printf '%P/\n' -o -printf '%P\n' \)) | sort
}

test_expect_success 'setup: a tree with the usual suspects' '
	make_tree
'

for codec in none zlib; do
	out=pack-$codec
	test_expect_success "pack -z $codec" '
		$DSTAGE pack -z '$codec' src '$out' >summary &&
		test_grep "packed 307 files, 44 dirs, 4 symlinks into 1 partitions" summary &&
		test -f '$out'/index.h5 && test -f '$out'/part-00000.h5 &&
		! ls -A '$out' | grep -v -e "^index.h5$" -e "^part-00000.h5$"
	'
	test_expect_success "verify --against src ($codec)" '
		$DSTAGE verify --against src '$out' >v &&
		test_grep "ok, 0 problems" v
	'
	test_expect_success "ls lists every entry ($codec)" '
		listing >want &&
		$DSTAGE ls '$out' | sort >got &&
		test_cmp want got
	'
	# verify --against compared every byte already; cat every file but
	# most of many/ (each cat is a process start)
	test_expect_success "cat gives back the files ($codec)" '
		(cd src && find . -type f -printf "%P\n") | grep -v "^many/f[0-9]*[1-9]$" >files &&
		test $(wc -l <files) = 37 &&
		while IFS= read -r f; do
			$DSTAGE cat '$out' "$f" >got.bin && cmp got.bin "src/$f" || exit 1
		done <files
	'
done

test_expect_success 'zlib compresses text and keeps random bytes raw' '
	none=$(cat pack-none/part-00000.h5 | wc -c) &&
	zlib=$(cat pack-zlib/part-00000.h5 | wc -c) &&
	test $zlib -lt $((none - 300000)) &&
	test $zlib -gt 300000
'

test_expect_success 'ls -l: mode, size, mtime, symlink targets' '
	$DSTAGE ls -l pack-none >long &&
	test_grep "^-rw------- .* many/f3$" long &&
	test_grep "^-rwxr-xr-x .* many/f4$" long &&
	test_grep "^-rw-r--r-- .* 2001-02-03 04:05 many/f5$" long &&
	test_grep "^lrwxrwxrwx  *7 .* link-rel -> many/f1$" long &&
	test_grep "^drwxr-xr-x .* empty-dir/$" long &&
	test_grep "^-rw-r--r--  *300000 .* random.bin$" long
'

test_expect_success 'ls PATH lists the subtree only' '
	$DSTAGE ls pack-none "with space" >sub &&
	printf "%s\n" "with space/" "with space/a b.txt" "with space/up-link" >want &&
	test_cmp want sub &&
	$DSTAGE ls pack-none ./many/f7 >one && echo many/f7 >want && test_cmp want one
'

test_expect_success 'ls of a path not in the pack: exit 1' '
	expect_exit 1 $DSTAGE ls pack-none nope 2>err &&
	test_grep "dstage: ls: .nope.: not in the pack" err
'

test_expect_success 'cat follows symlinks inside the pack' '
	$DSTAGE cat pack-zlib link-rel >l && cmp l src/many/f1 &&
	$DSTAGE cat pack-zlib "with space/up-link" >l && cmp l src/many/f2
'

test_expect_success 'cat of a directory: exit 1' '
	expect_exit 1 $DSTAGE cat pack-none many 2>err &&
	test_grep "dstage: cat: .many.: is a directory" err
'

test_expect_success 'cat of a dangling in-tree symlink: exit 1' '
	expect_exit 1 $DSTAGE cat pack-none dangling-in-tree 2>err &&
	test_grep "not in the pack" err
'

test_expect_success 'the sort order puts "/" below every other byte' '
	$DSTAGE ls pack-none | grep -n -e "^with space/$" -e "^with space/a b.txt$" -e "^with-" >/dev/null &&
	$DSTAGE ls pack-none >all &&
	a=$(grep -n "^many/f9$" all | cut -d: -f1) &&
	b=$(grep -n "^many/f90$" all | cut -d: -f1) &&
	test $a -lt $b
'

test_expect_success 'names with control bytes next to "/" sort consistently' '
	mkdir -p ctl/a && echo 1 >ctl/a/b && echo 2 >"ctl/a$(printf "\001")c" &&
	echo 3 >"ctl/a$(printf "\001")" && echo 4 >"ctl/a$(printf "\037")" &&
	$DSTAGE pack -q ctl ctl-pack && $DSTAGE verify -q --against ctl ctl-pack &&
	$DSTAGE cat ctl-pack "a$(printf "\001")c" >c && cmp c "ctl/a$(printf "\001")c"
'

for cmd in pack verify ls cat; do
	test_expect_success "$cmd --help lists its options" '
		$DSTAGE '$cmd' --help >help &&
		test_grep "^usage: dstage '$cmd'" help &&
		test_grep -- "--help" help
	'
done

test_expect_success 'pack --help names every option' '
	$DSTAGE pack --help >help &&
	for o in --partitions --part-size --compress --replicate --files-from --exclude \
		--dereference --force --progress --quiet; do
		test_grep -- "$o" help || exit 1
	done
'

test_done
