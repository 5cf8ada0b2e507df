/* SPDX-License-Identifier: BSD-3-Clause */
/* dsstore.c: the path helpers of the node store's names (dsstore.h). */
#include "dsstore.h"

#include <errno.h>
#include <stdio.h>

/* snprintf's verdict as the helpers return it. */
static int fit(int n, size_t len)
{
	if (n < 0)
		return -EINVAL;
	return (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int ds_store_path(char *buf, size_t len, const char *dir, const char *name)
{
	if (!buf || !len || !dir || !name)
		return -EINVAL;
	return fit(snprintf(buf, len, "%s/%s", dir, name), len);
}

int ds_store_node_path(char *buf, size_t len, const char *jobdir, const char *node,
                       const char *name)
{
	if (!buf || !len || !jobdir || !node || !name)
		return -EINVAL;
	return fit(snprintf(buf, len, "%s/%s/%s", jobdir, node, name), len);
}

int ds_store_replica_path(char *buf, size_t len, const char *nodedir, int gen, int map)
{
	if (!buf || !len || !nodedir)
		return -EINVAL;
	return fit(snprintf(buf, len, "%s/" DS_REPLICAS_NAME "%d%s", nodedir, gen,
	                    map ? DS_REPLICAS_MAP_SUFFIX : ""),
	           len);
}
