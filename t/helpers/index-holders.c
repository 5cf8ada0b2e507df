/* SPDX-License-Identifier: BSD-3-Clause */
/* index-holders NODEDIR/index: one line per regular file of the staged
 * tree, "PATH NODE,NODE... PART" (the nodes holding its partition, in the
 * index's order, and the partition's number).  For the failover tests (t/32NN): which files a loss of
 * some nodes leaves without a holder. */
#include "dscommon.h"
#include "dsindex.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
	struct ds_index ix;
	if (argc != 2) {
		fprintf(stderr, "usage: index-holders NODEDIR/index\n");
		return 2;
	}
	int rc = ds_index_open(&ix, argv[1], 1);
	if (rc) {
		fprintf(stderr, "index-holders: '%s': %s\n", argv[1], ds_strerror(rc));
		return 1;
	}
	for (uint32_t i = 0; i < ix.h->nentries; i++) {
		uint32_t part = ds_ix_part(&ix, i);
		if (!S_ISREG(ds_ix_mode(&ix, i)) || part >= ix.h->nparts)
			continue;
		const struct ds_part *p = &ix.parts[part];
		char name[PATH_MAX];
		ds_ix_path(&ix, i, name, sizeof(name));
		printf("%s ", name);
		for (uint32_t l = 0; l < p->nloc; l++)
			printf("%s%u", l ? "," : "", ix.locs[p->loc + l].node);
		printf(" %u\n", part);
	}
	ds_index_close(&ix);
	return 0;
}
