#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The module graph (tools/modgraph.sh, from the #include lines): no two
# folders include each other, directly or around a longer cycle; a folder
# includes another only through its face (its ds*.h), never a private
# header (svc.h, *_int.h, shim.h, ...); the shim and the MPI layer stay
# where they belong.
. "$(dirname "$0")/test-lib.sh"

G="$SRCDIR/tools/modgraph.sh"

test_expect_success 'the folders include each other in no cycle' '
	sh "$G" --check "$SRCDIR" >graph &&
	sed "s/^/# /" graph &&
	test -s graph
'

test_expect_success 'the check finds a cycle (a/ -> b/ -> c/ -> a/) and names it' '
	mkdir -p fake/a fake/b fake/c &&
	printf "#include \"dsb.h\"\n" >fake/a/dsa.h &&
	printf "#include \"dsc.h\"\nint b;\n" >fake/b/b.c && : >fake/b/dsb.h &&
	printf "#include \"dsa.h\"\n" >fake/c/dsc.h &&
	! sh "$G" --check fake 2>err &&
	test_grep "include each other in a cycle" err &&
	test_grep "^  a$" err && test_grep "^  b$" err && test_grep "^  c$" err &&
	rm fake/c/dsc.h && : >fake/c/dsc.h && sh "$G" --check fake
'

test_expect_success 'an include name two folders hold is an error, not a guess' '
	mkdir -p amb/a amb/b amb/c &&
	: >amb/a/x.h && : >amb/b/x.h && printf "#include \"x.h\"\n" >amb/c/c.c &&
	! sh "$G" --check amb 2>err && test_grep "\"x.h\" is in" err
'

test_expect_success 'no file of the tree includes another folder'"'"'s private header' '
	sh "$G" --check "$SRCDIR" >graph 2>err ||
	{ sed "s/^/# /" err; false; } &&
	! grep -q "private to" err
'

test_expect_success 'the check names a private header included from another folder' '
	mkdir -p priv/a priv/b priv/t/helpers priv/bench &&
	: >priv/b/dsb.h && : >priv/b/svc.h && : >priv/b/b_int.h && : >priv/b/shim.h &&
	printf "#include \"dsb.h\"\n#include \"svc.h\"\n" >priv/b/b.c &&
	printf "#include \"dsb.h\"\nint a;\n" >priv/a/a.c &&
	printf "#include \"../../b/b_int.h\"\nint h;\n" >priv/t/helpers/h.c &&
	sh "$G" --check priv >graph &&
	test_grep "^a b$" graph &&
	for inc in "\"svc.h\"" "\"../b/b_int.h\"" " <shim.h>" "\"b_int.h\" /* x */"
	do
		printf "#include %s\n" "$inc" >priv/a/p.c &&
		! sh "$G" --check priv >/dev/null 2>err &&
		test_grep "a/p.c: \"[a-z_]*.h\" is private to b/" err || return 1
	done &&
	rm priv/a/p.c &&
	printf "#include \"svc.h\"\n" >priv/bench/x.c &&
	! sh "$G" --check priv >/dev/null 2>err &&
	test_grep "bench/x.c: \"svc.h\" is private to b/" err &&
	rm priv/bench/x.c && sh "$G" --check priv >/dev/null
'

test_expect_success 'a folder has one face (common/ aside)' '
	mkdir -p faces/b faces/common &&
	: >faces/b/dsb.h && : >faces/common/dsx.h && : >faces/common/dsy.h &&
	sh "$G" --check faces >/dev/null &&
	: >faces/b/dsc.h &&
	! sh "$G" --check faces >/dev/null 2>err &&
	test_grep "b/ has two faces" err
'

test_expect_success 'no folder calls another folder'"'"'s internal (ds__) function' '
	# the objects say what the headers may hide (a prototype written by
	# hand): a ds__ name is shared by the files of one folder alone
	# (objects of today'"'"'s sources only: a file moved to another folder
	# leaves its old object in build/, which would define its symbols twice)
	(cd "$SRCDIR/build" && ls */*.o pic/*/*.o) | grep -v "^t/" |
		while read -r o; do
			c=${o#pic/}
			if test -f "$SRCDIR/${c%.o}.c"; then echo "$o"; fi || exit 1
		done >objs &&
	test -s objs &&
	(cd "$SRCDIR/build" && nm -A $(cat "$TRASH/objs")) >syms &&
	cat >cross.awk <<-\EOF &&
	{ f = $1; sub(/:.*/, "", f); n = split(f, p, "/"); d = p[n - 1] }
	$(NF - 1) ~ /^[TDBR]$/ && $NF ~ /^ds__/ { def[$NF] = d; next }
	$(NF - 1) == "U" && $NF ~ /^ds__/ { k++; ud[k] = d; us[k] = $NF; uf[k] = f }
	END {
		for (i = 1; i <= k; i++)
			if ((us[i] in def) && def[us[i]] != ud[i])
				print uf[i] " uses " us[i] " of " def[us[i]] "/"
	}
	EOF
	awk -f cross.awk syms >cross &&
	test_cmp /dev/null cross
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

test_expect_success 'the service hosts the outputs: outputs/ sees neither shuffle/ nor stage/; stage/ reaches the outputs without shuffle/' '
	sh "$G" "$SRCDIR" >graph &&
	grep -q "^shuffle outputs$" graph && grep -q "^stage outputs$" graph &&
	! grep -E "^outputs (shuffle|stage|cli)$" graph &&
	! grep "^stage shuffle$" graph
'

test_expect_success 'the preload library carries no MPI' '
	! nm -D "$PRELOAD" | grep -E " (MPI_|PMPI_|ds_mpi_|ds_any_failed)" &&
	! readelf -d "$PRELOAD" | grep -i "NEEDED.*mpi"
'
test_done
