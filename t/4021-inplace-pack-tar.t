#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage pack --in-place --expand-tar (issue 28 item 3): OUT holds only the
# manifest of the tar shards' members (a small fraction of the tars); ls,
# cat and verify read the members from the tars; stage opens each tar once
# (no scan: the manifest has the members) and the shim shows every member
# byte for byte as tar -x does.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'

test_expect_success 'setup: four shards of 40 samples and a plain file' '
	mkdir -p src/train ref/train &&
	for i in 0 1 2 3; do
		mkdir -p m$i &&
		for j in $(seq 1 40); do
			head -c $((j * 300 + i * 7)) /dev/urandom >m$i/$i-$j.bin || return 1
		done &&
		tar --format=posix -cf src/train/shard-$i.tar -C m$i . &&
		mkdir ref/train/shard-$i.tar && tar -xf src/train/shard-$i.tar -C ref/train/shard-$i.tar ||
		return 1
	done &&
	echo labels >src/classes.txt && cp src/classes.txt ref/ &&
	(cd ref && find . -mindepth 1 | sed "s|^\./||" | sort) >ref.paths &&
	(cd ref && find . -type f | sed "s|^\./||" | sort) >ref.files
'

test_expect_success '--expand-tar without --in-place is a usage error' '
	test_status 2 "$DSTAGE" pack --expand-tar src nope 2>err &&
	test_grep "expand-tar wants --in-place" err && ! test -e nope
'

test_expect_success 'pack --in-place --expand-tar: OUT is the manifest, small beside the tars' '
	"$DSTAGE" pack -q --in-place --expand-tar -p 8 src pack &&
	ls pack >files && echo index.h5 >want && test_cmp want files &&
	tars=$(cat src/train/*.tar | wc -c) && idx=$(stat -c %s pack/index.h5) &&
	echo "index.h5 $idx bytes, tars $tars" && test $((idx * 4)) -lt "$tars"
'

test_expect_success 'ls lists the members; cat and verify read them from the tars' '
	"$DSTAGE" ls pack | sed "s|/$||" | sort >got && test_cmp ref.paths got &&
	"$DSTAGE" cat pack train/shard-2.tar/2-17.bin >got &&
	test_cmp ref/train/shard-2.tar/2-17.bin got &&
	"$DSTAGE" verify pack
'

test_expect_success 'one partition per tar at most: -p 8 over 5 sources makes 5' '
	"$DSTAGE" verify pack >v.out && test_grep "in 5 partitions" v.out
'

test_expect_success 'stage on 2 nodes' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job "$JOB" --node-per-rank >stage.out &&
	test_grep "staged $(wc -l <ref.files) files" stage.out
'

serve_start 2
test_expect_success 'served' 'serve_up 2'
for k in 0 1; do
	test_expect_success "node $k: every member through the shim, byte for byte" '
		sed "s|^|$MOUNT/|" ref.files | shim_on '$k' xargs -d "\n" cat >got &&
		sed "s|^|ref/|" ref.files | xargs -d "\n" cat >want &&
		cmp got want &&
		shim_on '$k' find "$MOUNT" -mindepth 1 | sed "s|^$MOUNT/||" | grep -v "^\.dstage" | sort >got &&
		test_cmp ref.paths got
	'
done
serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'

test_expect_success STRACE 'stage of the in-place pack opens each tar once' '
	# -ff: one file per process, so no call is split by another process
	strace -f -ff -qq -e trace=open,openat,openat2 -o trace \
		$ds_mpiexec -n 2 "$DSTAGE" stage pack --to "$SHM" --job st2 --node-per-rank -q &&
	for i in 0 1 2 3; do
		n=$(cat trace.* | grep -cE "shard-$i\.tar\", (\{flags=)?O_RDONLY.*= [0-9]+$") &&
		echo "shard-$i.tar: $n opens" && test "$n" = 1 || return 1
	done
'

test_done
