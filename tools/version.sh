#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The version of dstage, from one place: `git describe` when the source is a
# git tree of its own (a tag vX.Y.Z: "X.Y.Z", or "X.Y.Z-N-gHASH" after it;
# no tag yet: VERSION's "X.Y.Z-gHASH"; "-dirty" with uncommitted changes),
# else the VERSION file at the top (a release tarball).  The Makefile puts
# it into `dstage --version` and the module file's name
# (PREFIX/share/modulefiles/dstage/VERSION.lua).
top=$(cd "$(dirname "$0")/.." && pwd)
base=$(sed -n 1p "$top/VERSION" 2>/dev/null) && [ -n "$base" ] || { echo "version.sh: $top/VERSION: missing or empty" >&2; exit 1; }
# a git tree of its own: not a tarball unpacked inside someone's repository
if gtop=$(git -C "$top" rev-parse --show-toplevel 2>/dev/null) &&
	[ "$(cd "$gtop" && pwd -P)" = "$(cd "$top" && pwd -P)" ]; then
	if v=$(git -C "$top" describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
		echo "${v#v}"
		exit 0
	fi
	if h=$(git -C "$top" rev-parse --short=10 HEAD 2>/dev/null); then
		d=
		git -C "$top" update-index -q --refresh >/dev/null 2>&1
		git -C "$top" diff-index --quiet HEAD -- 2>/dev/null || d=-dirty
		echo "$base-g$h$d"
		exit 0
	fi
fi
echo "$base"
