#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage stage: placement, replicas, bytes, read-once, refusal and --force.
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
payload_sum() {
	# payload bytes of every partition, read from the HDF5 files by h5dump
	# (independent of dstage's own reader)
	for f in "$1"/part-*.h5; do
		h5dump -H -d /payload "$f" | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p'
	done | awk '{s += $1} END {print s + 0}'
}

test_expect_success 'set up a sample tree and its pack' '
	"$T/mksample" -c 3 -n 12 -v 2 src && seq 1 30000 >src/train/numbers.txt &&
	"$DSTAGE" pack -q -p 6 --replicate val src pack &&
	ls pack/part-*.h5 >parts && test $(wc -l <parts) -ge 6
'

test_expect_success 'stage on 3 simulated nodes, R=1: every file on one node, val on all' '
	mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job r1 --node-per-rank >out &&
	"$T/storecheck" "$SHM/dstage.$uid.r1" src >holders &&
	find src -type f | wc -l >want && wc -l <holders >got && test_cmp want got &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 3 : \$2 != 1" holders >wrong &&
	test_cmp /dev/null wrong
'

test_expect_success 'node stores and the job directory are 0700' '
	test "$(stat -c %a "$SHM/dstage.$uid.r1")" = 700 &&
	for k in 0 1 2; do test "$(stat -c %a "$SHM/dstage.$uid.r1/$k")" = 700 || exit 1; done
'

# the manifest: its seal header and everything after the 4 KiB user block
test_expect_success 'R=1: bytes read from the shared FS = payload + manifest + 128-byte partition seals' '
	want=$(payload_sum pack) && man=$(($(stat -c %s pack/index.h5) - 4096 + 128)) &&
	seals=$((128 * $(wc -l <parts))) &&
	test_grep "read from shared FS: $((want + man + seals)) bytes (payload $want + manifest $man + partition seals $seals;" out
'

test_expect_success 'R=2: every file on two nodes, still read once' '
	mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job r2 -R 2 --node-per-rank >out2 &&
	"$T/storecheck" "$SHM/dstage.$uid.r2" src >holders2 &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 3 : \$2 != 2" holders2 >wrong2 &&
	test_cmp /dev/null wrong2 &&
	want=$(payload_sum pack) && man=$(($(stat -c %s pack/index.h5) - 4096 + 128)) &&
	test_grep "read from shared FS: $((want + man + 128 * $(wc -l <parts))) bytes (payload $want " out2 &&
	test_grep "forwarded over MPI: [1-9]" out2
'

test_expect_success 'placement is deterministic: same pack, same nodes => same stores' '
	mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job r2b -R 2 --node-per-rank -q &&
	for k in 0 1 2; do
		cmp "$SHM/dstage.$uid.r2/$k/store" "$SHM/dstage.$uid.r2b/$k/store" || exit 1
	done
'

test_expect_success '-R above the node count is capped with a warning' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job r9 -R 9 --node-per-rank -q 2>err &&
	test_grep "only 2 node" err &&
	"$T/storecheck" "$SHM/dstage.$uid.r9" src >h9 &&
	awk "\$2 != 2" h9 >w9 && test_cmp /dev/null w9
'

test_expect_code 1 'staging twice into the same job is refused' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job r9 --node-per-rank -q 2>err;
	rc=$?; grep "already staged" err || exit 9; exit $rc
'

test_expect_success '--force replaces the store' '
	mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --job r9 --node-per-rank --force -q &&
	"$T/storecheck" "$SHM/dstage.$uid.r9" src >h9b &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 3 : \$2 != 1" h9b >w9b && test_cmp /dev/null w9b &&
	! ls -d "$SHM/dstage.$uid.r9"/*.old* "$SHM/dstage.$uid.r9"/*.partial 2>/dev/null
'

test_expect_success 'two ranks per node share the work of one node' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job shared -q &&
	"$T/storecheck" "$SHM/dstage.$uid.shared" src >hs &&
	awk "\$2 != 1" hs >ws && test_cmp /dev/null ws &&
	test ! -e "$SHM/dstage.$uid.shared/1"
'

# fmt_size N: as dstage prints a size (common.c's ds_fmt_size)
fmt_size() {
	awk -v n="$1" 'BEGIN { split("B KiB MiB GiB TiB PiB", u, " "); i = 1; v = n
		while (v >= 1024 && i < 6) { v /= 1024; i++ }
		if (i == 1) printf "%d B\n", n; else printf "%.1f %s\n", v, u[i] }'
}
# summary_sizes JOBDIR: the "per node: min A, max B" dstage should print
summary_sizes() {
	stat -c %s "$1"/[0-9]*/store | sort -n >sizes &&
	echo "per node: min $(fmt_size "$(head -n 1 sizes)"), max $(fmt_size "$(tail -n 1 sizes)");"
}

# (MPICH 4.0.2 orders unsigned 64-bit values as signed in MPI_MAX: the
# summary's min once came out as 16384.0 PiB on one node)
test_expect_success 'the summary names the smallest and the largest node store' '
	summary_sizes "$SHM/dstage.$uid.r1" >want &&
	grep -o "^per node: min [^,]*, max [^;]*;" out >got && test_cmp want got &&
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job sum1 >out1 &&
	summary_sizes "$SHM/dstage.$uid.sum1" >want &&
	grep -o "^per node: min [^,]*, max [^;]*;" out1 >got && test_cmp want got &&
	"$DSTAGE" clean --to "$SHM" --job sum1
'

test_expect_success 'zlib pack: kept compressed, or inflated with --inflate' '
	"$DSTAGE" pack -q -p 3 -z zlib --replicate val src zpack &&
	mpirun_n 2 "$DSTAGE" stage zpack --to "$SHM" --job z1 --node-per-rank -q &&
	"$T/storecheck" "$SHM/dstage.$uid.z1" src >hz &&
	mpirun_n 2 "$DSTAGE" stage zpack --to "$SHM" --job z2 --node-per-rank --inflate -q &&
	"$T/storecheck" "$SHM/dstage.$uid.z2" src >hz2 && test_cmp hz hz2 &&
	s1=$(cat "$SHM/dstage.$uid.z1"/*/store | wc -c) &&
	s2=$(cat "$SHM/dstage.$uid.z2"/*/store | wc -c) && test "$s2" -gt "$s1"
'

test_expect_success 'dstage status shows what each node holds' '
	"$DSTAGE" status --to "$SHM" --job r1 >st &&
	test $(grep -c "^[0-9]" st) = 3 && test_grep "^node" st
'

test_expect_success 'dstage clean removes the job store' '
	"$DSTAGE" clean --to "$SHM" --job r1 && test ! -e "$SHM/dstage.$uid.r1" &&
	"$DSTAGE" clean --to "$SHM" --job r1
'

test_expect_code 2 'usage error: no --to' '"$DSTAGE" stage pack'
test_done
