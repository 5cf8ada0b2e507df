#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The node index's size and lookups at ImageNet-21k's shape (issue 27):
# 200k file names in 3,390 class directories (59 a class, as 1.28M names in
# 21,841), train/<wnid>/<wnid>_<n>.JPEG with file numbers spread over
# 1-20,000, built by t/helpers/ixscale (the builder, the full check): at
# most 48 bytes per entry, all sections together (version 2 took 121), and
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

test_expect_success 'a version 2 index is refused, and the message names its version' '
	"$T/hard-index" version2 ix ix2 &&
	! "$T/hard-index" check ix2 >out 2>err &&
	cat out err &&
	test_grep "index version 2, this dstage reads version 3" err
'

test_done
