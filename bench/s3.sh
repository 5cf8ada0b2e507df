#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/s3.sh: object storage (issue 14), against the standard tools, on a
# local S3 server (s3rver from npm, as in the tests: t/lib-s3.sh), side by
# side in one run (A B A B ..., the order alternating), medians:
#   1. stage-in of a pack from the bucket (mpiexec -n 2, --node-per-rank)
#      vs `aws s3 cp --recursive` of the same objects into /dev/shm
#   2. reading a dataset of 128 KiB files once in random order: dstage stage
#      from the bucket + the shim (stage time included) vs the same files
#      read through an s3fs mount of the bucket; 3. one more epoch of each
#   4. dstage pack s3:// of many small objects with -n 2 vs
#      `aws s3 cp --recursive` of them to disk
# The server is one node.js process on this machine: absolute rates say
# little about a real store; the ratios say how each tool uses one.
#   sh bench/s3.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
S3RVER="$top/build/npm/node_modules/.bin/s3rver"
S3TOOL="$top/build/t/s3-tool"
[ -x "$S3RVER" ] || make -C "$top" --no-print-directory npm-s3 >/dev/null 2>&1 || :
[ -x "$S3RVER" ] || { say "s3rver not installed (make npm-s3): skipped"; exit 0; }
[ -x "$S3TOOL" ] || { say "$S3TOOL not built: skipped"; exit 0; }
# Debian's awscli (DEB_BENCH), before any other aws on PATH
HAVE_AWS=$( [ -x /usr/bin/aws ] && echo /usr/bin/aws || command -v aws || :)
HAVE_S3FS=$(command -v s3fs || :)
if [ $QUICK = 1 ]; then NF=400 NSMALL=2000; else NF=2000 NSMALL=20000; fi

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WS/s3rver"
NODE_OPTIONS=--openssl-legacy-provider "$S3RVER" -d "$WS/s3rver" -a 127.0.0.1 -p "$port" -s --no-vhost-buckets --configure-bucket bench \
	>"$W/s3rver.log" 2>&1 &
_bgpids="$_bgpids $!"
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_PAGER= AWS_CONFIG_FILE=/nonexistent
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
i=0
until "$S3TOOL" ls s3://bench >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 100 ] && { say "s3rver did not start"; exit 1; }; sleep 0.1
done
awscp() { "$HAVE_AWS" --endpoint-url "$AWS_ENDPOINT_URL" s3 cp --recursive --only-show-errors "$@"; }

# the dataset: NF files of 128 KiB in 20 directories; its pack; both uploaded
i=0
while [ $i -lt "$NF" ]; do
	d="$WS/src/d$((i % 20))"; mkdir -p "$d"
	head -c 131072 /dev/urandom >"$d/f$i.bin"; i=$((i + 1))
done
"$DSTAGE" pack -q --no-fsync -p 8 "$WS/src" "$WS/pack"
"$S3TOOL" put-tree "$WS/src" s3://bench/tree
"$S3TOOL" put-tree "$WS/pack" s3://bench/pk
(cd "$WS/src" && find . -type f | sed 's|^\./||') | shuf --random-source=/dev/zero >"$W/list"
MB=$((NF / 8))
MNT=/dstage-bench-s3-$$

# ---- 1. stage-in vs aws s3 cp ----------------------------------------------
: >"$W/t_st"; : >"$W/t_cp"
r=0
while [ $r -lt "$ROUNDS" ]; do
	for who in $( [ $((r % 2)) = 0 ] && echo "d a" || echo "a d"); do
		case $who in
		d)
			t0=$(now)
			mpiexec.mpich -n 2 "$DSTAGE" stage s3://bench/pk --to "$W/st" --job s$r --node-per-rank -q
			elapsed "$t0" >>"$W/t_st"
			"$DSTAGE" clean --to "$W/st" --job s$r >/dev/null
			;;
		a)
			[ -n "$HAVE_AWS" ] || continue
			t0=$(now); awscp s3://bench/pk "$W/cp"; elapsed "$t0" >>"$W/t_cp"; rm -rf "$W/cp"
			;;
		esac
	done
	r=$((r + 1))
done
ms=$(med "$W/t_st"); mc=$( [ -n "$HAVE_AWS" ] && med "$W/t_cp" || echo -)
row "stage-in of a $MB MiB pack from the bucket, 2 nodes: dstage stage vs aws s3 cp --recursive" \
	"$(fmt_s "$ms")" "aws s3 cp $(fmt_s "$mc")" "$(ratio "$mc" "$ms")" ">= 1.0" "#14"

# ---- 2, 3. read once (stage included) and one more epoch: shim vs s3fs -------
S3FS_OK=
if [ -n "$HAVE_S3FS" ]; then
	echo "S3RVER:S3RVER" >"$W/passwd" && chmod 600 "$W/passwd"
	mkdir -p "$W/fuse"
	if s3fs bench "$W/fuse" -o url="$AWS_ENDPOINT_URL" -o use_path_request_style \
		-o passwd_file="$W/passwd" -o endpoint=us-east-1 >"$W/s3fs.log" 2>&1 &&
		sleep 1 && test -d "$W/fuse/tree"; then
		S3FS_OK=1
		fusermount -u "$W/fuse" 2>/dev/null || :
	else
		fusermount -u "$W/fuse" 2>/dev/null || :
		say "s3fs cannot mount the local bucket ($(tail -n 2 "$W/s3fs.log" | tr '\n' ' ')): its rows are '-'"
	fi
fi
readall() { "$READER" read "$1" "$W/list" | awk '{ print $3 }'; }
: >"$W/d1"; : >"$W/d2"; : >"$W/f1"; : >"$W/f2"
r=0
while [ $r -lt "$ROUNDS" ]; do
	for who in $( [ $((r % 2)) = 0 ] && echo "d f" || echo "f d"); do
		case $who in
		d)
			t0=$(now)
			# one node, 2 ranks: the partitions spread over both
			mpiexec.mpich -n 2 "$DSTAGE" stage s3://bench/pk --to "$W/st" --job e$r -q
			shim "$(jobdir "$W/st" e$r)" 0 "$MNT" "$READER" read "$MNT" "$W/list" >/dev/null
			elapsed "$t0" >>"$W/d1"
			shim "$(jobdir "$W/st" e$r)" 0 "$MNT" "$READER" read "$MNT" "$W/list" |
				awk '{ print $3 }' >>"$W/d2"
			"$DSTAGE" clean --to "$W/st" --job e$r >/dev/null
			;;
		f)
			[ -n "$S3FS_OK" ] || continue
			s3fs bench "$W/fuse" -o url="$AWS_ENDPOINT_URL" -o use_path_request_style \
				-o passwd_file="$W/passwd" -o endpoint=us-east-1
			_mounts="$_mounts $W/fuse"
			t0=$(now); readall "$W/fuse/tree" >/dev/null; elapsed "$t0" >>"$W/f1"
			readall "$W/fuse/tree" >>"$W/f2"
			fusermount -u "$W/fuse" || :
			;;
		esac
	done
	r=$((r + 1))
done
d1=$(med "$W/d1"); d2=$(med "$W/d2")
f1=$( [ -n "$S3FS_OK" ] && med "$W/f1" || echo -); f2=$( [ -n "$S3FS_OK" ] && med "$W/f2" || echo -)
row "read $NF files of 128 KiB once, random order: dstage stage + shim vs s3fs mount" \
	"$(fmt_s "$d1")" "s3fs $(fmt_s "$f1")" "$(ratio "$f1" "$d1")" ">= 5" "#14"
row "one more epoch of the same: shim vs s3fs mount" \
	"$(fmt_s "$d2")" "s3fs $(fmt_s "$f2")" "$(ratio "$f2" "$d2")" ">= 20" "#14"

# ---- 4. pack s3:// of many small objects, -n 2, vs aws s3 cp ----------------
i=0
while [ $i -lt "$NSMALL" ]; do
	d="$WS/small/d$((i % 100))"; mkdir -p "$d"
	head -c $((1024 + (i * 2654435761) % 7168)) /dev/urandom >"$d/s$i"; i=$((i + 1))
done
"$S3TOOL" put-tree "$WS/small" s3://bench/small
: >"$W/pk"; : >"$W/ac"
r=0
while [ $r -lt "$ROUNDS" ]; do
	for who in $( [ $((r % 2)) = 0 ] && echo "d a" || echo "a d"); do
		case $who in
		d)
			t0=$(now)
			mpiexec.mpich -n 2 "$DSTAGE" pack -q --no-fsync -p 4 s3://bench/small "$WS/spk"
			elapsed "$t0" >>"$W/pk"; rm -rf "$WS/spk"
			;;
		a)
			[ -n "$HAVE_AWS" ] || continue
			t0=$(now); awscp s3://bench/small "$WS/scp"; elapsed "$t0" >>"$W/ac"; rm -rf "$WS/scp"
			;;
		esac
	done
	r=$((r + 1))
done
mp=$(med "$W/pk"); ma=$( [ -n "$HAVE_AWS" ] && med "$W/ac" || echo -)
row "dstage pack s3:// of $NSMALL small objects (1-8 KiB), -n 2, vs aws s3 cp --recursive to disk" \
	"$(fmt_s "$mp")" "aws s3 cp $(fmt_s "$ma")" "$(ratio "$ma" "$mp")" "-" ""

note "s3: a local s3rver $(sed -n 's/^S3RVER_VERSION := //p' "$top/Makefile") (npm) on 127.0.0.1, one node.js process on the same 2 cores as the clients; aws-cli $("${HAVE_AWS:-false}" --version 2>/dev/null | cut -d' ' -f1 | cut -d/ -f2)${HAVE_S3FS:+, s3fs $(s3fs --version 2>/dev/null | head -1 | sed 's/.* V\([0-9.]*\).*/\1/')}; $NF files of 128 KiB ($MB MiB), packed into 8 partitions; $NSMALL objects of 1-8 KiB for the pack row; medians of $ROUNDS rounds, the order alternating.${S3FS_OK:+}$( [ -n "$S3FS_OK" ] || echo " s3fs could not mount the local bucket here: its rows have no peer figure.")"
