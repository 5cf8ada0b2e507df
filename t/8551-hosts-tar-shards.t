#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Tar shards staged in place on separate hosts (t/lib-hosts.sh, issue 28):
# jobs/train.sbatch, unmodified, with DSTAGE_PACK = a tree of tar shards
# (GNU tar, GNU long names, pax and Python's tarfile with long names) and
# DSTAGE_STAGE_OPTS=--expand-tar, R=2 on 4 hosts.  The training step on
# every host is a Python reader: every member of its epoch list, and every
# member of every shard, read through the shim, equals the member tarfile
# reads from the source tar; the epoch lists deal members of several shards
# in one permutation.  The stage step (strace -ff of every rank on every
# host) lists each tar once and reads its members' data with one open of
# it in the whole job, for R=2.  Nothing is left on any host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
hosts_job_env
command -v tar >/dev/null || skip_all "no GNU tar"
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'
test_require STRACE

hosts_job_start
submit_nodes=$n submit_timeout=150

# DSTAGE_BIN: dstage as it is, its stage step under strace -ff (one file
# per process of every rank on every host, in the shared $TRASH/tr)
mkdir bin tr rec
cat >bin/dstage <<EOS
#!/bin/sh
[ "\$1" = stage ] &&
	exec strace -ff -qq -e trace=open,openat,openat2 -o "$TRASH/tr/t.\$(hostname)" "$DSTAGE" "\$@"
exec "$DSTAGE" "\$@"
EOS
chmod +x bin/dstage

# the training step: a Python reader on each host
cat >reader.py <<\EOS
import os, sys, tarfile
src, rec = sys.argv[1], sys.argv[2]
m, k = os.environ["DSTAGE_MOUNT"], os.environ["SLURM_NODEID"]
want = {}  # path under the mount -> the member's bytes, as tarfile reads them
for d, _, fs in os.walk(src):
    for f in fs:
        p = os.path.join(d, f)
        rel = os.path.relpath(p, src)
        if not f.endswith(".tar"):
            want[rel] = open(p, "rb").read()
            continue
        with tarfile.open(p) as t:
            for ti in t.getmembers():
                if ti.isfile():
                    want[rel + "/" + os.path.normpath(ti.name)] = t.extractfile(ti).read()
bad = 0
with open(m + "/.dstage/epochs/0/all") as f:
    epoch = [l.rstrip("\n") for l in f]
for p in epoch:
    if open(m + "/" + p, "rb").read() != want.get(p):
        print("node %s: %s differs from the tar's member" % (k, p))
        bad += 1
seen = set()
for d, _, fs in os.walk(m):
    if d == m + "/.dstage" or d.startswith(m + "/.dstage/"):
        continue
    for f in fs:
        rel = os.path.relpath(os.path.join(d, f), m)
        seen.add(rel)
        if open(os.path.join(d, f), "rb").read() != want.get(rel):
            print("node %s: %s differs" % (k, rel))
            bad += 1
if seen != set(want):
    print("node %s: the mount and the tars differ in %s" % (k, sorted(seen ^ set(want))[:5]))
    bad += 1
with open("%s/epoch.%s" % (rec, k), "w") as f:
    f.write("".join(p + "\n" for p in epoch))
with open("%s/host.%s" % (rec, k), "w") as f:
    f.write(os.uname().nodename + "\n")
print("node %s read %d members of its epoch and %d files: %d bad" % (k, len(epoch), len(seen), bad))
sys.exit(1 if bad else 0)
EOS

test_expect_success 'setup: five shards (GNU, GNU long names, pax, tarfile pax long names) and a file' '
	mkdir -p src/train &&
	for i in 0 1 2; do
		mkdir -p m$i &&
		for j in 1 2 3 4 5 6; do
			head -c $((j * 1500 + i * 13)) /dev/urandom >m$i/s$i-$j.jpg &&
			echo "$i $j" >m$i/s$i-$j.cls || return 1
		done || return 1
	done &&
	long=$(printf "k%.0s" $(seq 110)) &&
	head -c 3000 /dev/urandom >m1/$long.jpg &&
	tar --format=gnu -cf src/train/shard-0.tar -C m0 . &&
	tar --format=gnu -cf src/train/shard-1.tar -C m1 . &&
	tar --format=posix -cf src/train/shard-2.tar -C m2 . &&
	"$PY" - src/train <<-\EOP &&
	import io, os, sys, tarfile
	for s in (3, 4):
	    with tarfile.open(os.path.join(sys.argv[1], "shard-%d.tar" % s), "w",
	                      format=tarfile.PAX_FORMAT) as t:
	        for k in range(6):
	            for ext, data in ((".jpg", os.urandom(900 + 37 * k)), (".cls", b"%d\n" % k)):
	                name = "d%d/" % s + "p" * 105 + "-%d%s" % (k, ext)
	                ti = tarfile.TarInfo(name)
	                ti.size = len(data)
	                t.addfile(ti, io.BytesIO(data))
	EOP
	echo labels >src/classes.txt &&
	ls src/train >shards && test "$(wc -l <shards)" = 5 &&
	"$PY" - src <<-\EOP >members &&
	import os, sys, tarfile
	d = os.path.join(sys.argv[1], "train")
	for s in sorted(os.listdir(d)):
	    for ti in tarfile.open(os.path.join(d, s)).getmembers():
	        if ti.isfile():
	            print("train/%s/%s" % (s, os.path.normpath(ti.name)))
	print("classes.txt")
	EOP
	sort members >members.sorted && test "$(wc -l <members)" = 62
'

test_expect_success "sbatch -N$n train.sbatch: the shards staged in place, R=2, every host reads: exit 0" '
	DSTAGE_PACK=$TRASH/src DSTAGE_STAGE_OPTS=--expand-tar DSTAGE_REPLICAS=2 DSTAGE_SEED=5 \
	DSTAGE_BIN=$TRASH/bin \
		submit t1.out "$JOBS/train.sbatch" "$PY" "$TRASH/reader.py" "$TRASH/src" "$TRASH/rec" &&
	test_grep "R=2" t1.out && test_grep "service up on $n node(s)" t1.out &&
	test_grep "(a plain tree): opened 6 source files" t1.out &&
	test "$(grep -c "^node [0-9]* read .*: 0 bad$" t1.out)" = $n &&
	test_grep "node stores removed from $DSTAGE_DIR" t1.out
'

test_expect_success 'each node on its own host' '
	for k in $(seq 0 $((n - 1))); do echo n$((k + 1)) >want && test_cmp want rec/host.$k || exit 1; done
'

test_expect_success 'the epoch: every member over the hosts, equal shares, shards mixed' '
	# 62 files on 4 nodes: 16 each, 2 repeated to pad (as DistributedSampler)
	cat rec/epoch.* | sort -u >uniq && test_cmp members.sorted uniq &&
	for k in $(seq 0 $((n - 1))); do test "$(wc -l <rec/epoch.$k)" = 16 || exit 1; done &&
	for k in $(seq 0 $((n - 1))); do
		sed -n "s|^train/\(shard-[0-9]\.tar\)/.*|\1|p" rec/epoch.$k | sort -u >sh.$k &&
		echo "node $k: $(wc -l <sh.$k) shards" && test "$(wc -l <sh.$k)" -ge 3 || exit 1
	done &&
	cat rec/epoch.0 rec/epoch.1 | sed -n "s|^train/\(shard-[0-9]\.tar\)/.*|\1|p" | uniq >runs &&
	echo "$(wc -l <runs) runs of one shard" && test "$(wc -l <runs)" -ge 10
'

test_expect_success 'the stage step lists each tar once and reads it with one open, over every host' '
	ls tr | sed "s/^t\.\(n[0-9]*\)\..*/\1/" | sort -u >hosts.traced && test "$(wc -l <hosts.traced)" = $n &&
	while read -r s; do
		l=$(cat tr/t.* | grep -cE "^openat\(.*\"train/$s\", O_RDONLY.*O_NOFOLLOW.* = [0-9]+$") &&
		r=$(cat tr/t.* | grep -cE "^openat2\(.*\"train/$s\", .* = [0-9]+$") &&
		echo "$s: listed $l, read $r" && test "$l" = 1 && test "$r" = 1 || exit 1
	done <shards &&
	test "$(cat tr/t.* | grep -cE "\"classes.txt\", .* = [0-9]+$")" = 1
'

test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'

test_done
