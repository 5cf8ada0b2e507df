#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs on separate hosts (t/lib-hosts.sh; docs/outputs.md):
# jobs/train.sbatch, unmodified, with DSTAGE_OUTPUTS and DSTAGE_DRAIN_TO on
# the shared file system.  Every host has its own /dev/shm (the node stores
# and their output areas), its own network; MPI goes over TCP.  In the
# training step every node writes an output through the mount; node 0 a
# checkpoint (written to a temporary name, renamed) and node 1 a directory
# of samples renamed into place; every node reads every other node's output
# (bytes fetched from the host that holds them) and node 3 checks node 0's
# checkpoint byte for byte; node 2 makes files through mkstemp and `sed -i`
# (temporary name, then rename) and node 3 reads them.  The job drains
# before it cleans: every output is in the drain directory under its last
# name, no temporary left, and no store is left on any host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
hosts_job_env DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE DSTAGE_FAULT

hosts_job_start
[ "$n" -ge 4 ] || skip_all "4 hosts needed (DSTAGE_HOSTS=$n)"

submit_nodes=$n submit_timeout=180 # submit OUT SCRIPT (t/lib-slurm.sh): every host, 180 s

cat >write.sh <<\EOF
#!/bin/sh
rec=$1 n=$2 k=$SLURM_NODEID m=$DSTAGE_MOUNT/out
hostname >"$rec/host.$k"
head -c 300000 /dev/urandom >"$rec/node$k.ref" &&
cp "$rec/node$k.ref" "$m/node$k.bin" || exit 1
if [ "$k" = 0 ]; then
	mkdir "$m/ckpt" && head -c 3000000 /dev/urandom >"$m/ckpt/e1.tmp" &&
	mv "$m/ckpt/e1.tmp" "$m/ckpt/e1.pt" && cp "$m/ckpt/e1.pt" "$rec/ckpt.ref" || exit 1
fi
if [ "$k" = 1 ]; then
	mkdir "$m/samples.tmp" && for i in 1 2 3; do echo "sample $i" >"$m/samples.tmp/s$i.txt" || exit 1; done &&
	mv "$m/samples.tmp" "$m/samples" || exit 1
fi
if [ "$k" = 2 ]; then
	# temporary names (mkstemp, sed -i's mkostemp) go through the service
	printf "lr=0.1\n" >"$m/conf.txt" && sed -i s/0.1/0.01/ "$m/conf.txt" &&
	/usr/bin/python3 -c "
import ctypes, os, sys
b = ctypes.create_string_buffer(sys.argv[1].encode())
fd = ctypes.CDLL(None).mkstemp(b)
assert fd >= 0
os.write(fd, b'mkstemp\\n')
os.close(fd)
os.rename(b.value.decode(), sys.argv[2])" "$m/ms.XXXXXX" "$m/ms.ckpt" || exit 1
fi
# every other node's output, fetched from its host
j=0
while [ $j -lt "$n" ]; do
	i=0
	while [ ! -e "$m/node$j.bin" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	sha256sum <"$m/node$j.bin" >"$rec/sum.$j.by$k" || exit 1
	j=$((j + 1))
done
if [ "$k" = 3 ]; then
	i=0
	while [ ! -e "$m/ckpt/e1.pt" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	sha256sum <"$m/ckpt/e1.pt" >"$rec/ckpt.node3" || exit 1
	i=0
	while [ ! -e "$m/samples/s3.txt" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	cat "$m/samples/s1.txt" "$m/samples/s2.txt" "$m/samples/s3.txt" >"$rec/samples.node3" || exit 1
	test ! -e "$m/samples.tmp" || exit 1
	i=0
	while [ ! -e "$m/ms.ckpt" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	cat "$m/conf.txt" "$m/ms.ckpt" >"$rec/tmp.node3" && ls "$m" >"$rec/ls.node3" || exit 1
fi
echo "node $k wrote and read"
EOF

test_expect_success 'a small dataset, packed' '
	mkdir -p src/a && for i in 1 2 3 4 5 6 7 8; do echo "$i" >src/a/$i || exit 1; done &&
	"$DSTAGE" pack -q -p 4 src pack && mkdir rec
'
test_expect_success "train.sbatch with outputs on $n hosts: written, read across hosts, drained, exit 0" '
	DSTAGE_PACK=$TRASH/pack DSTAGE_OUTPUTS=out DSTAGE_DRAIN_TO=$TRASH/drain \
		submit t1.out "$JOBS/train.sbatch" sh "$TRASH/write.sh" "$TRASH/rec" $n &&
	test "$(grep -c "^node [0-9]* wrote and read$" t1.out)" = $n &&
	! grep "not drained\|still running" t1.out
'
test_expect_success 'each node ran on its own host' '
	for k in $(seq 0 $((n - 1))); do echo n$((k + 1)) >want && test_cmp want rec/host.$k || exit 1; done
'
test_expect_success 'every node read every other host s output, byte for byte' '
	for j in $(seq 0 $((n - 1))); do
		sha256sum <rec/node$j.ref >want &&
		for k in $(seq 0 $((n - 1))); do test_cmp want rec/sum.$j.by$k || exit 1; done
	done &&
	test "$(sha256sum <rec/ckpt.ref)" = "$(cat rec/ckpt.node3)" &&
	printf "sample 1\nsample 2\nsample 3\n" >want && test_cmp want rec/samples.node3 &&
	printf "lr=0.01\nmkstemp\n" >want && test_cmp want rec/tmp.node3 &&
	! grep "^sed\|^ms\.[^c]" rec/ls.node3
'
test_expect_success 'every output drained to the shared file system under its last name' '
	for k in $(seq 0 $((n - 1))); do cmp rec/node$k.ref drain/node$k.bin || exit 1; done &&
	cmp rec/ckpt.ref drain/ckpt/e1.pt && ! test -e drain/ckpt/e1.tmp &&
	test "$(cat drain/samples/s2.txt)" = "sample 2" && ! test -e drain/samples.tmp/s2.txt &&
	! find drain -name "*.dstage-drain.*" | grep -q . &&
	printf "lr=0.01\n" >want && test_cmp want drain/conf.txt &&
	printf "mkstemp\n" >want && test_cmp want drain/ms.ckpt &&
	! ls drain | grep "^sed\|^ms\.[^c]"
'
test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'
test_done
