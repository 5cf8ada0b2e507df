#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make demo-s3: object storage end to end against a real S3 server on
# loopback (s3rver from npm, as in the tests), on 2 simulated nodes:
#   the sample dataset uploaded as objects -> dstage pack s3:// (mpiexec -n 2)
#   -> the pack written to the bucket -> verify/ls in the bucket -> dstage
#   stage s3:// (R=2) -> every file read through the shim on both nodes and
#   compared with the source -> clean, the server stopped
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
B="$top/build/bin/dstage"
TOOL="$top/build/t/s3-tool"
S3RVER="$top/build/npm/node_modules/.bin/s3rver"
[ -x "$S3RVER" ] || make -C "$top" --no-print-directory npm-s3
[ -x "$S3RVER" ] || { echo "demo-s3: s3rver could not be installed (npm)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dstage-demo-s3.XXXXXX")
to=/dev/shm
job="demos3$$"
mount="/dstage-demo-$$"
s3pid=
cleanup() {
	[ -n "$s3pid" ] && kill "$s3pid" 2>/dev/null && wait "$s3pid" 2>/dev/null
	"$B" clean --to "$to" --job "$job" 2>/dev/null || :
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
step() { printf '\n== %s\n' "$*"; }

step "an S3 server on 127.0.0.1 (s3rver), bucket 'demo'"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
t0=$(date +%s.%N)
NODE_OPTIONS=--openssl-legacy-provider "$S3RVER" -d "$work/s3" -a 127.0.0.1 -p "$port" -s \
	--no-vhost-buckets --configure-bucket demo >"$work/s3rver.log" 2>&1 &
s3pid=$!
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_REGION=us-east-1
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
until "$TOOL" ls s3://demo >/dev/null 2>&1; do sleep 0.1; done
echo "up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s on $AWS_ENDPOINT_URL"

step "the sample dataset uploaded as objects under s3://demo/raw"
"$top/build/t/mksample" -c 4 -n 32 -v 4 "$work/src"
"$TOOL" put-tree "$work/src" s3://demo/raw
"$TOOL" ls s3://demo/raw | wc -l | sed 's/^/objects: /'

step "dstage pack -p 4 s3://demo/raw s3://demo/pack (mpiexec -n 2)"
mpiexec.mpich -n 2 "$B" pack -p 4 --replicate val s3://demo/raw s3://demo/pack
"$TOOL" ls s3://demo/pack
"$B" verify s3://demo/pack
"$B" ls -l s3://demo/pack | head -5

step "dstage stage s3://demo/pack on 2 simulated nodes, R=2"
mpiexec.mpich -n 2 "$B" stage s3://demo/pack --to "$to" --job "$job" --node-per-rank -R 2

step "every file through the shim on node 0 and node 1"
bad=0
want=$(cd "$work/src" && find . -type f | sort | xargs -d '\n' sha256sum | sha256sum)
for node in 0 1; do
	got=$( eval "$("$B" env --to "$to" --job "$job" --node $node --mount "$mount")";
		sh -c 'cd "$1" && find . -type f | sort | xargs -d "\n" sha256sum' sh "$mount" | sha256sum )
	if [ "$got" = "$want" ]; then echo "node $node: every file identical to the source"
	else echo "node $node: MISMATCH"; bad=1; fi
done
[ $bad = 0 ] && echo "demo-s3: ok"
exit $bad
