/* SPDX-License-Identifier: BSD-3-Clause */
/* status.c: `dstage status` beyond this host: the figures of every node of
 * the job from JOBDIR/status.all (dsstatus.h), which the running service
 * gathers over MPI; and whether a service answers here at all. */
#include "dscommon.h"
#include "dsproto.h"
#include "dsstatus.h"
#include "stage_int.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* 1 when a node service listens on a NODEDIR/sock of this job here. */
int ds__status_service_up(const char *jobdir)
{
	DIR *d = opendir(jobdir);
	if (!d)
		return 0;
	int up = 0;
	struct dirent *de;
	while (!up && (de = readdir(d))) {
		uint64_t k;
		if (ds_parse_u64(de->d_name, &k))
			continue;
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/" DS_SOCK_NAME, jobdir,
		                     de->d_name) >= sizeof(sa.sun_path))
			continue;
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		/* a listening socket accepts (the backlog), a dead one refuses */
		up = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
	}
	closedir(d);
	return up;
}

/* Print the row of every node (or only NODE >= 0) from JOBDIR/status.all,
 * in the columns of the local rows; the number of nodes in *nnodes.  The
 * nodes stored here (LOCAL, NLOCAL names) are printed by LOCAL_ROW instead,
 * live: the gathered figures are up to a gather period old.
 * 0, -ENOENT when there is no such file, -EINVAL when it is not one. */
int ds__status_print_all(const char *jobdir, long node, char **local, size_t nlocal,
                         int (*local_row)(const char *jobdir, const char *name),
                         unsigned long *nnodes, const uint64_t *spill, size_t nspill)
{
	char path[PATH_MAX], magic[32];
	if (ds_store_path(path, sizeof(path), jobdir, DS_STATUS_ALL))
		return -ENAMETOOLONG;
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	unsigned long n = 0;
	int rc = 0;
	if (fscanf(f, "%31s %lu", magic, &n) != 2 || strcmp(magic, DS_STATUS_MAGIC)) {
		ds_error("'%s': not a status file of this dstage", path);
		fclose(f);
		return -EINVAL;
	}
	for (unsigned long i = 0; i < n; i++) {
		unsigned long long v[DS_STATUS_FIELDS];
		for (int k = 0; k < DS_STATUS_FIELDS; k++) {
			if (fscanf(f, "%llu", &v[k]) != 1) {
				ds_error("'%s': cut short at node %lu", path, i);
				fclose(f);
				return -EINVAL;
			}
		}
		if (node >= 0 && v[0] != (unsigned long long)node)
			continue;
		size_t j = 0;
		while (j < nlocal && strtoull(local[j], NULL, 10) != v[0])
			j++;
		if (j < nlocal) {
			if (local_row(jobdir, local[j]))
				rc = 1;
			continue;
		}
		char a[32], b[32], c[32], d[32];
		uint64_t sp = v[0] < nspill && spill[v[0]] <= v[3] ? spill[v[0]] : 0;
		char e[32];
		printf("%-5llu %9llu %10s %10s %7llu %7llu %7llu %7llu %7llu %6s %6llu %6llu/%-6llu %10s "
		       "%10s %10s\n",
		       v[0], v[1], ds_fmt_size(v[2], a, sizeof(a)), ds_fmt_size(v[3], b, sizeof(b)), v[4],
		       v[5], v[6], v[7], v[8], "up", v[9], v[10], v[11], ds_fmt_size(v[12], c, sizeof(c)),
		       ds_fmt_size(v[3] - sp, d, sizeof(d)), ds_fmt_size(sp, e, sizeof(e)));
	}
	fclose(f);
	*nnodes = n;
	return rc;
}
