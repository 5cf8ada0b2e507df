#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tools/chainlint.pl, the lint t/0000-lint.t runs over every test body (a
# body runs without set -e: a command not chained with && is a command
# whose failure the test never sees).  A table of snippets, each a small
# test script: the constructs chained right are silent; each broken link,
# hand-written capture and loop that loses a pass is named by its line;
# a body that is not shell is a parse finding, not a pass.
. "$(dirname "$0")/test-lib.sh"

LINT="$SRCDIR/tools/chainlint.pl"

# lint FILE: the findings, and the exit status in FILE.rc
lint() {
	perl "$LINT" "$1" >"$1.out" 2>"$1.err"
	echo $? >"$1.rc"
}

# The snippets (written here, outside any test body, so they need no
# quoting of their own).
cat >good.t <<\SNIP
test_expect_success 'quotes across lines, splices, comments, continuations' '
	echo "a;
	b; c" >f && echo '"'"'x; y'"'"' >g &&   # a comment; with ; in it
	grep -q \
		b f &&
	echo '\''its'\'' >h
'
test_expect_success 'here-documents' '
	cat >f <<-\EOF &&
	a; b
	c
	EOF
	cat >g <<EOT && cat <<-"X" >h &&
not; a command
EOT
		y; z
	X
	test -s f
'
test_expect_success 'command substitutions' '
	x=$(echo a && echo b) && y=`echo c` &&
	z=$(case $x in a) echo 1 ;; *) echo 2 ;; esac) &&
	test "$(cat f | wc -l)" = 2
'
test_expect_success 'groups, subshells, if, loops, case, functions, pipelines' '
	{ echo a && echo b; } >f &&
	(cd /tmp && pwd) &&
	if test -e f; then echo y && echo z; elif test -e g; then :; else false; fi &&
	for i in 1 2; do echo $i || exit 1; done &&
	for i in 1 2
	do
		test -e f || return 1
	done &&
	while read -r l; do
		case $l in
		a) echo A && echo AA ;;
		b | c) echo B ;;
		(*) echo other
		esac || exit 1
	done <f &&
	until test -e f; do sleep 0.1 || exit 1; done &&
	f() { echo in && return 0; } &&
	g() {
		echo one
	} &&
	f | sort | uniq
'
test_expect_success 'links that lose nothing' '
	a=1; b=2 c=$a
	: ; true
	sleep 100 & pid=$!
	test -e f || { echo "no f"; cat g; exit 1; }
	test -e f || exit 1
	rm -f g || :
	for k in 1 2 3; do test -e f$k && break; sleep 0.1 || exit 1; done
	while :; do test -e f || break; echo x || exit 1; done
	for k in 1 2; do sleep 1 & done
	wait
	cmd || rc=$?
	test_status 1 false && test -e f
'
test_expect_code 1 'test_expect_code, a double-quoted body' "
	echo \"q; r\" && false
"
test_lazy_prereq NAME '
	command -v x && test -e y
' 'a lazy prerequisite: its script, not its description; it'"'"'s'
SNIP

cat >links.t <<\SNIP
test_expect_success 'plain links' '
	echo a
	echo b; echo c &&
	cat <<-\EOF >f
	x; y
	EOF
	test -s f
'
test_expect_success 'in groups, subshells, substitutions, functions' '
	{ echo a; echo b; } &&
	(cd d; pwd) &&
	x=$(cd d; pwd) && y=`cat f; cat g` &&
	f() {
		echo one
		echo two
	} &&
	x=$(false)
	test -n "$x"
'
test_expect_success 'in if, case, while, after a compound' '
	if test -e f; test -e g; then echo a; echo b; elif c; then d; else echo e; echo f; fi
	case $x in
	a) echo a; echo b ;;
	*) echo c
	   echo d
	esac &&
	while test -e f; echo z; do
		rm f || exit 1
	done |
	sort
	test -e done
'
SNIP
cat >links.want <<\SNIP
links.t:2: broken && chain: echo a
links.t:3: broken && chain: echo b
links.t:4: broken && chain: echo c && cat
links.t:10: broken && chain: echo a
links.t:11: broken && chain: cd d
links.t:12: broken && chain: cd d
links.t:12: broken && chain: cat f
links.t:14: broken && chain: echo one
links.t:17: broken && chain: { ... } && ( ... ) && x=$(cd d; pwd) && y=`cat f; cat g` && f() { ....
links.t:21: broken && chain: test -e f
links.t:21: broken && chain: echo a
links.t:21: broken && chain: echo e
links.t:21: broken && chain: if ... fi
links.t:23: broken && chain: echo a
links.t:24: broken && chain: echo c
links.t:27: broken && chain: test -e f
links.t:30: broken && chain: case ... esac && while ... done | sort
SNIP

cat >loops.t <<\SNIP
test_expect_success 'loops that lose a pass' '
	for i in 1 2; do echo $i; done &&
	while read -r l; do test -n "$l" && echo "$l"; done <f &&
	for i in 1 2; do for j in 3 4; do echo $j || exit 1; done; done &&
	until test -e f; do sleep 0.1; done &&
	for i in 1 2; do echo $i || break; done &&
	for i in 1 2; do
		echo $i
	done # chainlint: ok (not this line: the finding is on the one above)
'
SNIP
cat >loops.want <<\SNIP
loops.t:2: loop: echo $i
loops.t:3: loop: test -n "$l" && echo "$l"
loops.t:5: loop: sleep 0.1
loops.t:6: loop: echo $i || break
loops.t:8: loop: echo $i
SNIP

cat >captures.t <<\SNIP
test_expect_success 'captures' '
	false; rc=$?
	test $rc = 1 && { cmd; echo $? >rc; } &&
	if false; then :; fi; test $? = 0
'
SNIP
cat >captures.want <<\SNIP
captures.t:2: capture: false
captures.t:3: capture: cmd
captures.t:4: capture: test $rc = 1 && { ... } && if ... fi
SNIP

cat >marks.t <<\SNIP
test_expect_success 'a marker says what is deliberate, on its line only' '
	kill -CONT $pid; wait $pid # chainlint: ok (resumed first)
	echo a #chainlint:ok
	echo b # not a marker
	echo c
'
SNIP
echo "marks.t:4: broken && chain: echo b" >marks.want

cat >exits.t <<\SNIP
test_expect_success 'what is not an exit' '
	echo a; exit 0
	echo b; return 0
	cmd || false
	cmd2
'
test_expect_success 'a double-quoted body; a body in pieces' "
	echo \"a\"; echo \$x
	echo b
"
test_expect_success 'in pieces' 'echo a
	'"echo \"b\"
	"'echo c'
test_expect_code 2 'code' '
	echo a
	cmd
'
test_lazy_prereq P '
	echo a
	true
'
test_expect_success 'a failure that ends the test with success' '
	test -e f && cmp f g || exit 0
	test -e f || exit 0
	f() { test -e f || return 0; } &&
	f && cmp f g || return 0
'
SNIP
cat >exits.want <<\SNIP
exits.t:2: broken && chain: echo a
exits.t:3: broken && chain: echo b
exits.t:4: broken && chain: cmd || false
exits.t:8: broken && chain: echo "a"
exits.t:8: broken && chain: echo $x
exits.t:11: broken && chain: echo a
exits.t:12: broken && chain: echo "b"
exits.t:15: broken && chain: echo a
exits.t:19: broken && chain: echo a
exits.t:23: exit 0: test -e f && cmp f g || exit 0
exits.t:26: exit 0: f() { ... } && f && cmp f g || return 0
SNIP

cat >parse.t <<\SNIP
test_expect_success 'an unterminated quote' '
	echo "a &&
	true
'
test_expect_success 'no fi' '
	if true; then echo a
'
test_expect_success 'a stray done' '
	echo a &&
	done
'
test_expect_success 'an unterminated here-document' '
	cat <<-EOF &&
	a
'
SNIP
cat >parse.want <<\SNIP
parse.t:2: parse: unterminated "..."
parse.t:6: parse: 'fi' expected, found the end
parse.t:10: parse: unexpected 'done'
parse.t:13: parse: here-document 'EOF' (<<) has no end
SNIP

test_expect_success 'every construct chained right: nothing found, exit 0' '
	lint good.t && cat good.t.out good.t.err &&
	test_cmp /dev/null good.t.out && test "$(cat good.t.rc)" = 0
'
for c in links loops captures marks exits parse; do
	test_expect_success "$c: each finding named by its line, exit 1" "
		lint $c.t && test_cmp $c.want $c.t.out &&
		test_cmp /dev/null $c.t.err && test \"\$(cat $c.t.rc)\" = 1
	"
done

test_expect_success 'usage: no file, an option, a missing file (exit 2)' '
	test_status 2 perl "$LINT" 2>err && test_grep "usage: chainlint.pl FILE" err &&
	test_status 2 perl "$LINT" -x 2>err && test_grep usage: err &&
	test_status 2 perl "$LINT" good.t nothere.t >out 2>err &&
	test_grep "nothere.t: No such file" err && test_cmp /dev/null out
'

test_done
