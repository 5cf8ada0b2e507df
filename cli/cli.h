/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.h: the commands that live in cli/ (above stage/ and shuffle/). */
#ifndef DS_CLI_H
#define DS_CLI_H

/* cmd_run.c: `dstage run`: stage, then serve, in one job step. */
int ds_cmd_run(int argc, char **argv);

/* version.c: `dstage --version`: the version and the MPI, HDF5 and zlib
 * libraries this process runs with. */
#include <stdio.h>
int ds_cli_version(FILE *f);

#endif
