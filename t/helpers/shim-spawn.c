/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-spawn: run PROG through posix_spawn (posix_spawnp with -p) with the
 * file actions given, in order, and exit with its status (t/2105).
 *
 *     shim-spawn [-p] [-c DIR] [-f DIR] [-o FD:PATH] [-O FD:PATH] [-d FROM:TO]
 *                [-x FD] [-C FROM] PROG ARG...
 *
 * -c DIR: addchdir_np(DIR); -f DIR: open DIR (O_DIRECTORY) here and
 * addfchdir_np of it; -o FD:PATH: addopen(FD, PATH, O_RDONLY); -O FD:PATH:
 * open PATH here (close-on-exec) on FD; -d FROM:TO: adddup2; -x FD:
 * addclose; -C FROM: addclosefrom_np.  A spawn that fails prints the error
 * and exits 127. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	posix_spawn_file_actions_t fa;
	int opt, usep = 0, rc;
	posix_spawn_file_actions_init(&fa);
	while ((opt = getopt(argc, argv, "+pc:f:o:O:d:x:C:")) != -1) {
		char *colon = strchr(optarg ? optarg : "", ':');
		int a = optarg ? atoi(optarg) : 0, b = colon ? atoi(colon + 1) : 0;
		rc = 0;
		switch (opt) {
		case 'o':
			rc = posix_spawn_file_actions_addopen(&fa, a, colon + 1, O_RDONLY, 0);
			break;
		case 'O': {
			int fd = open(colon + 1, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || dup3(fd, a, O_CLOEXEC) < 0) {
				fprintf(stderr, "shim-spawn: '%s': %s\n", colon + 1,
				        strerror(errno));
				return 1;
			}
			close(fd);
			break;
		}
		case 'd': rc = posix_spawn_file_actions_adddup2(&fa, a, b); break;
		case 'x': rc = posix_spawn_file_actions_addclose(&fa, a); break;
		case 'C': rc = posix_spawn_file_actions_addclosefrom_np(&fa, a); break;
		case 'p': usep = 1; break;
		case 'c':
			rc = posix_spawn_file_actions_addchdir_np(&fa, optarg);
			if (rc) {
				fprintf(stderr, "shim-spawn: addchdir_np: %s\n", strerror(rc));
				return 1;
			}
			break;
		case 'f': {
			int fd = open(optarg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				fprintf(stderr, "shim-spawn: '%s': %s\n", optarg, strerror(errno));
				return 1;
			}
			rc = posix_spawn_file_actions_addfchdir_np(&fa, fd);
			if (rc) {
				fprintf(stderr, "shim-spawn: addfchdir_np: %s\n", strerror(rc));
				return 1;
			}
			break;
		}
		default:
			fprintf(stderr,
			        "usage: shim-spawn [-p] [-c DIR] [-f DIR] [-o FD:PATH] "
			        "[-O FD:PATH] [-d FROM:TO] [-x FD] [-C FROM] PROG ARG...\n");
			return 2;
		}
		if (rc) {
			fprintf(stderr, "shim-spawn: -%c %s: %s\n", opt, optarg, strerror(rc));
			return 1;
		}
	}
	if (optind >= argc) {
		fprintf(stderr,
		        "usage: shim-spawn [-p] [-c DIR] [-f DIR] [-o FD:PATH] [-O FD:PATH] "
		        "[-d FROM:TO] [-x FD] [-C FROM] PROG ARG...\n");
		return 2;
	}
	pid_t pid;
	rc = (usep ? posix_spawnp : posix_spawn)(&pid, argv[optind], &fa, NULL, argv + optind,
	                                         environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		fprintf(stderr, "shim-spawn: '%s': %s\n", argv[optind], strerror(rc));
		return 127;
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
