#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tools/modulefile.sh PREFIX VERSION [MODULE...]: the Lmod module file of a
# dstage installed in PREFIX, on stdout (`make install` writes it to
# MODULEDIR/dstage/VERSION.lua).  It puts the command on PATH, the man page
# on MANPATH and the Python helper (import dstage) on PYTHONPATH, and sets
# DSTAGE_ROOT (the prefix, as EasyBuild's EBROOT* variables); the
# modules named after VERSION (the MPI and HDF5 dstage was built with, at a
# site that provides them as modules) are loaded first.  It does not set
# LD_PRELOAD: the shim belongs in the readers of one job only, through
# `eval "$(dstage env --to DIR)"` (docs/guide.md).
set -eu
[ $# -ge 2 ] || { echo "usage: tools/modulefile.sh PREFIX VERSION [MODULE...]" >&2; exit 2; }
prefix=$1 version=$2
shift 2
case $prefix in
/*) ;;
*) echo "modulefile.sh: PREFIX '$prefix': must be an absolute path" >&2; exit 2 ;;
esac
# a Lua long string holds anything but its closing bracket
case $prefix$version in
*']]'* | *'
'*) echo "modulefile.sh: '$prefix' '$version': cannot be quoted in Lua" >&2; exit 2 ;;
esac
cat <<LUA
-- dstage $version, installed in $prefix: written by make install
-- (tools/modulefile.sh); \`module load dstage\`.
help([[
dstage $version: stage a training dataset into node memory, shuffle it
every epoch over MPI, and show it to unmodified readers through an
LD_PRELOAD shim.  man dstage; dstage --version names the MPI and HDF5
libraries it runs with.  In a job: eval "\$(dstage env --to DIR)".
Licence: BSD-3-Clause ($prefix/share/doc/dstage/LICENSE).
]])
whatis("Name: dstage")
whatis("Version: $version")
whatis("Category: data staging, I/O")
whatis("Description: stage, shuffle and serve deep-learning datasets from node memory")
whatis("License: BSD-3-Clause")

LUA
for m in "$@"; do
	case $m in
	*'"'* | *'\'*) echo "modulefile.sh: module '$m': cannot be quoted in Lua" >&2; exit 2 ;;
	esac
	printf 'depends_on("%s")\n' "$m"
done
cat <<LUA
local root = [[$prefix]]
prepend_path("PATH", pathJoin(root, "bin"))
prepend_path("MANPATH", pathJoin(root, "share/man"))
-- an empty entry: man keeps searching its default path (a MANPATH of
-- dstage's folder alone would hide every other page)
append_path("MANPATH", "")
prepend_path("PYTHONPATH", pathJoin(root, "share/dstage/python"))
setenv("DSTAGE_ROOT", root)
LUA
