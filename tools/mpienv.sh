# SPDX-License-Identifier: BSD-3-Clause
# tools/mpienv.sh: which MPI build a script runs, and how it launches it.
# Sourced (after setting $top, the source tree) by tools/demo.sh,
# tools/demo-s3.sh, t/test-lib.sh and bench/benchlib.sh:
#
#   DSTAGE_MPILIB=mpich (default) or openmpi; `make ... MPI=X` exports it
#
# sets ds_mpilib, ds_build (the build tree: build/ or build-openmpi/, the
# Makefile's O), ds_mpiexec (the launcher of that MPI) and, for Open MPI,
# the settings a shared 2-core box needs (docs/mpi.md): more ranks than
# cores (oversubscribe), no binding of ranks to cores (other jobs share
# them), yielding when idle, and, as root (CI, containers), the consent
# Open MPI's mpiexec asks for.  The MPI library reads OMPI_MCA_* itself,
# so they hold under srun too.  Written for /bin/sh.
ds_mpilib=${DSTAGE_MPILIB:-mpich}
case $ds_mpilib in
mpich)
	ds_build="$top/build"
	ds_mpiexec=mpiexec.mpich
	;;
openmpi)
	ds_build="$top/build-openmpi"
	ds_mpiexec=mpiexec.openmpi
	export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
	export OMPI_MCA_mpi_yield_when_idle=1
	if [ "$(id -u)" = 0 ]; then
		export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	fi
	;;
*)
	echo "DSTAGE_MPILIB=$ds_mpilib: mpich or openmpi" >&2
	exit 2
	;;
esac
