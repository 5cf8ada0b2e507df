#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The test suite's own hygiene: no test number used twice; the harness's
# cleanup and skip reasons are not bypassed (t/README.md).
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'no two tests share a number' '
	ls "$SRCDIR"/t/[0-9][0-9][0-9][0-9]-*.t | sed "s,.*/,," | cut -c1-4 | sort | uniq -d >dups &&
	test_cmp /dev/null dups
'
test_expect_success 'every test is executable' '
	for f in "$SRCDIR"/t/[0-9]*.t; do test -x "$f" || { echo "$f not executable"; exit 1; }; done
'
test_expect_success 'no script sets its own EXIT, INT or TERM trap (test_atexit does it)' '
	test_status --show traps 1 grep -n "^[[:space:]]*trap .*\(EXIT\|INT\|TERM\)" "$SRCDIR"/t/[0-9]*.t >traps
'
test_expect_success 'no script prints its own SKIP plan (skip_all, test_require say why)' '
	{ grep -n "echo .1\.\.0 # SKIP" "$SRCDIR"/t/[0-9]*.t >all || test $? = 1; } &&
	sed "/\/0002-test-lib\.t:/d" all >skips && test_cmp /dev/null skips
'
# A body runs without set -e: a command not in its && chain fails unseen
# (tools/chainlint.pl, tested by t/0016; docs/HACKING.md, Adding a test).
test_expect_success 'every test body keeps its && chain: no broken link, hand-written capture or lost loop pass' '
	perl "$SRCDIR/tools/chainlint.pl" "$SRCDIR"/t/[0-9]*.t "$SRCDIR"/t/test-lib.sh "$SRCDIR"/t/lib-*.sh >chain ||
	{ sed "s,^$SRCDIR/,," chain; false; }
'
test_expect_success 'every library a script sources (. "$SRCDIR/t/...") exists' '
	grep -o "^[[:space:]]*\. \"\$SRCDIR/t/[^\"]*\"" "$SRCDIR"/t/[0-9]*.t "$SRCDIR"/t/lib-*.sh |
		sed "s,^\([^:]*\):[[:space:]]*\. \"\$SRCDIR/\(.*\)\"$,\1 \2," >sourced &&
	test -s sourced &&
	while read -r by lib; do
		test -f "$SRCDIR/$lib" || echo "$by sources $lib: no such file" || exit 1
	done <sourced >missing &&
	test_cmp /dev/null missing
'
# The documentation: README.md and docs/ (one topic per file) link each
# other and the tree; comments in the code cite docs/design.md by section.
# A link or a citation that leads nowhere fails here.
doc_sources() {
	find "$SRCDIR" \( -path "$SRCDIR/build*" -o -path "$SRCDIR/.git" -o -path "$SRCDIR/docs" \
		-o -path "$SRCDIR/t/fuzz/corpus-*" -o -path "$SRCDIR/t/fuzz/hdf5-findings" \) -prune -o \
		-type f \( -name "*.[ch]" -o -name "*.sh" -o -name "*.py" -o -name "*.t" \
		-o -name "*.sbatch" -o -name Makefile \) -print |
		grep -v "/t/0000-lint\.t$"
}

# MPICH 4.0.2 (Debian 12's) and Open MPI 4.1.2-4.1.4 order unsigned types
# as signed in MPI_MIN and MPI_MAX (docs/mpi.md): reduce signed values
test_expect_success 'no MPI_MIN or MPI_MAX reduction of an unsigned type' '
	find "$SRCDIR" \( -path "$SRCDIR/build*" -o -path "$SRCDIR/.git" \) -prune -o \
		-type f -name "*.c" -print >csrc &&
	test -s csrc &&
	xargs perl -0777 -ne "while (/(MPI_I?(?:All)?[Rr]educe\w*|MPI_I?(?:Ex)?[Ss]can)\s*\(([^;]*)\)\s*[;!=]/g) {
		my (\$f, \$a) = (\$1, \$2);
		print \"\$ARGV: \$f(\$a)\n\" if \$a =~ /MPI_(?:MIN|MAX)\b/ && \$a =~ /MPI_(?:UNSIGNED|UINT)/;
	}" <csrc >unsigned_minmax &&
	test_cmp /dev/null unsigned_minmax
'

test_expect_success 'every docs/*.md a comment cites exists' '
	doc_sources | xargs grep -HnoE "docs/[A-Za-z0-9_.-]+\.md" >cites &&
	test -s cites &&
	while IFS=: read -r f n doc; do
		test -f "$SRCDIR/$doc" || { echo "${f#$SRCDIR/}:$n: $doc does not exist"; exit 1; }
	done <cites
'

test_expect_success 'design citations name docs/design.md and a section it has' '
	! doc_sources | xargs grep -HnE "DESIGN(\.md| [0-9]| ?§|,? section)" >stale ||
		{ sed "s,^$SRCDIR/,," stale; echo "cite docs/design.md section N"; exit 1; } &&
	! doc_sources | xargs grep -HnE "README(\.md)?('"'"'s)?,? \"" >stale ||
		{ sed "s,^$SRCDIR/,," stale; echo "cite the docs/ file that holds the section"; exit 1; } &&
	doc_sources | xargs grep -hoE "docs/design\.md,? section [0-9]+" | sed "s/.* //" | sort -u >secs &&
	test -s secs &&
	while read -r s; do
		grep -q "^## $s\. " "$SRCDIR/docs/design.md" || { echo "docs/design.md has no section $s"; exit 1; }
	done <secs
'

# docs/HACKING.md and docs/design.md send a maintainer to the code: a name
# they give in backticks that looks like code (a ds_/DS_ name, a call, a
# path or file name) must be in the tree (tools/docnames.sh says which).
test_expect_success 'every code name in backticks in docs/HACKING.md and docs/design.md is in the tree' '
	sh "$SRCDIR/tools/docnames.sh" "$SRCDIR" "$SRCDIR/docs/HACKING.md" "$SRCDIR/docs/design.md" >wrong ||
	{ sed "s,^$SRCDIR/,," wrong; false; }
'

test_expect_success 'the name check finds a planted wrong name of each kind, and only those' '
	mkdir -p names/docs names/io names/t &&
	printf "int ds_real(void);\nvoid other_fn(void);\n" >names/io/wrap.h &&
	printf "#!/bin/sh\n" >names/t/0007-x.t &&
	cat >names/docs/H.md <<-\EOF &&
	`ds_real`, `ds_real(x)`, `other_fn()`, `io/wrap.h`, `wrap.h`, `io/`, `t/0007`, `t/`,
	`syscall(2)`, `t/NNNN-name.t`, `NODEDIR/store`, `build/bin/dstage`, `.c`, `ds_`, `a b`
	EOF
	sh "$SRCDIR/tools/docnames.sh" names names/docs/H.md &&
	cat >>names/docs/H.md <<-\EOF &&
	`ds_gone` `DS__GONE(x)` `gone_fn()` `io/gone.h` `gone.h` `io/gone/` `t/0008`
	EOF
	! sh "$SRCDIR/tools/docnames.sh" names names/docs/H.md >out &&
	cat out && test $(wc -l <out) = 7 &&
	for n in ds_gone DS__GONE gone_fn io/gone.h gone.h io/gone/ t/0008
	do
		grep -F "H.md:3: \`$n" out || return 1
	done
'

test_expect_success PYTHON 'relative links of README.md and docs/*.md lead somewhere' '
	"$PY" "$SRCDIR/t/helpers/doclinks.py" "$SRCDIR" "$SRCDIR"/README.md "$SRCDIR"/docs/*.md \
		$(ls "$SRCDIR"/*/README.md 2>/dev/null)
'

# The licence (LICENSE, BSD-3-Clause, README.md): every tracked source file
# says so in its first five lines, in its own comment syntax (after a #!
# line).  Data (fuzz corpora, packs, figures) and text (*.md) are not source.
test_lazy_prereq GITTREE 'git -C "$SRCDIR" rev-parse --git-dir' "the source is not a git tree (no git, or a tarball)"
spdx_sources() {
	git -C "$1" ls-files |
		grep -E "(\.(c|h|ld|sh|py|t|pl|sbatch|in|conf|yml|[1-8])|(^|/)Makefile|^\.ci/run|^bench/model)\$" |
		grep -vE "^t/fuzz/(corpus-|hdf5-findings/)"
}
spdx_missing() {
	spdx_sources "$1" | while read -r f; do
		head -n 5 "$1/$f" | grep -q "SPDX-License-Identifier: BSD-3-Clause" || echo "$f"
	done
}

test_expect_success GITTREE 'every tracked source file carries SPDX-License-Identifier: BSD-3-Clause' '
	grep -q "^BSD 3-Clause License" "$SRCDIR/LICENSE" &&
	spdx_missing "$SRCDIR" >nolicence &&
	test_cmp /dev/null nolicence
'

test_expect_success GITTREE 'the check names a source file without the line, and not data' '
	git init -q lic && mkdir lic/t lic/bench &&
	printf "#!/bin/sh\n# SPDX-License-Identifier: BSD-3-Clause\n" >lic/ok.sh &&
	printf "int x;\n" >lic/bad.c && printf "#!/bin/sh\n: x\n" >lic/t/0001-x.t &&
	printf "all:\n" >lic/bench/Makefile && printf "data" >lic/data.bin && printf "# x\n" >lic/x.md &&
	git -C lic add . && spdx_missing lic >miss &&
	printf "bad.c\nbench/Makefile\nt/0001-x.t\n" >want && test_cmp want miss
'

test_done
