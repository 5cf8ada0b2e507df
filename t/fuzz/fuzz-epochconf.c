/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-epochconf.c: libFuzzer target for JOBDIR/epoch.conf, which the shim
 * parses inside every reader that opens an epoch list
 * (ds_epoch_cfg_load): the input is written as the file, then loaded.  A
 * loaded configuration must be one the epoch function accepts. */
#include "dscommon.h"
#include "dsepoch.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/fuzz-epochconf.XXXXXX");
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/epoch.conf", dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ds_write_full(fd, data, size))
		abort();
	close(fd);
	struct ds_epoch_cfg cfg;
	if (ds_epoch_cfg_load(dir, &cfg) == 0) {
		if (!(cfg.locality >= 0.0 && cfg.locality <= 1.0) || (cfg.drop_last != 0 && cfg.drop_last != 1))
			__builtin_trap();
	}
	return 0;
}
