/* SPDX-License-Identifier: BSD-3-Clause */
/* jobcmd.c: the command line of dstage stop and dstage drain (dsmpi.h). */
#include "dscommon.h"
#include "dsindex.h"
#include "dsmpi.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

int ds_jobcmd_args(int argc, char **argv, const char *usage, int wait_ok, struct ds_jobcmd *j)
{
	static const struct option lo[] = {{"to", required_argument, 0, 't'},
	                                   {"job", required_argument, 0, 'j'},
	                                   {"wait", no_argument, 0, 'w'},
	                                   {"timeout", required_argument, 0, 'T'},
	                                   {"help", no_argument, 0, 'h'},
	                                   {0, 0, 0, 0}};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't': j->to = optarg; break;
		case 'j': j->job = optarg; break;
		case 'w':
			if (!wait_ok) {
				fputs(usage, stderr);
				return 2;
			}
			j->wait = 1;
			break;
		case 'T':
			if (ds_parse_double(optarg, &j->timeout) || !(j->timeout > 0)) {
				ds_error("--timeout '%s': not a number of seconds", optarg);
				return 2;
			}
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (!j->to || optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	j->jobdir = ds_store_jobdir(j->to, j->job && *j->job ? j->job : NULL);
	j->d = opendir(j->jobdir);
	if (!j->d) {
		ds_error("'%s': %s", j->jobdir, strerror(errno));
		free(j->jobdir);
		j->jobdir = NULL;
		return 1;
	}
	return -1;
}
