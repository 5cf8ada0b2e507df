/* stage_int.h: stage/'s private face (shared by its .c files and `dstage run`). */
#ifndef STAGE_INT_H
#define STAGE_INT_H

#include "dsstage.h"

/* Parse stage options.  allow_extra: leave options it does not know to the
 * caller (`dstage run` adds the service's).  Returns 0, or 2 on a usage error
 * (message printed). */
int ds_stage_parse(int argc, char **argv, struct ds_stage_opts *o, int allow_extra);

/* Record which node this host is, for readers outside Slurm:
 * JOBDIR/by-host/<hostname> -> "<node>" (skipped when hosts repeat). */
void ds__stage_note_host(const char *jobdir, const struct ds_node *nd);

#endif
