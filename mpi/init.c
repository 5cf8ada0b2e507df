/* SPDX-License-Identifier: BSD-3-Clause */
/* init.c: MPI_Init_thread with one thread-level policy (dsmpi.h). */
#include "dscommon.h"
#include "dsmpi.h"

#include <stdio.h>

static int ask = MPI_THREAD_FUNNELED, need = MPI_THREAD_FUNNELED;
static int given = MPI_THREAD_SINGLE; /* what ds_mpi_init got */

void ds_mpi_want(int ask_level, int need_level)
{
	if (ask_level != DS_MPI_NONE) {
		ask = ask_level;
		need = need_level < ask_level ? need_level : ask_level;
	}
}

int ds_mpi_provided(void) { return given; }

const char *ds_mpi_level_name(int level)
{
	switch (level) {
	case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
	case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
	case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
	case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
	}
	return "an unknown thread level";
}

const char *ds_mpi_strerror(int code, char *buf, int len)
{
	int n = 0;
	if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS || n <= 0)
		snprintf(buf, (size_t)len, "MPI error %d", code);
	return buf;
}

int ds_mpi_init(int *argc, char ***argv)
{
	int provided = MPI_THREAD_SINGLE, rank = 0;
	MPI_Init_thread(argc, argv, ask, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	/* tests: an MPI built without thread support (DSTAGE_FAULT=mpi.thread
	 * makes this rank see MPI_THREAD_SINGLE) */
	if (ds_fault("mpi.thread", rank))
		provided = MPI_THREAD_SINGLE;
	/* tests: an MPI that gives MPI_THREAD_FUNNELED at most (a command that
	 * asks for more and needs no more must run, in its fallback) */
	if (ds_fault("mpi.funneled", rank) && provided > MPI_THREAD_FUNNELED)
		provided = MPI_THREAD_FUNNELED;
	given = provided;
	/* MPI may give different ranks different levels: agree, so that all
	 * leave together */
	if (ds_any_failed(MPI_COMM_WORLD, provided < need)) {
		if (provided < need)
			ds_error("this MPI gives %s, the command needs %s: use an MPI built with "
			         "thread support (MPICH: --enable-threads=multiple)",
			         ds_mpi_level_name(provided), ds_mpi_level_name(need));
		MPI_Finalize();
		return 1;
	}
	return 0;
}
