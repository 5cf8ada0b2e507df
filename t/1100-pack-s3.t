#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage pack s3://BUCKET/PREFIX OUT against a real S3 server (s3rver on
# loopback): the pack holds exactly the objects, byte-identical serially and
# under mpiexec -n 2 and -n 3; keys that are not valid paths, bad
# credentials, a missing bucket, an object changed during the pack: exit 1,
# the key named, nothing written.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-s3.sh"

test_require MPI
S3_BUCKETS="data bad"
s3_start

same_pack() {
	(cd "$1" && ls -A) >a.list && (cd "$2" && ls -A) >b.list &&
	test_cmp a.list b.list &&
	for f in $(cat a.list); do cmp "$1/$f" "$2/$f" || return 1; done
}

# every file of the source, through dstage cat, equals the source
same_files() {
	(cd src && find . -type f | sed "s|^\./||" | sort) >files &&
	test -s files &&
	while read -r f; do
		"$DSTAGE" cat "$1" "$f" >got && cmp got "src/$f" || return 1
	done <files
}

test_expect_success 'setup: a tree uploaded as objects' '
	mkdir -p src/train/n01 src/train/n02 src/val src/deep/a/b/c &&
	i=0 && while [ $i -lt 30 ]; do
		seq 1 $((i * 97 + 1)) >src/train/n01/s$i.txt &&
		head -c $((i * 1000)) /dev/urandom >src/train/n02/r$i.bin && i=$((i + 1)) || exit 1
	done &&
	head -c 3000000 /dev/urandom >src/deep/a/b/c/big &&
	: >src/val/empty && echo v >src/val/v1 &&
	"$S3TOOL" put-tree src s3://data/ds &&
	"$S3TOOL" ls s3://data/ds >listing && test $(wc -l <listing) = 63
'

test_expect_success 'pack s3:// serially: verify, ls and every file equal the source' '
	"$DSTAGE" pack -p 4 s3://data/ds serial >out 2>err &&
	test_grep "packed 63 files, 8 dirs" out &&
	test_grep "^s3: 64 requests, .* fetched (3[0-9]* bytes), 0 retries" out &&
	"$DSTAGE" verify -q serial &&
	same_files serial &&
	"$DSTAGE" ls serial | grep -v /\$ >ls.s3 &&
	sort files >f.sorted && sort ls.s3 >l.sorted && test_cmp f.sorted l.sorted
'

test_expect_success 'a listing of several pages (2100 keys) is read to its end' '
	mkdir -p many/d && i=0 && while [ $i -lt 2100 ]; do echo $i >many/d/k$i && i=$((i + 1)) || exit 1; done &&
	"$S3TOOL" put-tree many s3://data/many &&
	mpirun_n 2 "$DSTAGE" pack -p 2 s3://data/many manypack >out &&
	test_grep "packed 2100 files, 1 dirs" out &&
	test_grep "^s3: 2103 requests" out &&
	"$DSTAGE" cat manypack d/k2099 >got && echo 2099 | cmp - got
'

test_expect_success 'object size and LastModified stand in for size and mtime' '
	"$DSTAGE" ls -l serial deep/a/b/c/big >l &&
	test_grep "^-rw-r--r-- *3000000 " l
'

for n in 2 3; do
	test_expect_success "mpiexec -n $n is byte-identical to the serial pack" '
		mpirun_n '$n' "$DSTAGE" pack -q -p 4 s3://data/ds mpi'$n' &&
		same_pack serial mpi'$n'
	'
done

test_expect_success 'zlib, --exclude and --replicate work as for a tree' '
	mpirun_n 2 "$DSTAGE" pack -q -p 3 -z zlib --exclude "*.bin" --replicate val s3://data/ds z &&
	"$DSTAGE" verify -q z &&
	! "$DSTAGE" ls z | grep -q "\.bin\$" &&
	"$DSTAGE" cat z train/n01/s29.txt | cmp - src/train/n01/s29.txt &&
	"$DSTAGE" ls -l z val/v1 >l && test_grep "val/v1" l
'

test_expect_success 's3://BUCKET (the whole bucket) and a trailing slash work' '
	"$DSTAGE" pack -q -p 4 s3://data/ds/ slash && same_pack serial slash &&
	"$S3TOOL" put src/val/v1 s3://bad/only/v1 &&
	"$DSTAGE" pack -q s3://bad whole && "$DSTAGE" ls whole >l && test_grep "^only/v1" l &&
	"$S3TOOL" rm s3://bad
'

# bad_key KEY WHAT MESSAGE: a bucket holding KEY exactly (a server that
# refuses it, or stores another name, e.g. with the dot segments resolved,
# cannot test it: a skip), packed: refused, exit 1, MESSAGE said, nothing
# written.  (The pack's destination is not "out", a file other tests write.)
bad_key() {
	if ! "$S3TOOL" put src/val/v1 "s3://bad/$1" 2>/dev/null ||
		! "$S3TOOL" ls s3://bad 2>/dev/null | cut -d" " -f1 | grep -qxF "$1"; then
		test_skip "bad key '$1'" "the server cannot store such a key (refused, or stored under another name)"
		"$S3TOOL" rm s3://bad
		return
	fi
	printf '%s\n' "$3" >want.msg
	test_expect_success "bad key '$1': $2" '
		test_status --show err 1 "$DSTAGE" pack s3://bad/p nopk 2>err &&
		test_grep -F -f want.msg err && ! test -e nopk
	'
	"$S3TOOL" rm s3://bad
}
bad_key "p/a/../x" "a .. component" "'s3://bad/p/a/../x': "
bad_key "p/a/./x" "a . component" "'s3://bad/p/a/./x': "
bad_key "p/a//x" "an empty component" "'s3://bad/p/a//x': "
bad_key "p//abs" "an absolute path under the prefix" "'s3://bad/p//abs': "
bad_key "p/.dstage/x" "the reserved name" "'s3://bad/p/.dstage/x': "
"$S3TOOL" put src/val/v1 s3://bad/p/d/e
bad_key "p/d" "a key that is also a directory" "'s3://bad/p/d': a key that is also a directory of other keys"

for mode in 503 cut short; do
	s3_proxy $mode 3 6
	test_expect_success "faults ($mode, every 3rd GET, 6 of them) are retried: the same pack" '
		AWS_ENDPOINT_URL='"$S3_PROXY_URL"' mpirun_n 2 "$DSTAGE" pack -p 4 s3://data/ds f'$mode' >out &&
		test "$(s3_faults)" = 6 && test_grep "^s3: .* 6 retries" out && same_pack serial f'$mode'
	'
done
s3_proxy_stop

s3_proxy region 1
test_expect_success 'a bucket in another region (301 PermanentRedirect): named, both regions said' '
	test_status --show err 1 env AWS_ENDPOINT_URL='"$S3_PROXY_URL"' "$DSTAGE" pack s3://data/ds nopk 2>err &&
	test_grep "s3://data/ds/.: wrong region: AWS_REGION is .us-east-1., the bucket is in .eu-west-1. (301 PermanentRedirect)" err &&
	! test -e nopk
'
s3_proxy_stop

test_expect_success 'a missing bucket: exit 1, named, nothing written' '
	test_status --show err 1 "$DSTAGE" pack s3://nosuchbucket/ds nopk 2>err &&
	test_grep "dstage: pack: .s3://nosuchbucket.: no such bucket" err && ! test -e nopk
'

test_expect_success 'an empty prefix: nothing to pack' '
	test_status --show err 1 "$DSTAGE" pack s3://data/nothing-here nopk 2>err &&
	test_grep "nothing to pack" err && ! test -e nopk
'

test_expect_success 'a wrong access key: access denied, the secret never printed' '
	test_status --show err 1 env AWS_ACCESS_KEY_ID=NOTAKEY AWS_SECRET_ACCESS_KEY=TopSecret42 DSTAGE_LOG=debug \
		"$DSTAGE" pack -v s3://data/ds nopk >out 2>err &&
	test_grep "access denied (403 InvalidAccessKeyId)" err &&
	! grep -q TopSecret42 err out && ! test -e nopk
'

test_expect_success 'no credentials at all: a clear error' '
	test_status --show err 1 env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$DSTAGE" pack s3://data/ds nopk 2>err &&
	test_grep "no S3 credentials" err && ! test -e nopk
'

test_expect_success 'credentials from ~/.aws/credentials with AWS_PROFILE' '
	mkdir -p home/.aws &&
	printf "[default]\naws_access_key_id = NOTAKEY\naws_secret_access_key = x\n[lab]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n" \
		>home/.aws/credentials &&
	printf "[profile lab]\nregion = us-east-1\n" >home/.aws/config &&
	env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SHARED_CREDENTIALS_FILE \
		-u AWS_CONFIG_FILE HOME="$TRASH/home" AWS_PROFILE=lab \
		"$DSTAGE" pack -q -p 4 s3://data/ds prof &&
	same_pack serial prof
'

test_expect_success 'an object changed between the listing and its GET: stops, named' '
	echo changed >changed &&
	test_status --show err 1 env DSTAGE_TEST_AFTER_SCAN="\"$S3TOOL\" put changed s3://data/ds/train/n01/s3.txt" \
		"$DSTAGE" pack -p 2 s3://data/ds nopk 2>err &&
	test_grep "s3://data/ds/train/n01/s3.txt.: changed since it was listed (ETag differs)" err &&
	test_grep "pack failed, nothing written" err && ! test -e nopk
'

test_done
