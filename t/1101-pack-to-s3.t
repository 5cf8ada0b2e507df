#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage pack SRC s3://BUCKET/PREFIX (and from a bucket to a bucket): the
# pack is written as objects, index.h5 last, the same bytes as a local pack;
# verify, ls, cat and stage read it from the bucket; a failure on any rank
# leaves nothing in the bucket; --force replaces a pack, never anything else.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
s3_start
# the local copies of partitions on their way up go here (checked empty)
TMPDIR="$TRASH/tmp" && mkdir -p "$TMPDIR" && export TMPDIR

test_expect_success 'setup: a tree with a file larger than the multipart threshold' '
	mkdir -p src/a src/b &&
	head -c 7000000 /dev/urandom >src/a/big &&
	i=0 && while [ $i -lt 40 ]; do seq 1 $((i * 50 + 1)) >src/b/f$i && i=$((i + 1)) || exit 1; done &&
	"$DSTAGE" pack -q -p 3 src local
'

test_expect_success 'pack to a bucket under mpiexec -n 2 (multipart): same bytes as a local pack' '
	DSTAGE_S3_PART_SIZE=5MiB mpirun_n 2 "$DSTAGE" pack -q -p 3 src s3://data/pk &&
	"$S3TOOL" ls s3://data/pk >l &&
	test "$(cut -d" " -f1 l | tr "\n" " ")" = "pk/index.h5 pk/part-00000.h5 pk/part-00001.h5 pk/part-00002.h5 " &&
	for f in index.h5 part-00000.h5 part-00001.h5 part-00002.h5; do
		"$S3TOOL" get s3://data/pk/$f | cmp - local/$f || exit 1
	done &&
	! ls -d "$TMPDIR"/dstage-* 2>/dev/null
'

test_expect_success 'verify, ls and cat read a pack in the bucket' '
	"$DSTAGE" verify s3://data/pk >v && test_grep "s3://data/pk: 41 files .*: ok, 0 problems" v &&
	"$DSTAGE" ls s3://data/pk >l1 && "$DSTAGE" ls local >l2 && test_cmp l2 l1 &&
	"$DSTAGE" cat s3://data/pk a/big | cmp - src/a/big &&
	"$DSTAGE" cat s3://data/pk b/f7 | cmp - src/b/f7
'

test_expect_success 'verify in the bucket finds a corrupted partition' '
	cp local/part-00002.h5 bad.h5 &&
	printf X | dd of=bad.h5 bs=1 seek=6000 conv=notrunc 2>/dev/null &&
	"$DSTAGE" pack -q -p 3 src s3://data/bad &&
	"$S3TOOL" put bad.h5 s3://data/bad/part-00002.h5 &&
	test_status 1 "$DSTAGE" verify s3://data/bad 2>err &&
	test_grep "s3://data/bad/part-00002.h5.: corrupt" err
'

test_expect_success 'from a bucket to a bucket, then staged from it' '
	"$S3TOOL" put-tree src s3://data/tree &&
	mpirun_n 2 "$DSTAGE" pack -q -p 2 s3://data/tree s3://data/pk2 &&
	mpirun_n 2 "$DSTAGE" stage s3://data/pk2 --to "$SHM" --node-per-rank -R 2 --job s2 >out &&
	test_grep "payload \([0-9]*\) .*pack stores \1)" out &&
	"$DSTAGE" cat s3://data/pk2 a/big | cmp - src/a/big
'

test_expect_success 'a prefix that is not empty is refused without --force' '
	test_status --show err 1 "$DSTAGE" pack -q src s3://data/pk 2>err &&
	test_grep "s3://data/pk.: not empty (--force replaces a pack in it)" err
'

test_expect_success '--force replaces the pack; surplus partitions and nothing else go' '
	"$S3TOOL" put src/b/f1 s3://data/pk/README &&
	"$DSTAGE" pack -f -p 1 src s3://data/pk >out 2>err &&
	test_grep "s3://data/pk/README.: not part of a pack, left alone" err &&
	"$S3TOOL" ls s3://data/pk | cut -d" " -f1 >l &&
	printf "pk/README\npk/index.h5\npk/part-00000.h5\n" >want && test_cmp want l &&
	"$DSTAGE" verify -q s3://data/pk
'

test_expect_success 'an upload failing on rank 1: exit 1, nothing in the bucket or on disk' '
	test_status --show err 1 mpirun_n 2 env DSTAGE_FAULT=pack.s3put:rank=1 "$DSTAGE" pack -p 4 src s3://data/pk3 2>err &&
	test_grep "s3://data/pk3.: pack failed, nothing written" err &&
	"$S3TOOL" ls s3://data/pk3 >l && test_cmp /dev/null l &&
	! ls -d "$TMPDIR"/dstage-* 2>/dev/null
'

test_expect_success 'a missing bucket for OUT: exit 1, named' '
	test_status --show err 1 "$DSTAGE" pack -q src s3://nosuchbucket/pk 2>err &&
	test_grep "s3://nosuchbucket.: no such bucket" err
'

test_done
