/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/mpi-a2a.c: the MPI_Alltoallv peer of bench/shuffle.sh (not part of
 * dstage; the script compiles it).
 *
 *   mpi-a2a REPS RECV_0 RECV_1 ... RECV_{P-1}
 *
 * Rank k receives RECV_k bytes per round, evenly from the other ranks (the
 * bytes an epoch exchange brings to node k), with one MPI_Alltoallv; a round
 * is repeated REPS times.  Counts past INT_MAX go as blocks of 1 MiB
 * (a derived datatype), so the volume is not limited to 2 GiB.
 * Prints one line per round, from rank 0:
 *   alltoallv SECONDS BYTES          (max over ranks, total bytes moved) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (1u << 20)

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 2 + size || size < 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi-a2a REPS RECV_0 ... RECV_%d\n", size - 1);
		MPI_Finalize();
		return 2;
	}
	int reps = atoi(argv[1]);
	uint64_t *recv = calloc((size_t)size, sizeof(uint64_t)), total = 0;
	for (int k = 0; k < size; k++) {
		/* whole blocks, spread evenly over the senders */
		uint64_t b = strtoull(argv[2 + k], NULL, 10);
		recv[k] = (b + (uint64_t)BLOCK * (size - 1) - 1) / ((uint64_t)BLOCK * (size - 1));
		total += recv[k] * BLOCK * (size - 1);
	}
	MPI_Datatype blk;
	MPI_Type_contiguous(BLOCK, MPI_BYTE, &blk);
	MPI_Type_commit(&blk);
	int *sc = calloc((size_t)size, sizeof(int)), *sd = calloc((size_t)size, sizeof(int));
	int *rc = calloc((size_t)size, sizeof(int)), *rd = calloc((size_t)size, sizeof(int));
	uint64_t sendn = 0, recvn = 0;
	for (int k = 0; k < size; k++) {
		sc[k] = k == rank ? 0 : (int)recv[k];
		rc[k] = k == rank ? 0 : (int)recv[rank];
		sd[k] = (int)sendn;
		rd[k] = (int)recvn;
		sendn += (uint64_t)sc[k];
		recvn += (uint64_t)rc[k];
	}
	char *sb = malloc(sendn * BLOCK + 1), *rb = malloc(recvn * BLOCK + 1);
	if (!sb || !rb) {
		fprintf(stderr, "mpi-a2a: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	/* touch everything first: page faults are not what we measure */
	memset(sb, rank + 1, sendn * BLOCK);
	memset(rb, 0, recvn * BLOCK);
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		MPI_Alltoallv(sb, sc, sd, blk, rb, rc, rd, blk, MPI_COMM_WORLD);
		double dt = MPI_Wtime() - t0, mx;
		MPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0)
			printf("alltoallv %.6f %llu\n", mx, (unsigned long long)total);
		fflush(stdout);
	}
	MPI_Type_free(&blk);
	free(sb);
	free(rb);
	MPI_Finalize();
	return 0;
}
