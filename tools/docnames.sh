#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tools/docnames.sh ROOT DOC...: the backticked names of DOC (markdown) that
# look like code and are not in the tree ROOT, one "DOC:LINE: `NAME`: why"
# line each; exit 1 when there is one (t/0000-lint.t runs it on
# docs/HACKING.md and docs/design.md, which a maintainer follows to the
# code: a name there that does not exist sends them nowhere).
#
# Looks like code:
#   - a C name with the project's prefix, ds_ ds__ DS_ DS__ (alone, or
#     called: `ds_log(level, ...)`): a word of some source file;
#   - a call of any other name, `name(...)` (not a man page's `name(2)`):
#     its name a word of some source file;
#   - a path in the tree: with a slash (`io/wrap.h`, `t/helpers/`) it must
#     exist under ROOT; a bare file name (`window.c`, `dsserve.h`) must be
#     some file's name; `t/NNNN` a test script's number.
# Not code: anything with a space, a placeholder (`t/NNNN-name.t`,
# `NODEDIR/store`, `<job>`, `*`, `...`), an absolute, home or URL path, the
# build tree (`build/...`, made by make) and a prefix alone (`ds_`).
# "Source file" (for the words): everything under ROOT but build*/, .git,
# docs/, *.md and the fuzz corpora.
[ $# -ge 2 ] || { echo "usage: tools/docnames.sh ROOT DOC..." >&2; exit 2; }
root=$1
shift
tmp=${TMPDIR:-/tmp}/docnames.$$
trap 'rm -f "$tmp".*' EXIT
find "$root" \( -path "$root/build*" -o -path "$root/.git" -o -path "$root/docs" \
	-o -path "$root/t/fuzz/corpus-*" -o -path "$root/t/fuzz/hdf5-findings" \) -prune -o \
	-type f ! -name "*.md" -print >"$tmp.files"
tr '\n' '\0' <"$tmp.files" | xargs -0 grep -IohE "[A-Za-z_][A-Za-z0-9_]*" | sort -u >"$tmp.words"
# names and paths: every file (docs/ too), the build tree and .git aside
find "$root" \( -path "$root/build*" -o -path "$root/.git" \) -prune -o -type f -print |
	sed "s,^$root/,," >"$tmp.paths"
sed "s,.*/,," "$tmp.paths" | sort -u >"$tmp.names"

# every `...` span of each line (code blocks are indented, not backticked,
# and left alone), classified against the words, names and paths above
awk -v root="$root" -v wf="$tmp.words" -v nf="$tmp.names" -v pf="$tmp.paths" '
BEGIN {
	while ((getline w <wf) > 0) word[w] = 1
	while ((getline w <nf) > 0) fname[w] = 1
	while ((getline w <pf) > 0) {
		path[w] = 1
		# every directory on the way, with and without its slash
		while (sub(/\/[^\/]*$/, "", w)) { path[w] = 1; path[w "/"] = 1 }
	}
}
function check(name,    w) {
	if (name ~ /[ <>*$~]|\.\.\.|:\/\/|^\/|^build|^\.\.?\//) return ""
	if (name ~ /^\.[a-z0-9]+$/) return "" # an extension: `.c`
	if (name ~ /^(ds|DS)__?[A-Za-z0-9]/) {
		w = name; sub(/[^A-Za-z0-9_].*/, "", w)
		return (w in word) ? "" : "no source file has " w
	}
	if (name ~ /^[A-Za-z_][A-Za-z0-9_]*\(.*\)$/) {
		if (name ~ /\([0-9]\)$/) return "" # a man page: syscall(2)
		w = name; sub(/\(.*/, "", w)
		return (w in word) ? "" : "no source file has " w
	}
	if (name ~ /^t\/[0-9][0-9][0-9][0-9]$/) {
		for (w in path) if (index(w, name "-") == 1 && w ~ /\.t$/) return ""
		return "no test script " name "-*.t"
	}
	if (name !~ /^[A-Za-z0-9_.+-]+(\/[A-Za-z0-9_.+-]+)*\/?$/) return ""
	if (name !~ /\/|\.(c|h|sh|t|py|pl|ld|yml|sbatch|1)$/) return ""
	if (name ~ /\//) {
		if (name in path) return ""
		# a placeholder in capitals (NODEDIR/store, t/9NNN): not a name
		return name ~ /[A-Z][A-Z]/ ? "" : "no such path in the tree"
	}
	if (name in fname) return ""
	return name ~ /[A-Z][A-Z]/ ? "" : "no file of that name in the tree"
}
{
	line = $0
	while (match(line, /`[^`]+`/)) {
		name = substr(line, RSTART + 1, RLENGTH - 2)
		line = substr(line, RSTART + RLENGTH)
		why = check(name)
		if (why != "") { printf "%s:%d: `%s`: %s\n", FILENAME, FNR, name, why; bad = 1 }
	}
}
END { exit bad }
' "$@"
