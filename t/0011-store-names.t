#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The node store as a declared contract (common/dsstore.h): every name in a
# job or node directory is one constant of the header's table, spelled
# nowhere else; the path helpers refuse to truncate.
. "$(dirname "$0")/test-lib.sh"

command -v perl >/dev/null || skip_all "no perl (the literal scan is a perl script)"
scan="perl $SRCDIR/t/helpers/store-names.pl $SRCDIR/common/dsstore.h"

test_expect_success 'the names and the path helpers (build/t/test-store)' '
	test_status --show out 0 "$T/test-store" >out &&
	! grep "^not ok" out && grep -q "^ok" out
'

test_expect_success 'no store name spelled as a literal outside common/' '
	(cd "$SRCDIR" && $scan cli/*.[ch] mpi/*.[ch] stage/*.[ch] shuffle/*.[ch] outputs/*.[ch] io/*.[ch] hdf5/*.[ch] s3/*.[ch]) >found ||
	{ cat found; false; }
'

# the scan itself: each form of a name spelled by hand is caught, the
# constants and the shim mount virtual .dstage/epochs are not
test_expect_success 'the scan finds a name written by hand' '
	cat >planted.c <<-\EOC &&
	#define SHADOW "cwd"
	static void f(char *p, size_t n, const char *d)
	{
		snprintf(p, n, "%s/serve.status", d);
		snprintf(p, n, "%s/%s/index", d, d);
		snprintf(p, n, "%s.partial", d);
		snprintf(p, n, "%s/replicas.%d.map", d, 1);
		char *x = path_join(d, "store");
		const char *store_name = "store";
		symlink("reserved", p);
	}
	EOC
	! $scan planted.c >found && cat found &&
	test $(wc -l <found) = 8
'
test_expect_success 'the scan leaves the constants and the mount alone' '
	cat >clean.c <<-\EOC &&
	static void f(char *p, size_t n, const char *d)
	{
		/* NODEDIR/index, "%s/index" in a comment */
		snprintf(p, n, "%s/" DS_INDEX_NAME, d);
		ds_store_path(p, n, d, DS_SERVE_STATUS_NAME);
		snprintf(p, n, ".dstage/epochs/%llu/all", 1ull);
		ds_error("usage: dstage stop --to DIR");
		puts("index.h5");
	}
	EOC
	$scan clean.c >found || { cat found; false; }
'
test_done
