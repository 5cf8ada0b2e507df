#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The version from one place (tools/version.sh: git describe in a git tree
# of its own, else the VERSION file), and `dstage --version`: that version
# and the MPI, HDF5 and zlib libraries the process runs with, for bug
# reports, without starting MPI.
. "$(dirname "$0")/test-lib.sh"

VS="$SRCDIR/tools/version.sh"
test_lazy_prereq GIT 'command -v git' "git not installed"

# (no launcher: no mpiexec, no PMI in the environment; "-dirty" aside, as
# the tree may have been edited since the build: a test script, say)
test_expect_success 'dstage --version: the version of tools/version.sh first, without a launcher' '
	env -u PMI_RANK -u PMI_FD -u PMI_PORT -u HYDRA_CONTROL_FD timeout 20 "$DSTAGE" --version >out &&
	cat out &&
	echo "dstage $(sh "$VS")" | sed "s/-dirty\$//" >want &&
	head -1 out | sed "s/-dirty\$//" >got && test_cmp want got
'

# the libraries as the MPI and HDF5 this machine links (the same pkg-config
# name as the Makefile) report themselves, from a program of our own
test_expect_success MPICC 'the MPI library and HDF5 it names are those the process runs with' '
	cat >lib.c <<-\EOC &&
	#include <hdf5.h>
	#include <mpi.h>
	#include <stdio.h>
	#include <string.h>
	int main(void)
	{
		char s[MPI_MAX_LIBRARY_VERSION_STRING + 1];
		int n = 0;
		unsigned a, b, c;
		MPI_Get_library_version(s, &n);
		s[n] = 0;
		s[strcspn(s, "\n")] = 0;
		H5get_libversion(&a, &b, &c);
		printf("%s\n%u.%u.%u\n", s, a, b, c);
		return 0;
	}
	EOC
	mpicc.mpich $(pkg-config --cflags hdf5-mpich) -o lib lib.c $(pkg-config --libs hdf5-mpich) &&
	./lib >lib.out &&
	mpi=$(sed -n 1p lib.out | sed "s/[[:space:]]*\$//") && h5=$(sed -n 2p lib.out) &&
	test -n "$mpi" && test -n "$h5" &&
	grep -F "MPI library: $mpi" out &&
	test_grep "^MPI standard: [0-9]\.[0-9]\$" out &&
	grep "^HDF5: $h5 (built with [0-9.]*)" out &&
	test_grep "^zlib: [0-9]" out
'

test_expect_success 'outside a git tree: the VERSION file' '
	mkdir -p rel/tools && cp "$VS" rel/tools/ && echo 7.7.7 >rel/VERSION &&
	GIT_CEILING_DIRECTORIES="$TRASH" sh rel/tools/version.sh >v && echo 7.7.7 >want && test_cmp want v
'

test_expect_success GIT 'a tarball unpacked inside another git repository: still the VERSION file' '
	git init -q outer && mkdir -p outer/sub/tools && cp "$VS" outer/sub/tools/ &&
	echo 7.7.8 >outer/sub/VERSION &&
	git -C outer add . && git -C outer -c user.name=t -c user.email=t@t commit -qm x &&
	sh outer/sub/tools/version.sh >v && echo 7.7.8 >want && test_cmp want v
'

test_expect_success GIT 'a git tree: VERSION-gHASH, -dirty with changes, the tag vX.Y.Z once tagged' '
	git init -q g && mkdir -p g/tools && cp "$VS" g/tools/ && echo 7.7.9 >g/VERSION &&
	git -C g add . && git -C g -c user.name=t -c user.email=t@t commit -qm x &&
	h=$(git -C g rev-parse --short=10 HEAD) &&
	sh g/tools/version.sh >v && echo "7.7.9-g$h" >want && test_cmp want v &&
	echo "# more" >>g/tools/version.sh && sh g/tools/version.sh >v && echo "7.7.9-g$h-dirty" >want &&
	test_cmp want v &&
	git -C g checkout -q tools/version.sh && git -C g tag v7.8.0 &&
	sh g/tools/version.sh >v && echo 7.8.0 >want && test_cmp want v
'

test_done
