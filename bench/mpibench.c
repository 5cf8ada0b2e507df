/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/mpibench.c: MPI peers of bench/run.sh (not part of dstage).
 * Compiled by run.sh with mpicc.mpich; run with mpiexec.mpich.
 *
 *   mpibench alltoallv BYTES SAMPLE REPS
 *       every rank sends BYTES (in SAMPLE-sized pieces, spread evenly over
 *       the other ranks) with one MPI_Alltoallv, REPS times; prints per rep
 *       "alltoallv SECONDS OFFRANK_BYTES_PER_RANK CPU_SECONDS" (rank 0, max
 *       over ranks; CPU: the calling thread's, waiting included)
 *   mpibench bcast MINBYTES MAXBYTES REPS
 *       MPI_Bcast from rank 0 of 1 MiB .. MAX (powers of 2), REPS each;
 *       prints "bcast BYTES SECONDS" (median of REPS, max over ranks)
 *   mpibench get BYTES REPS [SAMPLE]
 *       rank 0 MPI_Get's BYTES from rank 1's window (passive target,
 *       lock_all + flush), in one get or in gets of SAMPLE bytes with one
 *       flush at the end: "get BYTES SECONDS CPU_SECONDS" per rep (the
 *       getting thread's CPU time: the copy itself on a single-copy
 *       transport; environment:
 *       MPIBENCH_WIN=create, MPIBENCH_BOTH=1, MPIBENCH_SLEEP=S, MPIBENCH_DST=shm,
 *       MPIBENCH_MT=1, see below) */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* CPU seconds of the calling thread */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double med(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	/* MPIBENCH_MT=1: MPI_THREAD_MULTIPLE, as dstage serve asks for */
	const char *mt = getenv("MPIBENCH_MT");
	if (mt && atoi(mt)) {
		int prov;
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
	} else {
		MPI_Init(&argc, &argv);
	}
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2)
		MPI_Abort(MPI_COMM_WORLD, 2);
	if (!strcmp(argv[1], "alltoallv") && argc == 5) {
		long long bytes = atoll(argv[2]), sample = atoll(argv[3]);
		int reps = atoi(argv[4]);
		int peers = size > 1 ? size - 1 : 1;
		long long nsamp = bytes / sample;
		int *sc = calloc((size_t)size, sizeof(int)), *sd = calloc((size_t)size, sizeof(int));
		int *rc = calloc((size_t)size, sizeof(int)), *rd = calloc((size_t)size, sizeof(int));
		/* samples dealt round robin over the other ranks */
		for (long long i = 0; i < nsamp; i++) {
			int to = (int)((rank + 1 + i % peers) % size);
			sc[to] += (int)sample;
		}
		MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
		long long st = 0, rt = 0;
		for (int k = 0; k < size; k++) {
			sd[k] = (int)st;
			rd[k] = (int)rt;
			st += sc[k];
			rt += rc[k];
		}
		char *sb = malloc((size_t)st + 1), *rb = malloc((size_t)rt + 1);
		memset(sb, rank + 1, (size_t)st);
		memset(rb, 0, (size_t)rt);
		for (int r = 0; r < reps; r++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime(), c0 = cpu_now();
			MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
			double tc[2] = {MPI_Wtime() - t0, cpu_now() - c0}, tmax[2];
			MPI_Reduce(tc, tmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
			if (!rank)
				printf("alltoallv %.6f %lld %.6f\n", tmax[0], st, tmax[1]);
		}
	} else if (!strcmp(argv[1], "bcast") && argc == 5) {
		long long lo = atoll(argv[2]), hi = atoll(argv[3]);
		int reps = atoi(argv[4]);
		char *b = malloc((size_t)hi);
		memset(b, 7, (size_t)hi);
		double *v = malloc(sizeof(double) * (size_t)reps);
		for (long long n = lo; n <= hi; n *= 2) {
			for (int r = 0; r < reps; r++) {
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				MPI_Bcast(b, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
				double t = MPI_Wtime() - t0;
				MPI_Reduce(&t, &v[r], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
			}
			if (!rank)
				printf("bcast %lld %.6f\n", n, med(v, reps));
		}
	} else if (!strcmp(argv[1], "get") && (argc == 4 || argc == 5) && size >= 2) {
		long long bytes = atoll(argv[2]);
		int reps = atoi(argv[3]);
		long long sample = argc == 5 ? atoll(argv[4]) : bytes;
		/* MPIBENCH_WIN=create: MPI_Win_create over a MAP_SHARED file in
		 * /dev/shm, as dstage serve exposes its store (default:
		 * MPI_Win_allocate).  MPIBENCH_BOTH=1: both ranks get from each
		 * other at once, as the two services of the exchange do.
		 * MPIBENCH_SLEEP=S: the target sleeps S seconds outside MPI after
		 * the barrier; a get that completes sooner did not need it. */
		const char *wv = getenv("MPIBENCH_WIN"), *bv = getenv("MPIBENCH_BOTH");
		const char *sv = getenv("MPIBENCH_SLEEP");
		int create = wv && !strcmp(wv, "create"), both = bv && atoi(bv);
		double nap = sv ? atof(sv) : 0;
		int src = rank == 0 || both, tgt = rank == 1 || both;
		char *base = NULL;
		MPI_Win win;
		if (create) {
			if (tgt) {
				char path[64];
				snprintf(path, sizeof(path), "/dev/shm/mpibench.%d.%d",
				         (int)getpid(), rank);
				int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
				if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
					MPI_Abort(MPI_COMM_WORLD, 1);
				base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
				            MAP_SHARED | MAP_POPULATE, fd, 0);
				close(fd);
				unlink(path);
				if (base == MAP_FAILED)
					MPI_Abort(MPI_COMM_WORLD, 1);
			}
			MPI_Win_create(base, tgt ? (MPI_Aint)bytes : 0, 1, MPI_INFO_NULL,
			               MPI_COMM_WORLD, &win);
		} else {
			MPI_Win_allocate(tgt ? (MPI_Aint)bytes : 0, 1, MPI_INFO_NULL,
			                 MPI_COMM_WORLD, &base, &win);
		}
		if (tgt)
			memset(base, 3, (size_t)bytes);
		char *dst = NULL;
		if (src) {
			/* MPIBENCH_DST=shm: into a populated MAP_SHARED file in
			 * /dev/shm, as the service's epoch cache */
			const char *dv = getenv("MPIBENCH_DST");
			int dfd = -1;
			if (dv && !strcmp(dv, "shm")) {
				char path[64];
				snprintf(path, sizeof(path), "/dev/shm/mpibench-dst.%d.%d",
				         (int)getpid(), rank);
				dfd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
				if (dfd < 0 || ftruncate(dfd, (off_t)bytes) < 0)
					MPI_Abort(MPI_COMM_WORLD, 1);
				unlink(path);
			}
			dst = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
			           dfd >= 0 ? MAP_SHARED | MAP_POPULATE
			                    : MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
			           dfd, 0);
			if (dfd >= 0)
				close(dfd);
			if (dst == MAP_FAILED)
				MPI_Abort(MPI_COMM_WORLD, 1);
			memset(dst, 0, (size_t)bytes);
		}
		MPI_Win_lock_all(0, win);
		int peer = rank == 0 ? 1 : 0;
		for (int r = 0; r < reps; r++) {
			MPI_Barrier(MPI_COMM_WORLD);
			if (nap > 0 && rank == 1 && !both) {
				usleep((useconds_t)(nap * 1e6));
				continue;
			}
			if (!src)
				continue;
			double t0 = MPI_Wtime(), c0 = cpu_now();
			for (long long o = 0; o < bytes; o += sample) {
				int n = (int)(bytes - o < sample ? bytes - o : sample);
				MPI_Get(dst + o, n, MPI_BYTE, peer, (MPI_Aint)o, n, MPI_BYTE, win);
			}
			MPI_Win_flush(peer, win);
			double tc[2] = {MPI_Wtime() - t0, cpu_now() - c0}, tmax[2] = {tc[0], tc[1]};
			if (both)
				MPI_Reduce(tc, tmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
			if (!rank)
				printf("get %lld %.6f %.6f\n", bytes, tmax[0], tmax[1]);
		}
		MPI_Win_unlock_all(win);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_free(&win);
		if (create && base)
			munmap(base, (size_t)bytes);
	} else {
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
