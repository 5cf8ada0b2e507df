#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hardening of the s3:// paths: secrets never appear in any output, at any
# log level, on success or failure; keys that would escape or confuse the
# tree are refused; a pack in a bucket that was truncated or tampered with
# is caught by stage (seal, sizes, CRCs) and leaves no store.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
S3_BUCKETS="data bad"
s3_start
# s3rver checks the access key id, not the SigV4 signature: any secret passes
SECRET=Sekr1t-9020-do-not-print
TOKEN=Tok3n-9020-do-not-print

nostore() {
	! ls "$SHM/dstage.$(id -u).$1"/* 2>/dev/null | grep -v /lock
}

test_expect_success 'setup: a tree, its pack in the bucket' '
	mkdir -p src/a src/b && head -c 300000 /dev/urandom >src/a/r &&
	i=0 && while [ $i -lt 20 ]; do seq 1 $((i * 100 + 1)) >src/b/f$i && i=$((i + 1)) || exit 1; done &&
	"$S3TOOL" put-tree src s3://data/tree &&
	"$DSTAGE" pack -q -p 2 src pack && "$S3TOOL" put-tree pack s3://data/pk
'

test_expect_success 'the secret and the session token never appear, -v and DSTAGE_LOG=debug' '
	export AWS_SECRET_ACCESS_KEY=$SECRET AWS_SESSION_TOKEN=$TOKEN DSTAGE_LOG=debug &&
	{
		"$DSTAGE" pack -v -p 2 s3://data/tree out1 &&
		"$DSTAGE" ls -l s3://data/pk && "$DSTAGE" cat s3://data/pk a/r >/dev/null &&
		"$DSTAGE" verify s3://data/pk &&
		mpirun_n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" --node-per-rank --job sec &&
		"$DSTAGE" pack -v src s3://data/pk-new &&
		! AWS_ACCESS_KEY_ID=WRONG "$DSTAGE" pack -v s3://data/tree out2 &&
		! AWS_ACCESS_KEY_ID=WRONG mpirun_n 2 "$DSTAGE" stage s3://data/pk --to "$SHM" \
			--node-per-rank --job sec2 &&
		! AWS_ENDPOINT_URL=http://127.0.0.1:1 DSTAGE_S3_RETRY_SECS=1 "$DSTAGE" ls s3://data/pk
	} >all.out 2>&1 &&
	test_grep "debug\|s3:" all.out >/dev/null &&
	! grep -e "$SECRET" -e "$TOKEN" all.out
'

test_expect_success 'the debug log names where credentials came from, not what they are' '
	DSTAGE_LOG=debug "$DSTAGE" ls s3://data/pk 2>err >/dev/null &&
	test_grep "credentials from the environment" err && ! grep -q S3RVER err
'

# Only a key the server stores as it is sent tests anything: a server that
# resolves the dot segments stores another name (a skip, with the reason).
for key in "p/../../etc/passwd" "p/a/../../x" "p/./x" "p/x/." "p/.dstage/epochs/0/all"; do
	"$S3TOOL" rm s3://bad
	if ! "$S3TOOL" put src/b/f1 "s3://bad/$key" 2>/dev/null ||
		! "$S3TOOL" ls s3://bad 2>/dev/null | cut -d" " -f1 | grep -qxF "$key"; then
		test_skip "a key escaping or shadowing the tree is refused: $key" \
			"the server cannot store such a key (refused, or stored under another name)"
		continue
	fi
	test_expect_success "a key escaping or shadowing the tree is refused: $key" '
		test_status --show err 1 "$DSTAGE" pack s3://bad/p nopk 2>err &&
		test_grep -F "'"'s3://bad/$key'"'" err && ! test -e nopk
	'
done

test_expect_success 'a key that is also a directory: refused, named' '
	"$S3TOOL" rm s3://bad && "$S3TOOL" put src/b/f1 s3://bad/p/x &&
	"$S3TOOL" put src/b/f1 s3://bad/p/x/y &&
	test_status --show err 1 "$DSTAGE" pack s3://bad/p nopk 2>err &&
	test_grep "s3://bad/p/x.: a key that is also a directory of other keys" err &&
	! test -e nopk
'

"$S3TOOL" rm s3://bad && printf x >x && "$S3TOOL" put x s3://bad/p/d/
if "$S3TOOL" ls s3://bad/p | grep -q "^p/d/ "; then
	test_expect_success 'a folder marker with data in it is refused' '
		test_status --show err 1 "$DSTAGE" pack s3://bad/p nopk 2>err &&
		test_grep "s3://bad/p/d/.: key ends with ./. but has data" err && ! test -e nopk
	'
else
	test_skip 'a folder marker with data in it is refused' 's3rver drops the trailing slash of a key'
fi

"$S3TOOL" rm s3://bad && : >e && "$S3TOOL" put e s3://bad/p/d/ && "$S3TOOL" put src/b/f1 s3://bad/p/f
if "$S3TOOL" ls s3://bad/p | grep -q "^p/d/ "; then
	test_expect_success 'an empty folder marker is a directory' '
		"$DSTAGE" pack -q s3://bad/p marker &&
		"$DSTAGE" ls marker >l && printf "d/\nf\n" >want && test_cmp want l
	'
else
	test_skip 'an empty folder marker is a directory' 's3rver drops the trailing slash of a key'
fi

test_expect_success 'stage: a truncated partition in the bucket, no store left' '
	head -c 5000 pack/part-00001.h5 >short.h5 && "$S3TOOL" put-tree pack s3://bad/pk &&
	"$S3TOOL" put short.h5 s3://bad/pk/part-00001.h5 &&
	test_status --show err 1 mpirun_n 2 "$DSTAGE" stage s3://bad/pk --to "$SHM" --node-per-rank --job tr 2>err &&
	test_grep "s3://bad/pk/part-00001.h5.: truncated" err && nostore tr
'

test_expect_success 'stage: a bit flipped in a payload in the bucket, named, no store left' '
	cp pack/part-00000.h5 flip.h5 &&
	off=$("$DSTAGE" ls -l pack >/dev/null && "$PY" -c "
import struct,sys; h=open(\"flip.h5\",\"rb\").read(128); print(struct.unpack(\"<Q\",h[96:104])[0]+10)") &&
	printf Z | dd of=flip.h5 bs=1 seek=$off conv=notrunc 2>/dev/null &&
	"$S3TOOL" put-tree pack s3://bad/pf && "$S3TOOL" put flip.h5 s3://bad/pf/part-00000.h5 &&
	test_status --show err 1 mpirun_n 2 "$DSTAGE" stage s3://bad/pf --to "$SHM" --node-per-rank --job fl 2>err &&
	test_grep "part-00000.h5.: checksum mismatch in" err && nostore fl
'

test_expect_success 'stage: a tampered index.h5 in the bucket is refused' '
	head -c 3000 pack/index.h5 >idx && "$S3TOOL" put-tree pack s3://bad/pi &&
	"$S3TOOL" put idx s3://bad/pi/index.h5 &&
	test_status --show err 1 mpirun_n 2 "$DSTAGE" stage s3://bad/pi --to "$SHM" --node-per-rank --job ix 2>err &&
	test_grep "s3://bad/pi/index.h5.: truncated" err && nostore ix
'

test_expect_success 'a malformed s3:// URL for pack is a usage error' '
	test_status --show err 2 "$DSTAGE" pack s3://A_B/x okname 2>err &&
	test_grep "s3://A_B/x.: not a valid bucket name" err && ! test -e okname
'

test_expect_success 'a malformed s3:// URL for stage is a usage error' '
	test_status --show err 2 "$DSTAGE" stage s3://x --to "$SHM" 2>err &&
	test_grep "s3://x.: bucket names have 3 to 63 characters" err
'

test_done
