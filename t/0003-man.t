#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The manual page, man/dstage.1 (written by hand: docs/HACKING.md, "Man
# page"): it renders without a warning, it has a section for every command
# `dstage --help` lists, and every option any `--help` prints is in the
# section of its command, so that an option added to a command and not to
# the page fails here.
. "$(dirname "$0")/test-lib.sh"

PAGE="$SRCDIR/man/dstage.1"
test_lazy_prereq MAN 'command -v man && command -v groff && command -v col' \
	"man, groff or col not installed (apt-get install man-db groff-base bsdextrautils)"

# the page as text, one line per paragraph, no hyphenation (the page says
# .nh), every subsection heading at three spaces
render() {
	MANWIDTH=1000 LC_ALL=C.UTF-8 man -l "$1" 2>/dev/null | col -bx
}
# the option names in a --help text: -x and --long-name, not inside words
# (node-local, L-of-N) and not numbers (-1)
options_of() {
	grep -oE -- "(^|[^A-Za-z0-9_-])--?[A-Za-z][A-Za-z0-9-]*" | sed "s/^[^-]*//" | sort -u
}
# the text of the section of command $2 in rendered page $1
section() {
	awk -v c="$2" '
		/^   [^ ]/ { on = ($1 == "dstage" && $2 == c) }
		/^[^ ]/ { on = 0 }
		on' "$1"
}
# every command and option of the --help texts in its section of the page
# $1 (rendered); each missing one printed
check_page() {
	"$DSTAGE" --help >top.help &&
	sed -n "/^commands:/,/^\$/s/^  \([a-z][a-z]*\) .*/\1/p" top.help >cmds &&
	test -s cmds || return 1
	missing=0
	for o in $(options_of <top.help); do
		grep -qE -- "(^|[^A-Za-z0-9-])$o([^A-Za-z0-9-]|\$)" "$1" ||
			{ echo "dstage $o: not in the page"; missing=1; }
	done
	while read -r c; do
		section "$1" "$c" >"sec.$c"
		test -s "sec.$c" || { echo "dstage $c: no section in the page"; missing=1; continue; }
		"$DSTAGE" "$c" --help >"help.$c" || { echo "dstage $c --help failed"; missing=1; }
		for o in $(options_of <"help.$c"); do
			grep -qE -- "(^|[^A-Za-z0-9-])$o([^A-Za-z0-9-]|\$)" "sec.$c" ||
				{ echo "dstage $c $o: not in its section of the page"; missing=1; }
		done
	done <cmds
	return $missing
}

test_expect_success MAN 'man --warnings renders the page without a warning' '
	MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l "$PAGE" >page.txt 2>warn &&
	test_cmp /dev/null warn &&
	test_grep "^NAME" page.txt && test_grep "^EXIT STATUS" page.txt
'

test_expect_success MAN 'every command and every option of every --help is in its section' '
	render "$PAGE" >page &&
	test_status --show missing 0 check_page page >missing && test_cmp /dev/null missing
'

test_expect_success MAN 'the check fails when an option or a command is left out of the page' '
	grep -v "^\.BI \\\\-\\\\-drain\\\\-rate " "$PAGE" >less.1 &&
	! cmp -s "$PAGE" less.1 &&
	render less.1 >less &&
	! check_page less >missing &&
	test_grep "dstage serve --drain-rate: not in its section" missing &&
	test_grep "dstage run --drain-rate: not in its section" missing &&
	sed "s/^\.SS \"dstage clean /.SS \"dstage cleanup /" "$PAGE" >nocmd.1 &&
	render nocmd.1 >nocmd &&
	! check_page nocmd >missing &&
	test_grep "dstage clean: no section in the page" missing
'

test_done
