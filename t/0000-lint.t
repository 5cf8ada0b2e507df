#!/bin/sh
# The test suite's own hygiene: no test number used twice; the harness's
# cleanup and skip reasons are not bypassed (t/README.md).
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'no two tests share a number' '
	ls "$SRCDIR"/t/[0-9][0-9][0-9][0-9]-*.t | sed "s,.*/,," | cut -c1-4 | sort | uniq -d >dups &&
	test_cmp /dev/null dups
'
test_expect_success 'every test is executable' '
	for f in "$SRCDIR"/t/[0-9]*.t; do test -x "$f" || { echo "$f not executable"; exit 1; }; done
'
test_expect_success 'no script sets its own EXIT, INT or TERM trap (test_atexit does it)' '
	grep -n "^[[:space:]]*trap .*\(EXIT\|INT\|TERM\)" "$SRCDIR"/t/[0-9]*.t >traps;
	test_cmp /dev/null traps
'
test_expect_success 'no script prints its own SKIP plan (skip_all, test_require say why)' '
	grep -n "echo .1\.\.0 # SKIP" "$SRCDIR"/t/[0-9]*.t | grep -v "/0002-test-lib\.t:" >skips;
	test_cmp /dev/null skips
'
test_done
