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
# The documentation: README.md and docs/ (one topic per file) link each
# other and the tree; comments in the code cite docs/design.md by section.
# A link or a citation that leads nowhere fails here.
doc_sources() {
	find "$SRCDIR" \( -path "$SRCDIR/build*" -o -path "$SRCDIR/.git" -o -path "$SRCDIR/docs" \
		-o -path "$SRCDIR/t/fuzz/corpus-*" -o -path "$SRCDIR/t/fuzz/hdf5-findings" \) -prune -o \
		-type f \( -name "*.[ch]" -o -name "*.sh" -o -name "*.py" -o -name "*.t" \
		-o -name "*.sbatch" -o -name Makefile \) -print |
		grep -v "/t/0000-lint\.t$"
}

test_expect_success 'every docs/*.md a comment cites exists' '
	doc_sources | xargs grep -HnoE "docs/[A-Za-z0-9_.-]+\.md" >cites &&
	test -s cites &&
	while IFS=: read -r f n doc; do
		test -f "$SRCDIR/$doc" || { echo "${f#$SRCDIR/}:$n: $doc does not exist"; exit 1; }
	done <cites
'

test_expect_success 'design citations name docs/design.md and a section it has' '
	! doc_sources | xargs grep -HnE "DESIGN(\.md| [0-9]| ?§|,? section)" >stale ||
		{ sed "s,^$SRCDIR/,," stale; echo "cite docs/design.md section N"; exit 1; } &&
	! doc_sources | xargs grep -HnE "README(\.md)?('"'"'s)?,? \"" >stale ||
		{ sed "s,^$SRCDIR/,," stale; echo "cite the docs/ file that holds the section"; exit 1; } &&
	doc_sources | xargs grep -hoE "docs/design\.md,? section [0-9]+" | sed "s/.* //" | sort -u >secs &&
	test -s secs &&
	while read -r s; do
		grep -q "^## $s\. " "$SRCDIR/docs/design.md" || { echo "docs/design.md has no section $s"; exit 1; }
	done <secs
'

test_expect_success PYTHON 'relative links of README.md and docs/*.md lead somewhere' '
	"$PY" "$SRCDIR/t/helpers/doclinks.py" "$SRCDIR" "$SRCDIR"/README.md "$SRCDIR"/docs/*.md \
		$(ls "$SRCDIR"/*/README.md 2>/dev/null)
'

test_done
