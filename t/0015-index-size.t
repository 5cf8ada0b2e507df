#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The node index's size and lookups at ImageNet-21k's shape (issue 27):
# 200k file names in 3,390 class directories (59 a class, as 1.28M names in
# 21,841), train/<wnid>/<wnid>_<n>.JPEG with file numbers spread over
# 1-20,000, built by t/helpers/ixscale (the builder, the full check): at
# most 48 bytes per entry, all sections together (version 2 took 121), the
# same bytes from either builder, the sorted one holding at most 32 bytes
# an entry at its peak (the sorting one, 160), and
# every one of 2,000 random files found by a fresh process that maps the
# index as the shim does; a version 2 index refused by name.  Also bench/scale.sh's index rows, at 1.28M and
# 2M names.
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'an ImageNet-21k-shaped index of 200k names: <= 48 bytes per entry' '
	"$T/ixscale" build 200000 3390 ix >stats &&
	cat stats &&
	grep "^entries 203392$" stats &&
	"$T/ixscale" bound 48 <stats
'

test_expect_success 'a fresh process finds 2,000 random files of it' '
	"$T/ixscale" lookup ix 200000 3390 2000 >look &&
	cat look && grep "^lookup_us_per_file" look
'

test_expect_success 'the dense shape (bench/scale.py: n + 7 j) too' '
	"$T/ixscale" build 100000 79 ixd dense >stats &&
	cat stats && "$T/ixscale" bound 48 <stats &&
	"$T/ixscale" lookup ixd 100000 79 500 dense
'

# The builder a stage's node leader uses (entries in path order, each row
# written to the file as it comes) against the one that sorts (any order):
# the same bytes, built in memory or into the file, with far less held.
test_expect_success 'the sorted builder, to a file or in memory, gives the bytes the sorting one does' '
	"$T/ixscale" build 200000 3390 ixm sparse memory >stats.m &&
	"$T/ixscale" build 200000 3390 ixa sparse any >stats.a &&
	cat stats.m stats.a && cmp ix ixm && cmp ix ixa &&
	"$T/ixscale" build 100000 79 ixda dense any >/dev/null && cmp ixd ixda &&
	held=$(sed -n "s/^builder_peak_B_per_entry //p" stats) &&
	echo "the file builder peaks at $held B an entry" &&
	test "${held%.*}" -le 32
'

test_expect_success 'a version 2 index is refused, and the message names its version' '
	"$T/hard-index" version2 ix ix2 &&
	! "$T/hard-index" check ix2 >out 2>err &&
	cat out err &&
	test_grep "index version 2, this dstage reads version 3" err
'

test_done
