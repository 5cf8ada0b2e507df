#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tools/modgraph.sh [--check] [ROOT]: the module graph of the sources, from
# their #include "..." lines (and #include <NAME.h> of a name a folder
# holds, as the build's -I flags find it): one "FOLDER INCLUDED-FOLDER" line
# per edge.
#
# A folder is a top-level directory of ROOT (default: this tree) holding C
# sources or headers, t/, bench/, tools/, jobs/, docs/ and build*/ aside (its
# subdirectories count as itself: hdf5/fuzz is hdf5).  An included name is
# found by its last component among every folder's files, as the build's
# -I flags find it; a name no folder has (a system header in quotes) is no
# edge; a name two folders have is an error (the graph would be a guess).
#
# --check: exit 1 when the graph has a cycle, naming the folders on it
# (tsort), or an included name is ambiguous, or a file includes another
# folder's private header; print the graph either way.  A folder's face is
# its header named ds*.h (one per folder, common/ aside, which holds the
# shared ones); every other header (svc.h, *_int.h, shim.h, wrap.h, ...) is
# private to its folder.  That is checked over the whole tree, bench/ and
# tools/ included; only the tests (t/) may look inside a module (white-box
# helpers such as t/helpers/h5-packtool.c).
check=
[ "$1" = --check ] && { check=1; shift; }
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

prune='-path ./t -prune -o -path ./bench -prune -o -path ./tools -prune -o
	-path ./jobs -prune -o -path ./docs -prune -o'
srcs() { # $1: the prunes; the C sources and headers under ., sorted
	# shellcheck disable=SC2086
	find . $1 -path './build*' -prune -o -path './.*' -prune -o \
		-type f \( -name '*.c' -o -name '*.h' \) -print | sed 's,^\./,,' | sort
}
files=$(srcs "$prune")
[ -n "$files" ] || { echo "modgraph: no sources under '$root'" >&2; exit 2; }
all=$(srcs "")

# "H NAME FOLDER" for every header, then "I ..." for every include line;
# awk joins them
{
	for f in $all; do
		case $f in */*) ;; *) continue ;; esac
		case $f in *.h) echo "H ${f##*/} ${f%%/*}" ;; esac
	done
	# "I FOLDER NAME FILE KIND": KIND g (a module: an edge of the graph),
	# t (a test: may include a private header), o (bench/, tools/: may not)
	for f in $all; do
		case $f in */*) ;; *) continue ;; esac
		case ${f%%/*} in
		t) kind=t ;;
		bench | tools | jobs | docs) kind=o ;;
		*) kind=g ;;
		esac
		sed -n -e 's/^[ 	]*#[ 	]*include[ 	]*"\([^"]*\)".*/\1/p' \
			-e 's/^[ 	]*#[ 	]*include[ 	]*<\([^>/]*\)>.*/<\1/p' "$f" |
			while read -r inc; do echo "I ${f%%/*} ${inc##*/} $f $kind"; done
	done
} | awk -v check="$check" '
	$1 == "H" {
		if (($2 in dir) && dir[$2] != $3) { amb[$2] = dir[$2] " and " $3 }
		else dir[$2] = $3
		if (check && $2 ~ /^ds.*[.]h$/ && $3 != "common") {
			if (($3 in face) && face[$3] != $2) {
				printf "modgraph: %s/ has two faces, %s and %s (one ds*.h per folder)\n", \
					$3, face[$3], $2 > "/dev/stderr"; bad = 1
			}
			face[$3] = $2
		}
		next
	}
	$1 == "I" {
		name = $3; sub(/^</, "", name)
		if (!(name in dir) && !(name in amb)) next  # a system header
		if (name in amb) { printf "modgraph: %s: \"%s\" is in %s\n", $4, name, amb[name] > "/dev/stderr"; bad = 1; next }
		if (dir[name] == $2) next
		if (check && name !~ /^ds.*[.]h$/ && $5 != "t") {
			printf "modgraph: %s: \"%s\" is private to %s/ (a folder includes another only through its ds*.h face)\n", \
				$4, name, dir[name] > "/dev/stderr"; bad = 1
		}
		if ($5 != "g") next
		e = $2 " " dir[name]
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
