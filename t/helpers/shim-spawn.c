/* shim-spawn: run PROG through posix_spawn (posix_spawnp with -p), its cwd
 * set by a file action, and exit with its status (t/2105).
 *
 *     shim-spawn [-p] [-c DIR | -f DIR] PROG ARG...
 *
 * -c DIR: posix_spawn_file_actions_addchdir_np(DIR); -f DIR: open DIR
 * (O_DIRECTORY) and addfchdir_np of it.  A spawn that fails prints the
 * error and exits 127. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	posix_spawn_file_actions_t fa;
	int opt, usep = 0, rc;
	posix_spawn_file_actions_init(&fa);
	while ((opt = getopt(argc, argv, "+pc:f:")) != -1) {
		switch (opt) {
		case 'p': usep = 1; break;
		case 'c': rc = posix_spawn_file_actions_addchdir_np(&fa, optarg);
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
			fprintf(stderr, "usage: shim-spawn [-p] [-c DIR | -f DIR] PROG ARG...\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: shim-spawn [-p] [-c DIR | -f DIR] PROG ARG...\n");
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
