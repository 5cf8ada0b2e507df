#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The tar member scanner (hdf5/tar.c) on well-formed tars: GNU tar's gnu,
# posix (pax) and ustar formats and Python tarfile's, long names, ustar
# prefixes, pax records, base-256 numbers, hard links, duplicates, implicit
# parents.  Every file member's bytes are read back from the offsets the
# scanner gives (build/t/h5-tarls -x) and compared with GNU tar's own
# extraction.  The hostile tars are t/9052's.
. "$(dirname "$0")/test-lib.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
test_have_prereq PYTHON || skip_all "no $PY (Python's tarfile writes the crafted tars)"
mktar() { "$PY" "$SRCDIR/t/helpers/mktar.py" "$@"; }

# TYPE SIZE MTIME_S NAME [-> TARGET] of an extracted tree, as h5-tarls
# lists it (directories: size 0, and no mtime: tar -x restores a
# directory's only when it can; modes compared apart: awk reads no octal)
tree_list() {
	(cd "$1" && find . -mindepth 1 -printf '%y %s %Ts %P -> %l\n') |
	sed 's/ -> $//' | awk '{ if ($1 == "d") $2 = $3 = 0; print }' | sort
}
scan_list() {
	"$T/h5-tarls" "$1" | awk '{ s = $5; sec = int(s / 1000000000); if (s < 0 && sec * 1000000000 != s) sec--;
		if ($1 == "d") $3 = sec = 0;
		printf "%s %s %s", $1, $3, sec; for (i = 6; i <= NF; i++) printf " %s", $i; printf "\n" }' | sort
}
# modes compared apart (awk has no octal input)
modes_tree() { (cd "$1" && find . -mindepth 1 ! -type l -printf '%m %P\n') | sort; }
modes_scan() { "$T/h5-tarls" "$1" | awk '$1 != "l" { m = $2; sub(/^0+/, "", m); print m, $6 }' | sort; }

check_tar() { # check_tar TAR: the listing and every byte as GNU tar extracts it
	rm -rf x-tar x-scan &&
	mkdir x-tar && tar -xf "$1" -C x-tar &&
	"$T/h5-tarls" -x "$1" x-scan &&
	diff -r --no-dereference x-tar x-scan &&
	tree_list x-tar >want && scan_list "$1" >got && test_cmp want got &&
	modes_tree x-tar >want && modes_scan "$1" >got && test_cmp want got &&
	# and where each file starts, against Python tarfile reading the same tar
	mktar ls "$1" | sort >want && test -s want &&
	"$T/h5-tarls" "$1" | awk '$1 == "f" { print $3, $4, $5, $6 }' | sort >got &&
	comm -23 want got >missing && test_cmp /dev/null missing
}

long=$(printf "%0150d" 0 | tr 0 n)
test_expect_success 'setup: a tree with long names, links, odd sizes' '
	mkdir -p src/a/b/c src/empty "src/$long/$long" src/utf &&
	printf "hello\n" >src/a/b/c/f &&
	: >src/a/zero &&
	head -c 512 /dev/urandom >src/a/block &&
	head -c 300000 /dev/urandom >src/a/big &&
	echo deep >"src/$long/$long/$long" &&
	echo café >"src/utf/café" &&
	ln -s b/c/f src/a/link &&
	ln -s ../a src/utf/up &&
	ln src/a/big src/a/big.hard &&
	chmod 0600 src/a/block && chmod 0750 src/a/b &&
	touch -d @1600000000.5 src/a/b/c/f
'

for fmt in gnu oldgnu posix; do
	test_expect_success "GNU tar --format=$fmt: listing and bytes as tar extracts them" "
		tar --format=$fmt -cf $fmt.tar -C src . &&
		check_tar $fmt.tar
	"
done

test_expect_success 'GNU tar --format=ustar (names that fit: prefix/name split)' '
	rm -rf us && mkdir -p us/$(printf "%080d" 0 | tr 0 p) &&
	echo split >us/$(printf "%080d" 0 | tr 0 p)/$(printf "%090d" 0 | tr 0 q) &&
	tar --format=ustar -cf ustar.tar -C us . &&
	check_tar ustar.tar
'

test_expect_success 'GNU tar --format=v7 (no magic, no types for directories but a /)' '
	tar --format=v7 -cf v7.tar -C src a utf &&
	check_tar v7.tar
'

for fmt in gnu pax ustar; do
	test_expect_success "Python tarfile ($fmt): listing and bytes" "
		rm -rf in && cp -a src in &&
		if test $fmt = ustar; then rm -rf \"in/$long\"; fi &&
		mktar tree $fmt in py-$fmt.tar &&
		check_tar py-$fmt.tar
	"
done

test_expect_success 'no ./ prefixes and no entry for the root' '
	"$T/h5-tarls" gnu.tar >list &&
	! grep " \./" list && ! grep " \.$" list &&
	grep "^f .* a/b/c/f$" list
'

test_expect_success 'a hard link is a second name for the same bytes' '
	"$T/h5-tarls" gnu.tar >list &&
	off=$(awk "\$6 == \"a/big\" { print \$3, \$4 }" list) &&
	hoff=$(awk "\$6 == \"a/big.hard\" { print \$3, \$4 }" list) &&
	test -n "$off" && test "$off" = "$hoff"
'

test_expect_success 'parents a tar does not list are added as directories' '
	tar -cf imp.tar --no-recursion -C src a/b/c/f "$long/$long/$long" &&
	"$T/h5-tarls" imp.tar >list &&
	grep "^d 0755 0 0 [0-9]* a$" list &&
	grep "^d 0755 0 0 [0-9]* a/b$" list &&
	grep "^d 0755 0 0 [0-9]* a/b/c$" list &&
	grep "^d 0755 0 0 [0-9]* $long/$long$" list &&
	test $(wc -l <list) = 7 &&
	check_tar imp.tar
'

test_expect_success 'a name twice: the last one wins, as tar -x leaves it' '
	rm -rf dup && mkdir dup && echo first >dup/f && echo keep >dup/g &&
	tar -cf dup.tar -C dup f g &&
	echo "second, longer" >dup/f && tar -rf dup.tar -C dup f &&
	"$T/h5-tarls" dup.tar >list &&
	test $(grep -c " f$" list) = 1 &&
	check_tar dup.tar && test_cmp dup/f x-scan/f
'

test_expect_success 'base-256 size and a negative base-256 mtime (GNU)' '
	mktar good-base256 b256.tar &&
	echo "f 0644 5 512 -1000000000 f" >want &&
	"$T/h5-tarls" b256.tar >got && test_cmp want got &&
	"$T/h5-tarls" -x b256.tar xb && printf 12345 >want && test_cmp want xb/f
'

test_expect_success 'pax: path, size and fractional mtime records; a global header skipped' '
	mktar good-pax pax.tar &&
	"$T/h5-tarls" pax.tar >list &&
	grep "^f 0644 5 2560 1700000000250000000 p/yyyyyyyy*$" list &&
	check_tar pax.tar
'

test_done
