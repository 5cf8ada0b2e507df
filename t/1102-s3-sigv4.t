#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every request dstage signs passes a real AWS Signature V4 check: the
# fault proxy (t/helpers/s3-fault-proxy.py with S3_PROXY_SECRET) recomputes
# each signature as AWS does, from the request it received, and refuses a
# mismatch with 403 SignatureDoesNotMatch (s3rver checks the key id only).
# Covered: listings over several pages (continuation tokens), keys with
# spaces, UTF-8 and reserved characters, ranged GETs, PUT, multipart upload
# (initiate, parts, complete), DELETE; a wrong secret is a clear error.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
s3_start
export S3_PROXY_SECRET=S3RVER
s3_proxy none 1
export AWS_ENDPOINT_URL="$S3_PROXY_URL"

test_expect_success 'upload a tree with awkward key names, through the checking proxy' '
	mkdir -p "src/sp ace/ü" "src/plus+eq=amp&" src/many &&
	echo a >"src/sp ace/ü/f ile" && echo b >"src/plus+eq=amp&/x,y;z" &&
	head -c 6000000 /dev/urandom >src/big &&
	i=0 && while [ $i -lt 1050 ]; do echo $i >src/many/m$i && i=$((i + 1)) || exit 1; done &&
	"$S3TOOL" put-tree src s3://data/tree
'

test_expect_success 'pack s3:// -> s3:// (listing pages, GETs, multipart PUTs): all signed right' '
	DSTAGE_S3_PART_SIZE=5MiB mpirun_n 2 "$DSTAGE" pack -p 2 s3://data/tree s3://data/pk >out &&
	test_grep "packed 1053 files" out &&
	! grep -q "sigv4 mismatch" "$TRASH/proxy.log"
'

test_expect_success 'stage, ls, cat, verify from the bucket: all signed right' '
	mpirun_n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank -R 2 -q &&
	"$DSTAGE" ls s3://data/pk >l && test_grep "^sp ace/ü/f ile\$" l &&
	"$DSTAGE" cat s3://data/pk "plus+eq=amp&/x,y;z" >got && echo b | cmp - got &&
	"$DSTAGE" verify -q s3://data/pk &&
	"$DSTAGE" pack -q -f -p 1 src s3://data/pk &&
	! grep -q "sigv4 mismatch" "$TRASH/proxy.log"
'

test_expect_success 'a wrong secret: 403 SignatureDoesNotMatch, named, not printed' '
	test_status --show err 1 env AWS_SECRET_ACCESS_KEY=Wr0ngSecret "$DSTAGE" ls s3://data/pk >out 2>err &&
	test_grep "s3://data/pk/index.h5.: access denied (403 SignatureDoesNotMatch): check the credentials (secret key)" err &&
	! grep -q Wr0ngSecret out err
'

test_done
