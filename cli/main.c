/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c: the dstage command: one binary, one subcommand per step.
 *
 * The top of the module graph: cli/ includes every folder's public header
 * and nothing includes cli/.  The command table says, for each command, the
 * MPI thread level it needs (mpi/dsmpi.h: the policy), or that it needs no
 * MPI; a command initialises MPI itself (ds_mpi_init), after its options,
 * so that --help and usage errors never start MPI. */
#include "cli.h"
#include "dscommon.h"
#include "dsmpi.h"
#include "dsoutputs.h"
#include "dspack.h"
#include "dsserve.h"
#include "dsstage.h"

#include <stdio.h>
#include <string.h>

/* The MPI thread levels of the commands that use MPI (dsmpi.h): the level
 * each asks for, and the level it cannot do without.  Every MPI call is
 * made by the main thread, threads of their own besides, except the
 * service's socket thread, which fetches remote reads itself when MPI
 * gives MPI_THREAD_MULTIPLE (shuffle/direct.c) and leaves them to the main
 * thread otherwise.  Run is stage then serve: the higher of the two. */
#define FUNNELED MPI_THREAD_FUNNELED
#define MULTIPLE MPI_THREAD_MULTIPLE
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define PACK_ASK FUNNELED /* under mpiexec only (hdf5/pack.c) */
#define PACK_NEED FUNNELED
#define STAGE_ASK FUNNELED
#define STAGE_NEED FUNNELED
#define SERVE_ASK MULTIPLE
#define SERVE_NEED FUNNELED
#define RUN_ASK MAX(STAGE_ASK, SERVE_ASK)
#define RUN_NEED MAX(STAGE_NEED, SERVE_NEED)
#define NO_MPI DS_MPI_NONE, DS_MPI_NONE

static const struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	int mpi_ask;  /* the thread level it initialises MPI with, or DS_MPI_NONE */
	int mpi_need; /* the level below which it cannot run */
	const char *summary;
} cmds[] = {
	{"pack", ds_cmd_pack, PACK_ASK, PACK_NEED,
	 "pack a tree into HDF5 partitions and a manifest (serial or under mpiexec)"},
	{"verify", ds_cmd_verify, NO_MPI, "check a pack's structure and every checksum"},
	{"ls", ds_cmd_ls, NO_MPI, "list what a pack holds"},
	{"cat", ds_cmd_cat, NO_MPI, "write one file of a pack to stdout"},
	{"stage", ds_cmd_stage, STAGE_ASK, STAGE_NEED, "MPI job step: stage a pack into node-local storage"},
	{"serve", ds_cmd_serve, SERVE_ASK, SERVE_NEED,
	 "MPI job step: run the node service (remote reads, epoch shuffle)"},
	{"run", ds_cmd_run, RUN_ASK, RUN_NEED, "MPI job step: stage, then serve"},
	{"env", ds_cmd_env, NO_MPI, "print the environment a reader on this node needs"},
	{"status", ds_cmd_status, NO_MPI, "per-node figures of a staged job"},
	{"epoch", ds_cmd_epoch, NO_MPI,
	 "epoch lists, node sets after a loss, exact resume from a checkpoint"},
	{"stop", ds_cmd_stop, NO_MPI, "stop the node service on every node"},
	{"drain", ds_cmd_drain, NO_MPI, "wait until every closed output is on the shared file system"},
	{"clean", ds_cmd_clean, NO_MPI, "remove this job's node store"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: dstage COMMAND [OPTIONS] ...\n\n"
	           "Stage a training dataset into node memory, shuffle it every epoch over MPI,\n"
	           "and show it to unmodified readers through libdstage-preload.so.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\n'dstage COMMAND --help' lists the options of a command.\n"
	           "'dstage --version': the version, and the MPI and HDF5 libraries it runs with.\n"
	           "environment: DSTAGE_MOUNT (default /dstage), DSTAGE_NODE, DSTAGE_LOG "
	           "(error, warn, info, debug)\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		return ds_cli_version(stdout);
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		ds_log_set_cmd(cmds[i].name);
		ds_log_init(0);
		ds_mpi_want(cmds[i].mpi_ask, cmds[i].mpi_need);
		return cmds[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "dstage: '%s': unknown command (see 'dstage --help')\n", argv[1]);
	return 2;
}
