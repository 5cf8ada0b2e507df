/* SPDX-License-Identifier: BSD-3-Clause */
/* test-store.c: the node store's names (common/dsstore.h): every name one
 * safe path component, no two alike, and the path helpers' truncation. */
#include "dscommon.h"
#include "dsstore.h"
#include "tap.h"

#include <limits.h>

static const struct {
	const char *macro, *name;
	int part; /* a prefix or suffix of a name, not a whole name */
} names[] = {
	{"DS_JOBDIR_PREFIX", DS_JOBDIR_PREFIX, 1},
	{"DS_LOCK_NAME", DS_LOCK_NAME, 0},
	{"DS_PARTIAL_SUFFIX", DS_PARTIAL_SUFFIX, 1},
	{"DS_NODES_NAME", DS_NODES_NAME, 0},
	{"DS_EPOCH_CONF_NAME", DS_EPOCH_CONF_NAME, 0},
	{"DS_STOP_NAME", DS_STOP_NAME, 0},
	{"DS_STATUS_ALL", DS_STATUS_ALL, 0},
	{"DS_BYHOST_NAME", DS_BYHOST_NAME, 0},
	{"DS_CWD_NAME", DS_CWD_NAME, 0},
	{"DS_DL_NAME", DS_DL_NAME, 0},
	{"DS_INDEX_NAME", DS_INDEX_NAME, 0},
	{"DS_STORE_NAME", DS_STORE_NAME, 0},
	{"DS_STATS_NAME", DS_STATS_NAME, 0},
	{"DS_SOCK_NAME", DS_SOCK_NAME, 0},
	{"DS_SERVE_STATUS_NAME", DS_SERVE_STATUS_NAME, 0},
	{"DS_CACHE_DIR_NAME", DS_CACHE_DIR_NAME, 0},
	{"DS_RESERVED_NAME", DS_RESERVED_NAME, 0},
	{"DS_RESERVED_TMP", DS_RESERVED_TMP, 1},
	{"DS_REPLICAS_NAME", DS_REPLICAS_NAME, 1},
	{"DS_REPLICAS_MAP_SUFFIX", DS_REPLICAS_MAP_SUFFIX, 1},
	{"DS_OUT_CONF", DS_OUT_CONF, 0},
	{"DS_OUT_SOCK", DS_OUT_SOCK, 0},
	{"DS_OUT_STATUS", DS_OUT_STATUS, 0},
	{"DS_OUT_AREA_NAME", DS_OUT_AREA_NAME, 0},
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static void test_names(void)
{
	for (size_t i = 0; i < NNAMES; i++) {
		const char *why = NULL, *n = names[i].name;
		int one = !strchr(n, '/') && strcmp(n, ".") && strcmp(n, "..") && *n;
		ok(one && (names[i].part || !ds_name_check(n, strlen(n), &why)),
		   "%s '%s': one safe component%s%s", names[i].macro, n, why ? ": " : "",
		   why ? why : "");
	}
	/* two names alike would make two files one: only the node directories
	 * (numbers) and these share JOBDIR or NODEDIR */
	int dup = 0;
	for (size_t i = 0; i < NNAMES; i++)
		for (size_t j = i + 1; j < NNAMES; j++)
			if (!strcmp(names[i].name, names[j].name)) {
				diag("%s and %s are both '%s'", names[i].macro, names[j].macro,
				     names[i].name);
				dup = 1;
			}
	ok(!dup, "no two names alike");
	int digits = 0;
	for (size_t i = 0; i < NNAMES; i++)
		if (strspn(names[i].name, "0123456789") == strlen(names[i].name))
			digits = 1;
	ok(!digits, "no name is a number (those are the node directories)");
}

static void test_paths(void)
{
	char buf[PATH_MAX];
	ok(ds_store_path(buf, sizeof(buf), "/x/dstage.1.2/0", DS_INDEX_NAME) == 0 &&
	           !strcmp(buf, "/x/dstage.1.2/0/index"),
	   "ds_store_path: DIR/NAME ('%s')", buf);
	ok(ds_store_node_path(buf, sizeof(buf), "/x/j", "3", DS_SERVE_STATUS_NAME) == 0 &&
	           !strcmp(buf, "/x/j/3/serve.status"),
	   "ds_store_node_path: JOBDIR/NODE/NAME ('%s')", buf);
	ok(ds_store_replica_path(buf, sizeof(buf), "/n", 2, 0) == 0 &&
	           !strcmp(buf, "/n/replicas.2"),
	   "ds_store_replica_path: NODEDIR/replicas.<g> ('%s')", buf);
	ok(ds_store_replica_path(buf, sizeof(buf), "/n", 12, 1) == 0 &&
	           !strcmp(buf, "/n/replicas.12.map"),
	   "ds_store_replica_path: NODEDIR/replicas.<g>.map ('%s')", buf);

	/* "/ab/sock" is 8 bytes and a NUL: 9 fits, 8 does not */
	char small[16];
	ok(ds_store_path(small, 9, "/ab", DS_SOCK_NAME) == 0 && !strcmp(small, "/ab/sock"),
	   "ds_store_path: an exact fit is not truncation");
	ok(ds_store_path(small, 8, "/ab", DS_SOCK_NAME) == -ENAMETOOLONG,
	   "ds_store_path: one byte short: -ENAMETOOLONG");
	ok(ds_store_node_path(small, 10, "/ab", "1", DS_SOCK_NAME) == -ENAMETOOLONG,
	   "ds_store_node_path: truncation: -ENAMETOOLONG");
	ok(ds_store_replica_path(small, sizeof(small), "/abcdef", 1, 1) == -ENAMETOOLONG,
	   "ds_store_replica_path: truncation: -ENAMETOOLONG");

	/* a directory of PATH_MAX - 1 bytes leaves no room for any name */
	static char dir[PATH_MAX];
	memset(dir, 'd', sizeof(dir) - 1);
	dir[0] = '/';
	dir[sizeof(dir) - 1] = 0;
	ok(ds_store_path(buf, sizeof(buf), dir, DS_STORE_NAME) == -ENAMETOOLONG,
	   "ds_store_path: PATH_MAX directory: -ENAMETOOLONG");
	ok(ds_store_path(buf, 0, "/a", DS_STORE_NAME) == -EINVAL &&
	           ds_store_path(buf, sizeof(buf), NULL, DS_STORE_NAME) == -EINVAL &&
	           ds_store_node_path(buf, sizeof(buf), "/a", NULL, DS_STORE_NAME) == -EINVAL,
	   "no buffer, no directory, no node: -EINVAL");
}

int main(void)
{
	plan((int)NNAMES + 2 + 10);
	test_names();
	test_paths();
	return done_testing();
}
