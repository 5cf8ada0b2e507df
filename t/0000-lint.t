#!/bin/sh
# The test suite's own hygiene: no test number used twice.
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'no two tests share a number' '
	ls "$SRCDIR"/t/[0-9][0-9][0-9][0-9]-*.t | sed "s,.*/,," | cut -c1-4 | sort | uniq -d >dups &&
	test_cmp /dev/null dups
'
test_expect_success 'every test is executable' '
	for f in "$SRCDIR"/t/[0-9]*.t; do test -x "$f" || { echo "$f not executable"; exit 1; }; done
'
test_done
