/* stage_int.h: stage/'s private face, shared by its .c files. */
#ifndef STAGE_INT_H
#define STAGE_INT_H

#include "dsstage.h"

/* Record which node this host is, for readers outside Slurm:
 * JOBDIR/by-host/<hostname> -> "<node>" (skipped when hosts repeat). */
void ds__stage_note_host(const char *jobdir, const struct ds_node *nd);

/* status.c: the figures of every node, from what the service gathered. */
int ds__status_service_up(const char *jobdir);
int ds__status_print_all(const char *jobdir, long node, char **local, size_t nlocal,
                         int (*local_row)(const char *jobdir, const char *name),
                         unsigned long *nnodes);

#endif
