/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-iread: MPI_File_iread_at and MPI_File_iread through ROMIO (MPICH's
 * MPI-IO, which does them with POSIX AIO on a local file system) on FILE;
 * each rank prints the CRC-32 of every block it read, in rank order, so a
 * run on a staged file and one on its native copy compare (t/2106).
 *
 *     mpi-iread FILE BLOCK
 *
 * Rank r reads block r, r+P, ... with iread_at, then its first block again
 * with a seek and iread.  MPI_Wait is polled with MPI_Test under a 20 s
 * bound: a request that never completes ends the run with exit 3 (a
 * failure, never a hang). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

static int wait_bounded(MPI_Request *rq, MPI_Status *st)
{
	double t0 = MPI_Wtime();
	int done = 0;
	while (!done) {
		MPI_Test(rq, &done, st);
		if (!done && MPI_Wtime() - t0 > 20) {
			fprintf(stderr, "mpi-iread: a request did not complete in 20 s\n");
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 3) {
		if (!rank)
			fprintf(stderr, "usage: mpi-iread FILE BLOCK\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int block = atoi(argv[2]);
	MPI_File fh;
	int rc = MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
	if (rc != MPI_SUCCESS) {
		char msg[MPI_MAX_ERROR_STRING];
		int n;
		MPI_Error_string(rc, msg, &n);
		fprintf(stderr, "mpi-iread: '%s': %s\n", argv[1], msg);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Offset fsize;
	MPI_File_get_size(fh, &fsize);
	char *buf = malloc((size_t)block);
	char line[256];
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	int bad = 0;
	for (MPI_Offset off = (MPI_Offset)rank * block; off < fsize && !bad;
	     off += (MPI_Offset)size * block) {
		MPI_Request rq;
		MPI_Status st;
		int got;
		MPI_File_iread_at(fh, off, buf, block, MPI_BYTE, &rq);
		if (wait_bounded(&rq, &st) < 0) {
			bad = 1;
			break;
		}
		MPI_Get_count(&st, MPI_BYTE, &got);
		int n = snprintf(line, sizeof(line), "rank %d iread_at %lld: %d bytes crc %08lx\n",
		                 rank, (long long)off, got,
		                 crc32(0, (unsigned char *)buf, got > 0 ? (unsigned)got : 0));
		if (len + (size_t)n + 1 > cap)
			out = realloc(out, cap *= 2);
		memcpy(out + len, line, (size_t)n);
		len += (size_t)n;
	}
	if (!bad) {
		MPI_Request rq;
		MPI_Status st;
		int got;
		MPI_File_seek(fh, (MPI_Offset)rank * block, MPI_SEEK_SET);
		MPI_File_iread(fh, buf, block, MPI_BYTE, &rq);
		if (wait_bounded(&rq, &st) < 0)
			bad = 1;
		else {
			MPI_Get_count(&st, MPI_BYTE, &got);
			int n = snprintf(line, sizeof(line), "rank %d iread: %d bytes crc %08lx\n",
			                 rank, got,
			                 crc32(0, (unsigned char *)buf,
			                       got > 0 ? (unsigned)got : 0));
			if (len + (size_t)n + 1 > cap)
				out = realloc(out, cap *= 2);
			memcpy(out + len, line, (size_t)n);
			len += (size_t)n;
		}
	}
	if (bad)
		MPI_Abort(MPI_COMM_WORLD, 3);
	out[len] = 0;
	for (int r = 0; r < size; r++) {
		if (r == rank) {
			fputs(out, stdout);
			fflush(stdout);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_File_close(&fh);
	free(out);
	free(buf);
	MPI_Finalize();
	return 0;
}
