#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `make style` and `make style-check` (Makefile, .clang-format): only the
# lines a change touches are checked and formatted; the rest of a file is
# left as it was written.
. "$(dirname "$0")/test-lib.sh"

command -v clang-format >/dev/null && command -v clang-format-diff >/dev/null ||
	skip_all "no clang-format / clang-format-diff (Debian: clang-format)"
command -v git >/dev/null || skip_all "no git"

mk() { make -s --no-print-directory -f "$SRCDIR/Makefile" STYLE_BASE=HEAD "$@"; }

test_expect_success 'a repository with the project style and one old, hand-laid line' '
	git init -q repo && cd repo &&
	cp "$SRCDIR/.clang-format" . &&
	printf "%s\n" "/* a.c */" "static int  old( int x ){return x;}" "" \
		"int f(int x)" "{" "	return x + 1;" "}" >a.c &&
	git add . && git -c user.name=t -c user.email=t@t commit -qm base &&
	mk style-check
'
test_expect_success 'style-check fails on a changed line that is not formatted' '
	cd repo &&
	printf "%s\n" "int  g( int y ){" "return y ;}" >>a.c &&
	test_status --show out 2 mk style-check >out 2>&1 &&
	grep -q "not formatted" out && grep -q "a.c" out
'
test_expect_success 'style formats the changed lines only, then style-check passes' '
	cd repo &&
	mk style &&
	grep -qx "int g(int y) { return y; }" a.c &&
	grep -qx "static int  old( int x ){return x;}" a.c &&
	mk style-check
'
test_done
