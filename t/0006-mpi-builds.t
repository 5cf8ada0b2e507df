#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The two MPI builds (docs/mpi.md): `make MPI=openmpi` builds into
# build-openmpi/ beside MPICH's build/, each command linking its own MPI and
# the HDF5 built on it; the suite (DSTAGE_MPILIB, make test MPI=openmpi) runs
# the build it names with that MPI's launcher, as many ranks as it asks on
# a small box; the UCX close workaround is in the MPICH build only; each
# build's `dstage env` names its own preload library.
. "$(dirname "$0")/test-lib.sh"

B_MPICH=$SRCDIR/build
B_OMPI=$SRCDIR/build-openmpi
test_lazy_prereq MPICH_BUILD '[ -x "$B_MPICH/bin/dstage" ]' "no MPICH build (make)"
test_lazy_prereq OPENMPI_BUILD '[ -x "$B_OMPI/bin/dstage" ]' "no Open MPI build (make MPI=openmpi)"
test_lazy_prereq LDD 'command -v ldd && command -v nm' "no ldd or nm (libc-bin, binutils)"

test_expect_success 'make MPI=other: a usage error naming the two' '
	test_status --show out 2 make -s -C "$SRCDIR" -n MPI=lam all >out 2>&1 &&
	grep -q "MPI=lam: mpich or openmpi" out
'

test_expect_success 'the suite runs the build DSTAGE_MPILIB names' '
	case ${DSTAGE_MPILIB:-mpich} in
	mpich) test "$DSTAGE" = "$B_MPICH/bin/dstage" ;;
	openmpi) test "$DSTAGE" = "$B_OMPI/bin/dstage" ;;
	esac &&
	test "$PRELOAD" = "$DSTAGE_TEST_BUILD/lib/libdstage-preload.so" &&
	test -x "$DSTAGE" && test -x "$T/mpi-hostinfo"
'

test_expect_success MPICH_BUILD,LDD 'build/: MPICH and HDF5 on MPICH, no Open MPI' '
	ldd "$B_MPICH/bin/dstage" >libs &&
	test_grep "libmpich\.so" libs && test_grep "libhdf5_mpich" libs &&
	! grep -E "libmpi\.so|openmpi" libs
'

test_expect_success OPENMPI_BUILD,LDD 'build-openmpi/: Open MPI and HDF5 on Open MPI, no MPICH' '
	ldd "$B_OMPI/bin/dstage" >libs &&
	test_grep "libmpi\.so\.40" libs && test_grep "libhdf5_openmpi" libs &&
	! grep -E "mpich" libs &&
	ldd "$B_OMPI/t/mpi-hostinfo" >hlibs && test_grep "libmpi\.so\.40" hlibs
'

test_expect_success MPICH_BUILD,LDD 'the UCX close workaround: exported by the MPICH build for libmpich' '
	nm -D --defined-only "$B_MPICH/bin/dstage" >syms &&
	test_grep -w ucp_disconnect_nb syms
'

test_expect_success OPENMPI_BUILD,LDD 'and absent from the Open MPI build (mpi/ucx_close.c)' '
	nm "$B_OMPI/bin/dstage" >syms &&
	! grep -w ucp_disconnect_nb syms
'

test_expect_success OPENMPI_BUILD 'each build'"'"'s dstage env names its own preload library' '
	mkdir -p src && echo x >src/f &&
	"$T/mkstore" -N 1 -j j1 src "$TRASH/store" >/dev/null &&
	"$B_OMPI/bin/dstage" env --to "$TRASH/store" --job j1 --node 0 >env.o &&
	test_grep "$B_OMPI/lib/libdstage-preload.so" env.o &&
	if [ -x "$B_MPICH/bin/dstage" ]; then
		"$B_MPICH/bin/dstage" env --to "$TRASH/store" --job j1 --node 0 >env.m &&
		test_grep "$B_MPICH/lib/libdstage-preload.so" env.m &&
		! grep -q build-openmpi env.m
	fi
'

test_expect_success MPI 'mpirun_n 4 on this box: four ranks of one job, with the build'"'"'s MPI' '
	mpirun_n 4 "$T/mpi-hostinfo" 1 >ranks 2>err || { cat err; false; } &&
	cat ranks &&
	sed -n "s/^rank \([0-9]*\) .*/\1/p" ranks | sort -n >got &&
	printf "%s\n" 0 1 2 3 >want &&
	test_cmp want got
'

test_done
