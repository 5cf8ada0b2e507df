#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The module graph (tools/modgraph.sh, from the #include lines): no two
# folders include each other, directly or around a longer cycle; the shim
# and the MPI layer stay where they belong.
. "$(dirname "$0")/test-lib.sh"

G="$SRCDIR/tools/modgraph.sh"

test_expect_success 'the folders include each other in no cycle' '
	sh "$G" --check "$SRCDIR" >graph &&
	sed "s/^/# /" graph &&
	test -s graph
'

test_expect_success 'the check finds a cycle (a/ -> b/ -> c/ -> a/) and names it' '
	mkdir -p fake/a fake/b fake/c &&
	printf "#include \"b.h\"\n" >fake/a/a.h &&
	printf "#include \"c.h\"\nint b;\n" >fake/b/b.c && : >fake/b/b.h &&
	printf "#include \"a.h\"\n" >fake/c/c.h &&
	! sh "$G" --check fake 2>err &&
	test_grep "include each other in a cycle" err &&
	test_grep "^  a$" err && test_grep "^  b$" err && test_grep "^  c$" err &&
	rm fake/c/c.h && : >fake/c/c.h && sh "$G" --check fake
'

test_expect_success 'an include name two folders hold is an error, not a guess' '
	mkdir -p amb/a amb/b amb/c &&
	: >amb/a/x.h && : >amb/b/x.h && printf "#include \"x.h\"\n" >amb/c/c.c &&
	! sh "$G" --check amb 2>err && test_grep "\"x.h\" is in" err
'

test_expect_success 'the shim (io/) and the MPI layer (mpi/) include common/ alone' '
	sh "$G" "$SRCDIR" >graph &&
	awk "(\$1 == \"io\" || \$1 == \"mpi\") && \$2 != \"common\"" graph >wrong &&
	test_cmp /dev/null wrong
'

test_expect_success 'nothing includes cli/ (the top); stage/ and shuffle/ not both ways' '
	sh "$G" "$SRCDIR" >graph &&
	! grep " cli$" graph &&
	! { grep -q "^stage shuffle$" graph && grep -q "^shuffle stage$" graph; }
'

test_expect_success 'the preload library carries no MPI' '
	! nm -D "$PRELOAD" | grep -E " (MPI_|PMPI_|ds_mpi_|ds_any_failed)" &&
	! readelf -d "$PRELOAD" | grep -i "NEEDED.*mpi"
'
test_done
