/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-mktemp KIND TEMPLATE [SUFFIXLEN]: make one temporary file (or
 * directory) with a libc function of the mkstemp family, mkdtemp or mkfifo,
 * and print what happened: "ok NAME" or "KIND: 'TEMPLATE': REASON" on stderr
 * with exit status 1.  Those functions reach the kernel through libc's
 * internal aliases, not the PLT: the shim must wrap them themselves. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: shim-mktemp KIND TEMPLATE [SUFFIXLEN]\n");
		return 2;
	}
	char t[4096];
	snprintf(t, sizeof(t), "%s", argv[2]);
	const char *k = argv[1];
	int sl = argc > 3 ? atoi(argv[3]) : 0;
	int rc;
	if (!strcmp(k, "mkstemp"))
		rc = mkstemp(t);
	else if (!strcmp(k, "mkstemp64"))
		rc = mkstemp64(t);
	else if (!strcmp(k, "mkostemp"))
		rc = mkostemp(t, O_CLOEXEC);
	else if (!strcmp(k, "mkstemps"))
		rc = mkstemps(t, sl);
	else if (!strcmp(k, "mkostemps"))
		rc = mkostemps(t, sl, O_CLOEXEC);
	else if (!strcmp(k, "mkdtemp"))
		rc = mkdtemp(t) ? 0 : -1;
	else if (!strcmp(k, "mkfifo"))
		rc = mkfifo(t, 0600);
	else {
		fprintf(stderr, "shim-mktemp: '%s': unknown kind\n", k);
		return 2;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: '%s': %s\n", k, argv[2], strerror(errno));
		return 1;
	}
	printf("ok %s\n", t);
	return 0;
}
