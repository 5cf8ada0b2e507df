/* SPDX-License-Identifier: BSD-3-Clause */
/* agree.c: waiting without spinning, the failure agreement and the chunked
 * broadcast: the one implementation stage, pack and serve use (dsmpi.h). */
#include "dscommon.h"
#include "dsmpi.h"

#include <string.h>
#include <time.h>

#define WAIT_SLEEP_NS 200000L /* between two MPI_Test of a wait */
#define BCAST_CHUNK (1u << 30) /* bytes per MPI call: counts are int */

static int mpi_up(void)
{
	int up = 0, down = 0;
	MPI_Initialized(&up);
	if (up)
		MPI_Finalized(&down);
	return up && !down;
}

int ds_mpi_wait(MPI_Request *req)
{
	struct timespec ts = {0, WAIT_SLEEP_NS};
	for (;;) {
		int done = 0;
		int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return rc;
		if (done)
			return 0;
		nanosleep(&ts, NULL);
	}
}

int ds_agree_start(struct ds_agree *a, MPI_Comm comm, int n)
{
	a->n = n < 1 ? 1 : n > DS_AGREE_MAX ? DS_AGREE_MAX : n;
	a->inflight = 0;
	a->mpierr = MPI_SUCCESS;
	a->started = ds_now();
	memset(a->all, 0, sizeof(a->all));
	int rc = MPI_Iallreduce(a->mine, a->all, a->n, MPI_INT, MPI_MAX, comm, &a->req);
	if (rc != MPI_SUCCESS) {
		a->mpierr = rc;
		return -EIO;
	}
	a->inflight = 1;
	return 0;
}

int ds_agree_test(struct ds_agree *a, double timeout)
{
	if (!a->inflight)
		return 1;
	int done = 0;
	int rc = MPI_Test(&a->req, &done, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS) {
		a->inflight = 0;
		a->mpierr = rc;
		return -EIO;
	}
	if (done) {
		a->inflight = 0;
		return 1;
	}
	if (timeout > 0 && ds_now() - a->started > timeout)
		return -ETIMEDOUT;
	return 0;
}

int ds_any_failed(MPI_Comm comm, int err)
{
	int size = 1;
	if (!mpi_up() || comm == MPI_COMM_NULL || MPI_Comm_size(comm, &size) != MPI_SUCCESS ||
	    size == 1)
		return err != 0;
	struct ds_agree a;
	a.mine[0] = err != 0;
	int rc = ds_agree_start(&a, comm, 1);
	if (!rc) {
		rc = ds_mpi_wait(&a.req);
		a.mpierr = rc;
	}
	if (rc) {
		/* a communicator that returns errors (the service's): the
		 * agreement itself failed, which is a failure, said as MPI says it */
		char m[MPI_MAX_ERROR_STRING];
		ds_error("MPI_Iallreduce (agreeing on failure): %s",
		         ds_mpi_strerror(a.mpierr, m, sizeof(m)));
		return 1;
	}
	return a.all[0];
}

int ds_mpi_bcast(MPI_Comm comm, void *buf, uint64_t len, int root)
{
	int size = 1;
	if (!mpi_up() || MPI_Comm_size(comm, &size) != MPI_SUCCESS || size == 1)
		return 0;
	for (uint64_t off = 0; off < len; off += BCAST_CHUNK) {
		int n = len - off < BCAST_CHUNK ? (int)(len - off) : (int)BCAST_CHUNK;
		MPI_Request req;
		int rc = MPI_Ibcast((char *)buf + off, n, MPI_BYTE, root, comm, &req);
		if (!rc)
			rc = ds_mpi_wait(&req);
		if (rc)
			return rc;
	}
	return 0;
}
