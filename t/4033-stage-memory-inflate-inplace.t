#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stage memory per entry (issue 27) on the paths that read the manifest
# whole before: --inflate (every file's inflated size places the
# partitions: now rank 0 sums them in a first pass over the rows), an
# in-place pack (its sources table now streams with the rows) and a pack
# in a bucket (one GET of the whole index.h5 on rank 0: now ranged GETs
# of the pieces as the stream asks for them).  As t/4030: the growth of
# rank 1's peak RSS (one node, two ranks: rank 1 holds no index builder)
# from a pack of 20000 names to one of 80000, per name: <= 100 B.  The
# stores are checked against the source trees (t/helpers/storecheck).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"
. "$SRCDIR/t/lib-tree.sh"

test_require MPI
[ -x /usr/bin/time ] || skip_all "no /usr/bin/time (GNU time) to read a rank's peak RSS"

# the trees (t/lib-tree.sh): seeds of 100-103 bytes, compressible, small,
# so that a partition's payload stays under one 4 MiB chunk of the stage's
# buffers at both sizes (else the buffer's pages touched grow too)

# stage_rss PACK JOB [OPTION...]: rss.JOB.RANK, peak RSS (KiB) of each rank
stage_rss() {
	_p=$1 _j=$2 && shift 2 &&
	mpirun_n 2 sh -c '/usr/bin/time -f %M -o "rss.$0.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" "$@"' \
		"$_j" "$DSTAGE" stage "$_p" --to "$SHM" --job "$_j" -q "$@" &&
	test -s "rss.$_j.0" && test -s "rss.$_j.1"
}

# per_name SMALLJOB BIGJOB WHAT: rank 1's growth per name, <= 100 B
per_name() {
	s=$(tail -n 1 "rss.$1.1") && b=$(tail -n 1 "rss.$2.1") &&
	per=$(( (b - s) * 1024 / 60000 )) &&
	echo "$3, rank 1: $s KiB at 20000 names, $b KiB at 80000: $per B per name" >>figures &&
	test "$per" -le 100
}

test_expect_success 'setup: trees of 20000 and 80000 names, zlib and in-place packs' '
	hardlink_tree small 20000 1000 100 && hardlink_tree big 80000 1000 100 &&
	"$DSTAGE" pack -q --no-fsync -p 4 -z zlib --replicate .seed small zsmall &&
	"$DSTAGE" pack -q --no-fsync -p 4 -z zlib --replicate .seed big zbig &&
	"$DSTAGE" pack -q --no-fsync -p 4 --in-place --replicate .seed small ismall &&
	"$DSTAGE" pack -q --no-fsync -p 4 --in-place --replicate .seed big ibig
'

test_expect_success '--inflate: the store holds every file inflated; rank 1 <= 100 B per name' '
	stage_rss zsmall zs --inflate && stage_rss zbig zb --inflate &&
	test $(stat -c %s "$SHM/dstage.$(id -u).zb/0/store") -ge $((80000 * 100)) &&
	"$T/storecheck" "$SHM/dstage.$(id -u).zb" big >holders && test $(wc -l <holders) = 80004 &&
	per_name zs zb --inflate
'

test_expect_success 'in place: the store holds every file; rank 1 <= 100 B per name' '
	stage_rss ismall is && stage_rss ibig ib &&
	"$T/storecheck" "$SHM/dstage.$(id -u).ib" big >holders && test $(wc -l <holders) = 80004 &&
	per_name is ib "in place"
'

if test_have_prereq S3RVER; then
	s3_start
	test_expect_success 'setup: the zlib packs uploaded' '
		"$S3TOOL" put-tree zsmall s3://data/zs && "$S3TOOL" put-tree zbig s3://data/zb
	'
fi

# rank 0 reads the index: by pieces it holds no more per name than from a
# local pack (before: the whole object, ~80 B per name more); rank 1 as ever
test_expect_success S3RVER 's3://: the store whole; rank 0 grows no more per name than from a local pack' '
	stage_rss s3://data/zs ss && stage_rss s3://data/zb sb &&
	"$T/storecheck" "$SHM/dstage.$(id -u).sb" big >holders && test $(wc -l <holders) = 80004 &&
	stage_rss zsmall ls && stage_rss zbig lb &&
	s3=$(( ($(tail -n 1 rss.sb.0) - $(tail -n 1 rss.ss.0)) * 1024 / 60000 )) &&
	lo=$(( ($(tail -n 1 rss.lb.0) - $(tail -n 1 rss.ls.0)) * 1024 / 60000 )) &&
	echo "rank 0 (node leader): s3 $s3 B per name, local $lo B per name" >>figures &&
	per_name ss sb s3 && test $s3 -le $((lo + 16))
'

[ -s figures ] && sed "s/^/# /" figures
test_done
