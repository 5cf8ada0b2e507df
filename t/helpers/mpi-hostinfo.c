/* SPDX-License-Identifier: BSD-3-Clause */
/* mpi-hostinfo: what a rank sees of its host, and proof of the wire.
 *
 *   mpi-hostinfo [MIB]
 *
 * Each rank prints one line:
 *   rank R host H shm DEV eth0_tx_before TX0 eth0_tx_after TX1 sent BYTES
 * H its hostname, DEV the device number of /dev/shm (a tmpfs of its own on
 * every host of t/lib-hosts.sh), TX0/TX1 the byte counter of its eth0
 * around a ring exchange of MIB MiB (default 8) with its neighbours, BYTES
 * what it sent in that exchange.  With one rank per host, the bytes must
 * leave through eth0: MPI went over the network. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned long long tx_bytes(void)
{
	unsigned long long v = 0;
	FILE *f = fopen("/sys/class/net/eth0/statistics/tx_bytes", "r");
	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	size_t len = (size_t)(argc > 1 ? atol(argv[1]) : 8) << 20;
	char *out = malloc(len), *in = malloc(len);
	if (!out || !in)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(out, rank + 1, len);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	struct stat st;
	unsigned long long dev = stat("/dev/shm", &st) == 0 ? (unsigned long long)st.st_dev : 0;
	MPI_Barrier(MPI_COMM_WORLD);
	unsigned long long t0 = tx_bytes();
	int to = (rank + 1) % size, from = (rank + size - 1) % size;
	/* in 1 MiB messages: no single message size decides the path */
	for (size_t off = 0; off < len; off += 1 << 20) {
		size_t n = len - off < (1u << 20) ? len - off : 1u << 20;
		MPI_Sendrecv(out + off, (int)n, MPI_CHAR, to, 0, in + off, (int)n, MPI_CHAR, from, 0,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	unsigned long long t1 = tx_bytes();
	int bad = 0;
	for (size_t i = 0; i < len; i++)
		bad |= in[i] != (char)(from + 1);
	printf("rank %d host %s shm %llu eth0_tx_before %llu eth0_tx_after %llu sent %zu%s\n", rank,
	       host, dev, t0, t1, size > 1 ? len : 0, bad ? " CORRUPT" : "");
	free(out);
	free(in);
	MPI_Finalize();
	return bad;
}
