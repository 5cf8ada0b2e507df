#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Tar shards staged in place, attacked: a hostile or truncated tar in a
# plain tree refuses the stage (exit 1, the tar and the member named, no
# node store left) and pack --in-place --expand-tar (no OUT left); a tar
# changed between the scan and the read of a stage or a pack, or after an
# in-place pack (rewritten, one byte flipped with its
# mtime put back, swapped for a symlink, truncated) is caught at stage time
# and named.
. "$(dirname "$0")/test-lib.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
test_have_prereq PYTHON || skip_all "no $PY (Python's tarfile writes the crafted tars)"
mktar() { "$PY" "$SRCDIR/t/helpers/mktar.py" "$@"; }
uid=$(id -u)

stage_fails() { # stage_fails JOB SRC [OPTION]: exit 1 and no node store left
	mpirun_n 2 "$DSTAGE" stage "$2" $3 --to "$SHM" --job "$1" --node-per-rank >out 2>err
	rc=$?
	cat err
	test $rc = 1 && ! test -e "$SHM/dstage.$uid.$1/0" && ! test -e "$SHM/dstage.$uid.$1/1"
}

test_expect_success 'setup: a tree of good shards' '
	mkdir -p good/d m &&
	for j in 1 2 3 4 5 6; do head -c $((j * 1000)) /dev/urandom >m/$j.bin || return 1; done &&
	tar -cf good/d/a.tar -C m . && tar -cf good/b.tar -C m 1.bin 2.bin &&
	echo plain >good/plain.txt
'

for c in dotdot symlink-out under-symlink hardlink-missing gnu-sparse; do
	test_expect_success "stage of a tree with a hostile tar ($c): refused, named, nothing left" "
		rm -rf t-$c && cp -a good t-$c && mktar $c t-$c/d/evil.tar &&
		stage_fails h-$c t-$c --expand-tar &&
		grep \"t-$c/d/evil.tar': member '\" err
	"
done

test_expect_success 'stage of a tree with a truncated tar: refused, named' '
	rm -rf t-cut && cp -a good t-cut &&
	head -c 3000 good/d/a.tar >t-cut/d/a.tar &&
	stage_fails h-cut t-cut --expand-tar &&
	grep "t-cut/d/a.tar'"'"': at byte [0-9]* (member '"'"'./[0-9].bin'"'"'): truncated" err
'

test_expect_success 'a member whose path under SRC passes PATH_MAX: refused, named' '
	rm -rf t-long && mkdir -p t-long/$(printf "%030d" 0) && cp good/plain.txt t-long/ &&
	mktar long-path t-long/$(printf "%030d" 0)/long.tar &&
	"$T/h5-tarls" t-long/$(printf "%030d" 0)/long.tar >/dev/null &&
	stage_fails h-long t-long --expand-tar &&
	grep "long.tar'"'"': a member'"'"'s name makes a path longer than PATH_MAX" err
'

test_expect_success 'pack --in-place --expand-tar of a hostile tar: refused, no OUT' '
	rm -rf t-pk && cp -a good t-pk && mktar dotdot-pax t-pk/evil.tar &&
	test_status 1 "$DSTAGE" pack -q --in-place --expand-tar t-pk pk 2>err &&
	grep "evil.tar'"'"': member '"'"'../evil'"'"'" err && ! test -e pk
'

test_expect_success 'a tar changed between the walk and its read: the stage fails, names it' '
	rm -rf t-mid && cp -a good t-mid &&
	(export DSTAGE_TEST_AFTER_SCAN="tar -rf t-mid/b.tar -C m 3.bin" &&
	 stage_fails h-mid t-mid --expand-tar) &&
	grep "t-mid/b.tar'"'"': changed during the stage" err
'

test_expect_success 'pack --in-place --expand-tar: a tar changed between scan and read is refused, no OUT' '
	rm -rf t-pmid pk-mid && cp -a good t-pmid &&
	test_status 1 env DSTAGE_TEST_AFTER_SCAN="tar -rf t-pmid/d/a.tar -C m 3.bin" \
		"$DSTAGE" pack -q --in-place --expand-tar t-pmid pk-mid 2>err &&
	grep "t-pmid/d/a.tar'"'"': changed while packing" err && ! test -e pk-mid
'

# A tar changed after the in-place pack: each case on a fresh copy
changed() { # changed NAME 'how' 'message'
	test_expect_success "a tar changed after the in-place pack ($1): stage refuses, names it" "
		rm -rf c-$1 pk-$1 && cp -a good c-$1 &&
		\"\$DSTAGE\" pack -q --in-place --expand-tar c-$1 pk-$1 &&
		(cd c-$1 && $2) &&
		stage_fails c-$1 pk-$1 &&
		grep -F \"$3\" err
	"
}
changed rewritten 'tar -cf d/a.tar -C ../m 6.bin 5.bin' "c-rewritten/d/a.tar': changed since the in-place pack"
changed appended 'tar -rf b.tar -C ../m 3.bin' "c-appended/b.tar': changed since the in-place pack"
changed flipped 't=$(stat -c %y b.tar) && printf "\\377" | dd of=b.tar bs=1 seek=700 conv=notrunc 2>/dev/null && touch -d "$t" b.tar' "checksum"
changed symlink 'mv b.tar b.real && ln -s b.real b.tar' "c-symlink/b.tar'"
changed truncated 'truncate -s 1024 d/a.tar' "c-truncated/d/a.tar'"

test_done
