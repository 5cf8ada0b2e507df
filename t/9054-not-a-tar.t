#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A file named *.tar that is not a tar (issue 28): under --expand-tar every
# *.tar is declared a tar shard, so one that is not refuses the stage and
# the in-place pack (exit 1, nothing left), as GNU tar refuses it ("does not
# look like a tar archive"), and the message says what the file is as far
# as its magic number tells (a compressed tar: decompress it) and what to
# do.  Staging it as an opaque file instead would leave its samples out of
# the epoch without a word.  Without --expand-tar the same tree stages, the
# file as it is; a tar of end-of-archive blocks alone is an empty shard.
. "$(dirname "$0")/test-lib.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
command -v gzip >/dev/null || skip_all "no gzip"
uid=$(id -u)

stage_fails() { # stage_fails JOB SRC: exit 1 and no node store left
	mpirun_n 2 "$DSTAGE" stage "$2" --expand-tar --to "$SHM" --job "$1" --node-per-rank >out 2>err
	rc=$?
	cat err
	test $rc = 1 && ! test -e "$SHM/dstage.$uid.$1/0" && ! test -e "$SHM/dstage.$uid.$1/1"
}

test_expect_success 'setup: a tree of good shards' '
	mkdir -p good/d m &&
	for j in 1 2 3 4; do head -c $((j * 1000)) /dev/urandom >m/$j.bin || return 1; done &&
	tar -cf good/d/a.tar -C m . && echo plain >good/plain.txt
'

test_expect_success 'text named X.tar: refused, "does not look like a tar archive", nothing left' '
	cp -a good t-text && yes "not a tar" | head -n 200 >t-text/d/notes.tar &&
	stage_fails j-text t-text &&
	grep "t-text/d/notes.tar'"'"': at byte 0: does not look like a tar archive" err &&
	grep "rename it, or leave it out" err
'

test_expect_success 'a gzip-compressed tar named X.tar: refused as gzip data, even a small one' '
	cp -a good t-gz && gzip -c good/d/a.tar >t-gz/d/b.tar &&
	stage_fails j-gz t-gz &&
	grep "t-gz/d/b.tar'"'"': gzip data, not a tar archive" err && grep "decompress it" err &&
	cp -a good t-gzs && echo tiny | gzip -c >t-gzs/s.tar && test "$(wc -c <t-gzs/s.tar)" -lt 512 &&
	stage_fails j-gzs t-gzs &&
	grep "t-gzs/s.tar'"'"': gzip data, not a tar archive" err
'

test_expect_success 'short and empty files named X.tar: less than a header, said so' '
	cp -a good t-short && echo junk >t-short/j.tar && : >t-short/d/e.tar &&
	stage_fails j-short t-short &&
	grep -e "t-short/j.tar'"'"': at byte 0: truncated, or not a tar: 5 bytes, less than one tar header" \
		-e "t-short/d/e.tar'"'"': at byte 0: truncated, or not a tar: an empty file" err
'

test_expect_success 'pack --in-place --expand-tar: refused the same way, no OUT' '
	test_status 1 "$DSTAGE" pack -q --in-place --expand-tar t-gz pk 2>err &&
	grep "b.tar'"'"': gzip data, not a tar archive" err && ! test -e pk
'

test_expect_success 'a tar whose first header has tar magic but a bad checksum: a damaged tar' '
	cp -a good t-bad && cp good/d/a.tar t-bad/d/a.tar &&
	printf X | dd of=t-bad/d/a.tar bs=1 seek=10 conv=notrunc 2>/dev/null &&
	stage_fails j-bad t-bad &&
	grep "t-bad/d/a.tar'"'"': at byte 0: bad header checksum" err
'

test_expect_success 'without --expand-tar the same tree stages, X.tar as a file' '
	mpirun_n 2 "$DSTAGE" stage t-gz --to "$SHM" --job j-plain --node-per-rank >out &&
	test_grep "staged 3 files, 1 directories" out &&
	"$DSTAGE" clean --to "$SHM" --job j-plain && ! test -e "$SHM/dstage.$uid.j-plain"
'

test_expect_success 'a tar of end-of-archive blocks alone: an empty shard, staged' '
	cp -a good t-empty && tar -cf t-empty/e.tar -T /dev/null && tar -tf t-empty/e.tar &&
	mpirun_n 2 "$DSTAGE" stage t-empty --expand-tar --to "$SHM" --job j-empty --node-per-rank >out &&
	test_grep "staged 5 files, 3 directories" out &&
	"$DSTAGE" clean --to "$SHM" --job j-empty
'

test_done
