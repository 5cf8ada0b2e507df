/* SPDX-License-Identifier: BSD-3-Clause */
/* dsserve.h: the node service (remote reads, epoch shuffle over MPI RMA). */
#ifndef DSSERVE_H
#define DSSERVE_H

int ds_cmd_serve(int argc, char **argv);
int ds_cmd_stop(int argc, char **argv);
int ds_cmd_drain(int argc, char **argv);
/* `dstage status`: one line of node NAME's write-once outputs (pending and
 * drained files and bytes, the last drained), when it has any. */
void ds_outputs_status_line(const char *jobdir, const char *name);
/* `dstage clean`: remove the output areas of jobdir's nodes that live
 * elsewhere (--outputs-to DIR/dstage.<uid>.<job>/<node>.out). */
void ds_outputs_clean(const char *jobdir);

#endif
