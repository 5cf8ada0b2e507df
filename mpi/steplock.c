/* SPDX-License-Identifier: BSD-3-Clause */
/* steplock.c: a job step takes its job directory's lock (common/dslock.h).
 *
 * The job directory is per node-local DIR, and a flock is per process: so
 * of the ranks of a step that see the same DIR on the same host (the ranks
 * of a node, simulated nodes sharing one DIR, Slurm "nodes" on one
 * machine), the first takes the lock for all; on a real cluster that is
 * one rank per node, each on its own node's directory.  The lock dies with
 * its holder; a step whose holder dies is ended by the launcher anyway. */
#include "dscommon.h"
#include "dsindex.h"
#include "dslock.h"
#include "dsmpi.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct lock_key {
	char host[256];
	uint64_t dev, ino, hash; /* of DIR; hash of its name when it cannot be stat'ed */
};

void ds_lock_refusal(const char *jobdir, const char *to, const char *who, int rc)
{
	int service = (strstr(who, "dstage serve") || strstr(who, "dstage run")) &&
	              !strstr(who, "leaving");
	if (rc == -EBUSY && *who && service)
		ds_error("'%s': in use by %s: stop the service first (dstage stop --to %s)", jobdir, who,
		         to);
	else if (rc == -EBUSY && *who)
		ds_error("'%s': in use by %s: one stage, serve or clean of a job at a time", jobdir, who);
	else if (rc == -EBUSY)
		ds_error("'%s': in use by another dstage (starting): one stage, serve or clean of a job "
		         "at a time", jobdir);
	else if (rc == -ENOENT)
		ds_error("'%s': not staged (no such directory under '%s'): run dstage stage first", jobdir, to);
	else if (rc == -EPERM)
		ds_error("'%s/" DS_LOCK_NAME "': not a regular file of this user", jobdir);
	else
		ds_error("'%s/" DS_LOCK_NAME "': %s", jobdir, ds_strerror(rc));
}

int ds_step_lock(MPI_Comm world, const char *to, const char *job, const char *what, int create,
                 int *held)
{
	int rank, size, rc = 0;
	MPI_Comm_rank(world, &rank);
	MPI_Comm_size(world, &size);
	*held = 0;
	char *jobdir = ds_store_jobdir(to, job);
	struct lock_key k;
	memset(&k, 0, sizeof(k));
	gethostname(k.host, sizeof(k.host) - 1);
	if (create)
		(void)ds_mkdir_p(to, 0755); /* errors are reported by the taker below */
	struct stat st;
	if (stat(to, &st) == 0) {
		k.dev = st.st_dev;
		k.ino = st.st_ino;
	} else {
		k.hash = 1469598103934665603ull; /* FNV-1a of the name */
		for (const char *p = to; *p; p++)
			k.hash = (k.hash ^ (unsigned char)*p) * 1099511628211ull;
	}
	struct lock_key *all = ds_xcalloc(size, sizeof(k));
	MPI_Allgather(&k, sizeof(k), MPI_BYTE, all, sizeof(k), MPI_BYTE, world);
	int first = 1;
	for (int i = 0; i < rank && first; i++)
		first = memcmp(&all[i], &k, sizeof(k)) != 0;
	free(all);
	if (first) {
		char who[384];
		if (create)
			rc = ds_jobdir_make(to, jobdir);
		if (!rc) {
			rc = ds_joblock_take(jobdir, what, who, sizeof(who));
			if (rc)
				ds_lock_refusal(jobdir, to, who, rc);
			else
				*held = 1;
		}
	}
	if (ds_any_failed(world, rc)) {
		if (*held)
			ds_joblock_drop(jobdir);
		*held = 0;
		free(jobdir);
		return 1;
	}
	free(jobdir);
	return 0;
}

void ds_step_unlock(const char *to, const char *job, int held)
{
	if (!held)
		return;
	char *jobdir = ds_store_jobdir(to, job);
	ds_joblock_drop(jobdir);
	free(jobdir);
}
