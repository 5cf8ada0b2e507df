#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tools/modgraph.sh [--check] [ROOT]: the module graph of the sources, from
# their #include "..." lines: one "FOLDER INCLUDED-FOLDER" line per edge.
#
# A folder is a top-level directory of ROOT (default: this tree) holding C
# sources or headers, t/, bench/, tools/, jobs/, docs/ and build*/ aside (its
# subdirectories count as itself: hdf5/fuzz is hdf5).  An included name is
# found by its last component among every folder's files, as the build's
# -I flags find it; a name no folder has (a system header in quotes) is no
# edge; a name two folders have is an error (the graph would be a guess).
#
# --check: exit 1 when the graph has a cycle, naming the folders on it
# (tsort), or an included name is ambiguous; print the graph either way.
check=
[ "$1" = --check ] && { check=1; shift; }
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

files=$(find . -path ./t -prune -o -path ./bench -prune -o -path ./tools -prune -o \
	-path ./jobs -prune -o -path ./docs -prune -o -path './build*' -prune -o \
	-path './.*' -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print | sed 's,^\./,,' | sort)
[ -n "$files" ] || { echo "modgraph: no sources under '$root'" >&2; exit 2; }

# "name folder" for every header, then "folder included-name" for every
# include line; awk joins them
{
	for f in $files; do
		case $f in */*) ;; *) continue ;; esac
		case $f in *.h) echo "H ${f##*/} ${f%%/*}" ;; esac
	done
	for f in $files; do
		case $f in */*) ;; *) continue ;; esac
		sed -n 's/^[ 	]*#[ 	]*include[ 	]*"\([^"]*\)".*/\1/p' "$f" |
			while read -r inc; do echo "I ${f%%/*} ${inc##*/} $f"; done
	done
} | awk '
	$1 == "H" {
		if (($2 in dir) && dir[$2] != $3) { amb[$2] = dir[$2] " and " $3 }
		else dir[$2] = $3
		next
	}
	$1 == "I" {
		if ($3 in amb) { printf "modgraph: %s: \"%s\" is in %s\n", $4, $3, amb[$3] > "/dev/stderr"; bad = 1; next }
		if (!($3 in dir) || dir[$3] == $2) next
		e = $2 " " dir[$3]
		if (!(e in seen)) { seen[e] = 1; print e }
	}
	END { exit bad ? 3 : 0 }
' >"${TMPDIR:-/tmp}/modgraph.$$"
rc=$?
sort "${TMPDIR:-/tmp}/modgraph.$$"
if [ -n "$check" ]; then
	loop=$(tsort "${TMPDIR:-/tmp}/modgraph.$$" 2>&1 >/dev/null)
	if [ -n "$loop" ]; then
		echo "modgraph: the folders include each other in a cycle:" >&2
		echo "$loop" | sed -n 's/^tsort: //p' | grep -v "input contains a loop" | sed 's/^/  /' >&2
		rc=1
	fi
fi
rm -f "${TMPDIR:-/tmp}/modgraph.$$"
[ "$rc" = 0 ] || exit 1
exit 0
