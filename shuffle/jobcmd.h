/* SPDX-License-Identifier: BSD-3-Clause */
/* jobcmd.h: the command line and job directory of the commands that talk
 * to a running job's services from anywhere in it (dstage stop, dstage
 * drain). */
#ifndef DS_SHUFFLE_JOBCMD_H
#define DS_SHUFFLE_JOBCMD_H

#include <dirent.h>

struct ds__jobcmd {
	const char *to, *job;
	double timeout; /* --timeout SECS (> 0); the caller sets the default */
	int wait;       /* --wait (only where wait_ok) */
	char *jobdir;   /* the caller frees it */
	DIR *d;         /* jobdir, open; the caller closes it */
};

/* Parse --to DIR [--job ID] [--timeout SECS] [--wait] [--help] and open
 * the job directory.  -1: go on; else the exit status, said (0 after
 * --help, 2 for a usage error, 1 when the job directory cannot be read). */
int ds__jobcmd_args(int argc, char **argv, const char *usage, int wait_ok, struct ds__jobcmd *j);

#endif
