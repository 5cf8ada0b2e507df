#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A file over 4 GiB (sparse, so the test is quick): pack streams it in
# chunks, keeps its holes as holes, and verify, cat and zlib handle 64-bit
# sizes and offsets.
. "$(dirname "$0")/test-lib.sh"

BIG=4404019200 # 4.1 GiB

test_require SPARSE

test_expect_success 'setup: a sparse 4.1 GiB file with data at both ends' '
	mkdir src &&
	truncate -s '$BIG' src/huge &&
	printf head | dd of=src/huge conv=notrunc 2>/dev/null &&
	printf middle | dd of=src/huge bs=1 seek=2147483640 conv=notrunc 2>/dev/null &&
	printf tail | dd of=src/huge bs=1 seek=$(('$BIG' - 4)) conv=notrunc 2>/dev/null &&
	echo small >src/small &&
	test $(stat -c %s src/huge) = '$BIG'
'

test_expect_success 'pack -z none: the payload stays sparse' '
	$DSTAGE pack src out >summary &&
	test_grep "packed 2 files" summary &&
	$DSTAGE ls -l out huge >l &&
	test_grep " '$BIG' .* huge$" l &&
	test $(du -k out | tail -n 1 | cut -f1) -lt 102400
'

test_expect_success 'verify --against (none)' '
	$DSTAGE verify --against src out
'

test_expect_success 'cat gives the 4.1 GiB back (none)' '
	$DSTAGE cat out huge | cmp - src/huge
'

test_expect_success 'pack -z zlib:1 compresses it to a few MiB' '
	$DSTAGE pack -z zlib:1 src outz >summary &&
	test $(du -k outz | tail -n 1 | cut -f1) -lt 51200
'

test_expect_success 'verify --against (zlib)' '
	$DSTAGE verify --against src outz
'

test_expect_success 'cat gives the 4.1 GiB back (zlib)' '
	$DSTAGE cat outz huge | cmp - src/huge
'

test_expect_success 'a change past 4 GiB is found by verify --against' '
	printf X | dd of=src/huge bs=1 seek=4404019000 conv=notrunc 2>/dev/null &&
	touch -r src/small src/huge && touch -d "2001-01-01" src/huge src/small &&
	$DSTAGE pack -q src out2 &&
	printf Y | dd of=src/huge bs=1 seek=4404019000 conv=notrunc 2>/dev/null &&
	touch -d "2001-01-01" src/huge &&
	! $DSTAGE verify --against src out2 2>err &&
	test_grep "huge.: differs from the source: content" err
'

test_done
