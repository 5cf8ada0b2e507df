#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hostile tar shards against the member scanner (hdf5/tar.c, through
# build/t/h5-tarls): unsafe names, links out of the shard, members under a
# link, sparse, multi-volume and unknown members, bad checksums and
# numbers, malformed pax records, and truncated copies at every block.  Each
# is refused with a message naming the tar and, where there is one, the
# member; devices, FIFOs and a lone zero block are skipped with a warning.
. "$(dirname "$0")/test-lib.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
test_have_prereq PYTHON || skip_all "no $PY (Python's tarfile writes the crafted tars)"
mktar() { "$PY" "$SRCDIR/t/helpers/mktar.py" "$@"; }
exits1() { "$@"; test $? = 1; }

# refused CASE 'message': exit 1, the tar named, the reason given, nothing listed
refused() {
	test_expect_success "refused: $1" "
		mktar $1 $1.tar &&
		exits1 \"\$T/h5-tarls\" $1.tar >out 2>err &&
		test_cmp /dev/null out &&
		grep \"'$1.tar': \" err && grep -F \"$2\" err
	"
}

refused dotdot "member 'a/../../evil': '..' path component"
refused absolute "member '/etc/evil': absolute name"
refused dotdot-gnu-long "'..' path component"
refused dotdot-pax "member '../evil': '..' path component"
refused nul-pax "member 'a\\x00b': NUL byte in name"
refused newline "member 'a\\x0ab': newline in name"
refused not-utf8 "member 'caf\\xe9': name is not valid UTF-8"
refused empty-name "member '': empty name"
refused dot-component "'.' path component"
refused reg-trailing-slash "not a directory"
refused symlink-out "member 'd/l': symlink points outside the tar"
refused symlink-abs "member 'l': symlink points outside the tar"
refused symlink-out-pax "member 'l': symlink points outside the tar"
refused hardlink-missing "member 'h': hard link to no earlier member"
refused hardlink-later "member 'h': hard link to no earlier member"
refused hardlink-dir "member 'h': hard link to a directory"
refused hardlink-symlink-out "member 'l2': symlink points outside the tar"
refused under-symlink "member 'l/f': under a symlink of the tar"
refused under-file "member 'f/g': under a file of the tar"
refused dir-then-file "member 'd': appears as a directory and as a non-directory"
refused gnu-sparse "member 'sp': sparse member (GNU 'S')"
refused pax-sparse "member 'sp': sparse member (pax GNU.sparse)"
refused multi-volume "multi-volume"
refused unknown-type "member 'u': unknown member type 0x5a"
refused dir-with-data "member 'd': a directory or link with data"
refused symlink-with-data "member 'l': a directory or link with data"
refused bad-checksum "at byte 0: bad header checksum"
refused not-a-tar "at byte 0: does not look like a tar archive"
refused bad-size "bad size field"
refused negative-size "bad size field"
refused huge-size "bad size field"
refused pax-bad-record "malformed pax extended header record"
refused pax-bad-size "pax size is not a number"
refused pax-size-past-end "(member 'f'): truncated: member data runs past the end of the tar"
refused ext-without-member "extended header without a member"
refused no-end "ends without its end-of-archive block"

for c in device fifo; do
	test_expect_success "$c members are skipped with a warning, the rest listed" "
		mktar $c $c.tar &&
		\"\$T/h5-tarls\" $c.tar >out 2>err &&
		grep \"'$c.tar': member '.*': .*, skipped\" err &&
		echo 'f 0644 5 1024 1700000000000000000 ok' >want && test_cmp want out
	"
done

test_expect_success 'a lone zero block ends the archive (what follows ignored, with a warning)' '
	mktar lone-zero-then-member lone.tar &&
	"$T/h5-tarls" lone.tar >out 2>err &&
	grep "lone zero block" err &&
	echo "f 0644 5 512 1700000000000000000 ok" >want && test_cmp want out
'

test_expect_success 'sparse tars GNU tar writes (gnu, pax 0.1 and 1.0) are refused' '
	mkdir sp && truncate -s 4M sp/holes && echo data >>sp/holes &&
	tar --sparse --format=gnu -cf gsp.tar -C sp holes &&
	tar --sparse --format=posix -cf psp.tar -C sp holes &&
	tar --sparse --format=posix --sparse-version=1.0 -cf psp1.tar -C sp holes &&
	for f in gsp psp psp1; do
		exits1 "$T/h5-tarls" $f.tar 2>err &&
		grep "'"'"'$f.tar'"'"': member .*: sparse member" err || return 1
	done
'

test_expect_success 'truncated copies: refused at every cut before the end-of-archive block' '
	mkdir tr && echo small >tr/a && head -c 3000 /dev/urandom >tr/b &&
	mkdir tr/d && echo x >tr/d/c &&
	tar --format=posix -cf whole.tar -C tr . &&
	"$T/h5-tarls" whole.tar >list &&
	# the end-of-archive block follows the last member: byte END
	end=$(awk "\$1 == \"f\" { e = \$4 + int((\$3 + 511) / 512) * 512; if (e > m) m = e } END { print m }" list) &&
	test "$end" -gt 4096 &&
	cut=0 &&
	while test $cut -lt $end; do
		head -c $cut whole.tar >cut.tar &&
		exits1 "$T/h5-tarls" cut.tar >out 2>err &&
		grep "'"'"'cut.tar'"'"': at byte [0-9]*\( (member .*)\)*: truncated" err || return 1
		cut=$((cut + 256))
	done &&
	# one zero block and the end of the file: complete (GNU tar accepts it too)
	head -c $((end + 512)) whole.tar >cut.tar && tar -tf cut.tar >/dev/null &&
	"$T/h5-tarls" cut.tar >out && test_cmp list out
'

test_expect_success 'a truncated tar that tar itself lists without a word is refused' '
	mkdir tr2 && echo one >tr2/one && echo two >tr2/two &&
	tar --format=gnu -cf two.tar -C tr2 one two &&
	# cut right after the first member: tar -t shows one member, no error
	head -c 1024 two.tar >one.tar && tar -tf one.tar &&
	exits1 "$T/h5-tarls" one.tar 2>err &&
	grep "ends without its end-of-archive block" err
'

test_done
