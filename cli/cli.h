/* cli.h: the commands that live in cli/ (above stage/ and shuffle/). */
#ifndef DS_CLI_H
#define DS_CLI_H

/* run.c: `dstage run`: stage, then serve, in one job step. */
int ds_cmd_run(int argc, char **argv);

#endif
