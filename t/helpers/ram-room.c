/* SPDX-License-Identifier: BSD-3-Clause */
/* ram-room: print what ds_ram_room (common/dsmem.h) says of a directory, one
 * "key value" a line, for the RAM budget tests (t/4004..4006).
 *
 *   ram-room DIR [HEADROOM]     HEADROOM as --ram-headroom takes it
 *
 * Prints room, free, is_ram, cgroup_v, limit, usage, headroom, cgroup, why. */
#include "dscommon.h"
#include "dsmem.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct ds_headroom h;
	struct ds_room r;
	ds_log_set_cmd("ram-room");
	ds_log_init(0);
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: ram-room DIR [HEADROOM]\n");
		return 2;
	}
	ds_headroom_default(&h, 1);
	if (argc == 3 && ds_headroom_parse(argv[2], &h) < 0) {
		fprintf(stderr, "ram-room: bad headroom '%s'\n", argv[2]);
		return 2;
	}
	int rc = ds_ram_room(argv[1], &h, &r);
	if (rc < 0) {
		fprintf(stderr, "ram-room: '%s': %s\n", argv[1], ds_strerror(rc));
		return 1;
	}
	printf("room %llu\nfree %llu\nis_ram %d\ncgroup_v %d\n", (unsigned long long)r.room,
	       (unsigned long long)r.free, r.is_ram, r.cgroup_v);
	printf("limit %llu\nusage %llu\nheadroom %llu\ncgroup %s\nwhy %s\n",
	       (unsigned long long)r.limit, (unsigned long long)r.usage,
	       (unsigned long long)r.headroom, r.cgroup, r.why);
	return 0;
}
