#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage stage --expand-tar of a plain tree holding tar shards (issue 28
# item 3): every *.tar appears through the shim as a directory of its
# members, byte for byte what tar -x gives, on 2 simulated nodes (remote
# members through the service); cat, ls and Python read them; each tar is
# opened once by the scan (its headers) and once by the one reader of its
# partition; the epoch shuffle deals members of all shards together; run
# takes --expand-tar as stage does.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

command -v tar >/dev/null || skip_all "no GNU tar"
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'

test_expect_success 'setup: three shards (gnu, posix, Python pax) and plain files' '
	mkdir -p src/shards src/meta ref &&
	for i in 0 1 2; do
		mkdir -p m$i/s$i/sub &&
		for j in $(seq 1 16); do
			head -c $((j * 700 + i)) /dev/urandom >m$i/s$i/$j.jpg &&
			echo "class $((j % 4))" >m$i/s$i/$j.cls || return 1
		done &&
		echo nested >m$i/s$i/sub/deep.txt &&
		ln -s ../1.cls m$i/s$i/sub/link.cls || return 1
	done &&
	mkdir -p "m0/s0/$(printf "%0140d" 0 | tr 0 L)" &&
	echo long >"m0/s0/$(printf "%0140d" 0 | tr 0 L)/$(printf "%0120d" 0 | tr 0 M)" &&
	tar --format=gnu -cf src/shards/shard-0.tar -C m0 . &&
	tar --format=posix -cf src/shards/shard-1.tar -C m1 s1 &&
	"$PY" -c "import tarfile; t = tarfile.open(\"src/shards/shard-2.tar\", \"w\", format=tarfile.PAX_FORMAT); t.add(\"m2/s2\", \"s2\"); t.close()" &&
	echo "not a shard" >src/meta/readme.txt &&
	# the tree the mount must show: every tar extracted by tar into a directory of its name
	cp -a src/meta ref/ && mkdir -p ref/shards &&
	for i in 0 1 2; do
		mkdir ref/shards/shard-$i.tar && tar -xf src/shards/shard-$i.tar -C ref/shards/shard-$i.tar || return 1
	done &&
	(cd ref && find . -mindepth 1 | sed "s|^\./||" | sort) >ref.paths &&
	(cd ref && find . -type f | sed "s|^\./||" | sort) >ref.files
'

test_expect_success 'stage --expand-tar on 2 nodes' '
	mpirun_n 2 "$DSTAGE" stage src --expand-tar --to "$SHM" --job "$JOB" --node-per-rank >stage.out &&
	nf=$(wc -l <ref.files) &&
	test_grep "staged $nf files" stage.out &&
	# the payload read is the members and the plain file, not the tars
	bytes=$(cd ref && find . -type f -printf "%s\n" | awk "{ s += \$1 } END { print s }") &&
	test_grep "read from shared FS: $bytes bytes" stage.out
'

DSTAGE_LOG=warn
serve_start 2
test_expect_success 'served' 'serve_up 2'

for k in 0 1; do
	test_expect_success "node $k: cat of every member through the shim, byte for byte" '
		sed "s|^|$MOUNT/|" ref.files | shim_on '$k' xargs -d "\n" cat >got &&
		sed "s|^|ref/|" ref.files | xargs -d "\n" cat >want &&
		cmp got want
	'
done

test_expect_success 'find and ls -l of the mount: the tree tar -x makes, shards as directories' '
	shim_on 0 find "$MOUNT" -mindepth 1 | sed "s|^$MOUNT/||" | grep -v "^\.dstage" | sort >got &&
	test_cmp ref.paths got &&
	shim_on 1 ls -l "$MOUNT/shards" >ls.out &&
	grep "^dr.x" ls.out | grep -c "shard-[012].tar$" >n && echo 3 >want && test_cmp want n &&
	shim_on 0 readlink "$MOUNT/shards/shard-1.tar/s1/sub/link.cls" >got &&
	echo ../1.cls >want && test_cmp want got &&
	shim_on 0 cat "$MOUNT/shards/shard-1.tar/s1/sub/link.cls" >got &&
	test_cmp ref/shards/shard-1.tar/s1/1.cls got
'

test_expect_success PYTHON 'Python os.walk and open() read the members' '
	cat >walk.py <<-\EOF &&
	import hashlib, os, sys
	root = sys.argv[1]
	for top, dirs, files in os.walk(root):
	    dirs[:] = sorted(d for d in dirs if d != ".dstage")
	    for f in sorted(files):
	        p = os.path.join(top, f)
	        with open(p, "rb") as fh:
	            print(os.path.relpath(p, root), hashlib.sha256(fh.read()).hexdigest())
	EOF
	shim_on 1 "$PY" walk.py "$MOUNT" >got &&
	"$PY" walk.py ref >want &&
	test_cmp want got
'

test_expect_success 'the epoch shuffle deals the members of every shard together' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/0/all" >e0 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/0/all" >e1 &&
	# every sample once (the shorter share padded with one repeat)
	cat e0 e1 | sort -u >all &&
	sort ref.files >want && test_cmp want all &&
	test $(cat e0 e1 | wc -l) -le $(($(wc -l <ref.files) + 1)) &&
	# in each node list, the shard changes from one sample to the next
	# far more often than a per-shard order would (2 switches at most)
	for e in e0 e1; do
		sw=$(sed -n "s|^shards/\(shard-[0-9]\)\.tar/.*|\1|p" $e |
		     awk "NR > 1 && \$0 != p { n++ } { p = \$0 } END { print n + 0 }") &&
		echo "$e: $sw shard switches" &&
		test "$sw" -ge 10 || return 1
	done
'

serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'

test_expect_success STRACE 'each tar opened twice per job: the scan (headers, by any rank), its one reader' '
	# -ff: one file per process, so no call is split by another process
	strace -f -ff -qq -e trace=open,openat,openat2 -o trace \
		$ds_mpiexec -n 2 "$DSTAGE" stage src --expand-tar --to "$SHM" --job st2 \
		--node-per-rank -q &&
	for i in 0 1 2; do
		n=$(cat trace.* | grep -cE "shard-$i\.tar\", (\{flags=)?O_RDONLY.*= [0-9]+$") &&
		echo "shard-$i.tar: $n opens" && test "$n" = 2 || return 1
	done &&
	# the headers of the 3 tars of one directory are read by both ranks,
	# not by the one whose walk met them (the scan: openat from the root;
	# the readers: openat2, or openat from the parent without openat2)
	grep -lE "^openat\([0-9]+, \"shards/shard-[0-9]\.tar\", O_RDONLY.*= [0-9]+$" trace.* >scanners &&
	cat scanners && test $(wc -l <scanners) = 2
'

# dstage run takes --expand-tar too (stage, then serve)
timeout -k 5 "${DSTAGE_TEST_MPI_TIMEOUT:-120}" $ds_mpiexec -n 2 \
	"$DSTAGE" run src --expand-tar --force --to "$SHM" --job "$JOB" --node-per-rank -q >serve.log 2>&1 &
SERVE_PID=$!
test_bg $SERVE_PID
test_expect_success 'dstage run SRC --expand-tar: staged and served' 'serve_up 2'
test_expect_success 'members read through the shim on node 1 after run' '
	for f in shards/shard-0.tar/s0/16.jpg shards/shard-2.tar/s2/sub/deep.txt meta/readme.txt; do
		shim_on 1 cat "$MOUNT/$f" | cmp - "ref/$f" || return 1
	done
'
serve_stop
test_expect_success 'dstage stop ends the run, exit 0' 'test "$(cat serve.rc)" = 0'

test_expect_success '--expand-tar is for a plain tree: refused with a pack' '
	"$DSTAGE" pack -q src/meta pack &&
	test_status 1 mpirun_n 1 "$DSTAGE" stage pack --expand-tar --to "$SHM" --job p1 2>err &&
	test_grep "expand-tar: for a plain tree" err
'

test_done
