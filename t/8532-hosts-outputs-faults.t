#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs on separate hosts (t/lib-hosts.sh: 3 hosts, each with
# its own /dev/shm and network, MPI over TCP; docs/outputs.md), issue 24's
# items 1, 4 and 6 where a node's area and its service are on another host
# than the writer's.  In one Slurm job: stage, serve --outputs with the
# drain directory on the shared file system (2500 bytes long), then
#   - item 1: a writer on host n2 opens its output "w", then again "a" (and
#     "w" twice): the other hosts read the whole file, the drain has it
#     whole, a second "w" truncates;
#   - item 4: host n1's service (node 0) SIGSTOPped 6 s while a writer on
#     n2 with DSTAGE_TIMEOUT=3 opens an existing good checkpoint "w": EIO,
#     and once n1 goes on, the good checkpoint stays whole on every host
#     and in the drain directory;
#   - item 6: on n3 (not node 0), names the drain cannot hold whole are
#     ENAMETOOLONG at create, mkdir and rename; what fits is drained whole.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

test_require PYTHON
DSTAGE_HOSTS=3
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8532-$$
UCX_TLS=tcp,self
export DSTAGE_DIR DSTAGE_MOUNT UCX_TLS DSTAGE_HOSTS
unset DSTAGE_PACK DSTAGE_TIMEOUT DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE DSTAGE_FAULT \
	DSTAGE_NODE DSTAGE_JOB DSTAGE_STORE

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done

# DR: $TRASH/drain/ddd.../eee (2500 bytes: its limit is the one that counts)
DR=$($PY -c "
import sys
p = sys.argv[1] + '/drain'
while len(p) < 2300: p += '/' + 'd' * 199
print(p + '/' + 'e' * (2499 - len(p)))" "$TRASH")
mkdir -p "$DR" rec
export DR PY n TRASH DSTAGE

cat >reopen.py <<'EOF'
import os, sys
p, how = sys.argv[1], sys.argv[2]
f = open(p, "w")
f.write("A" * 1000)
f.flush()
g = open(p, how)                 # the same writer opens its file again
if how == "w":
    print("size after the second open: %d" % os.fstat(f.fileno()).st_size)
f.close()                        # not the last descriptor: not published yet
g.write("B" * 1000)
g.flush()
g.close()
EOF
cat >openw.py <<'EOF'
import errno, sys
try:
    f = open(sys.argv[1], "w")
except OSError as e:
    print("open:", errno.errorcode.get(e.errno, e.errno))
    sys.exit(0)
print("open: it worked")
EOF
cat >names.py <<'EOF'
import errno, os, sys
out = sys.argv[1]
def err(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"
def create(p, data=b"x"):
    with open(p, "wb") as f:
        f.write(data)
print("210:", err(create, out + "/" + "f" * 210, b"f210"))
print("211:", err(create, out + "/" + "g" * 211))
print("mkdir 256:", err(os.mkdir, out + "/" + "h" * 256))
print("rename to 211:", err(os.rename, out + "/" + "f" * 210, out + "/" + "f" * 211))
# a deep tree: directories of 200 bytes until one is refused
d, depth, res = out, 0, "ok"
while res == "ok" and depth < 40:
    res = err(os.mkdir, d + "/" + "%03d" % depth + "D" * 197)
    if res == "ok":
        d += "/" + "%03d" % depth + "D" * 197
        depth += 1
print("deep mkdir:", res)
for k in range(210, 0, -1):
    res = err(create, d + "/" + "L" * k, b"long")
    if res == "ok":
        break
print("longest file in it:", res, k < 200)
sys.stdout.flush()
with open(sys.argv[2], "w") as f:
    f.write(os.path.relpath(d + "/" + "L" * k, out) + "\n")
EOF

# The job, on host n1 (node 0); host h runs node h-1.  Results in rec/.
cat >job.sh <<'EOF'
#!/bin/sh
R=$TRASH/rec
jobdir=$DSTAGE_DIR/dstage.$(id -u).$SLURM_JOB_ID
M=$DSTAGE_MOUNT/out
on() { h=$1; shift; srun -N1 -n1 -w "n$h" --overlap "$@"; }
# shim H CMD...: CMD on host H with the shim, as node H-1 (a one-node
# step's SLURM_NODEID is 0)
shim() {
	h=$1
	shift
	on "$h" sh -c 'eval "$("$DSTAGE" env --to "$DSTAGE_DIR" --node "$0")" && exec "$@"' $((h - 1)) "$@"
}
drain() { "$DSTAGE" drain --wait --to "$DSTAGE_DIR"; echo $? >"$R/$1"; }
srun -N$n --ntasks-per-node=1 "$DSTAGE" stage "$TRASH/pack" --to "$DSTAGE_DIR" -q || exit 1
srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" serve --to "$DSTAGE_DIR" \
	--outputs out --drain-to "$DR" >"$TRASH/serve.log" 2>&1 &
svc=$!
srun -N$n --ntasks-per-node=1 --overlap sh -c 'i=0
	until grep -qs "^state=running" "$1/$SLURM_NODEID/serve.status" && test -S "$1/$SLURM_NODEID/sock"; do
		sleep 0.1; i=$((i + 1)); test $i -lt 300 || exit 1; done' sh "$jobdir" || exit 1
echo up >"$R/up"

# item 1: a writer on n2 reopens its own output
shim 2 "$PY" "$TRASH/reopen.py" "$M/m1.ckpt" a >"$R/reopen.a" 2>&1; echo $? >"$R/reopen.a.rc"
shim 2 "$PY" "$TRASH/reopen.py" "$M/t1.ckpt" w >"$R/reopen.w" 2>&1; echo $? >"$R/reopen.w.rc"
for h in $(seq 1 $n); do
	shim $h cat "$M/m1.ckpt" >"$R/m1.h$h"
	shim $h cat "$M/t1.ckpt" >"$R/t1.h$h"
done
drain drain1.rc

# item 4: node 0 (n1, this host) stopped 6 s, an open "w" on n2 gives up
head -c 100000 /dev/urandom >"$R/good" && shim 2 cp "$R/good" "$M/m4.ckpt"
drain drain4a.rc
p0=$(sed -n 's/^pid=//p' "$jobdir/0/serve.status")
kill -STOP "$p0"
shim 2 env DSTAGE_TIMEOUT=3 "$PY" "$TRASH/openw.py" "$M/m4.ckpt" >"$R/open4" 2>&1
sleep 3
kill -CONT "$p0"
i=0
until grep -q "gave up its open" "$TRASH/serve.log" || [ $i -ge 200 ]; do sleep 0.1; i=$((i + 1)); done
sleep 12
for h in $(seq 1 $n); do shim $h cat "$M/m4.ckpt" >"$R/m4.h$h"; done
drain drain4b.rc

# item 6: names too long for the drain, on n3
shim 3 "$PY" "$TRASH/names.py" "$M" "$R/deep.txt" >"$R/names" 2>&1
drain drain6.rc

"$DSTAGE" stop --to "$DSTAGE_DIR" >"$R/stop.log" 2>&1; echo $? >"$R/stop.rc"
wait $svc; echo $? >"$R/serve.rc"
srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" clean --to "$DSTAGE_DIR"
EOF

test_expect_success 'a small dataset, packed on the shared file system' '
	mkdir -p src/a && for i in 1 2 3 4 5 6 7 8; do echo "$i" >src/a/$i || exit 1; done &&
	"$DSTAGE" pack -q -p 4 src pack
'
test_expect_success "the job on $n hosts: served, every case run, stopped" '
	{ sbatch_wait 200 -N$n --export=ALL -o "$TRASH/job.out" job.sh >sb.out 2>&1 || :; } &&
	cat sb.out job.out serve.log && test -e rec/up
'
test_expect_success 'item 1: "w" then "a" on n2: every host reads the whole file, the drain has it' '
	$PY -c "import sys; sys.stdout.write(\"A\" * 1000 + \"B\" * 1000)" >want &&
	test "$(cat rec/reopen.a.rc)" = 0 &&
	for h in $(seq 1 $n); do test_cmp want rec/m1.h$h || exit 1; done &&
	test "$(cat rec/drain1.rc)" = 0 && test_cmp want "$DR/m1.ckpt"
'
test_expect_success 'item 1: a second "w" on n2 truncates; every host and the drain agree' '
	cat rec/reopen.w && grep -q "size after the second open: 0" rec/reopen.w &&
	$PY -c "import sys; sys.stdout.write(\"B\" * 1000)" >want &&
	for h in $(seq 1 $n); do test_cmp want rec/t1.h$h || exit 1; done &&
	test_cmp want "$DR/t1.ckpt"
'
test_expect_success 'item 4: n1 stopped, the open on n2 (DSTAGE_TIMEOUT=3) fails with EIO' '
	cat rec/open4 && test "$(cat rec/open4)" = "open: EIO"
'
test_expect_success 'item 4: once n1 went on, the good checkpoint is whole on every host and drained' '
	test "$(cat rec/drain4a.rc)" = 0 &&
	for h in $(seq 1 $n); do cmp rec/good rec/m4.h$h || exit 1; done &&
	test "$(cat rec/drain4b.rc)" = 0 && cmp rec/good "$DR/m4.ckpt"
'
test_expect_success 'item 6: on n3, ENAMETOOLONG at create, mkdir, rename; what fits is taken' '
	cat >want <<-\EOF &&
	210: ok
	211: ENAMETOOLONG
	mkdir 256: ENAMETOOLONG
	rename to 211: ENAMETOOLONG
	deep mkdir: ENAMETOOLONG
	longest file in it: ok True
	EOF
	test_cmp want rec/names
'
test_expect_success 'item 6: the drain has every file under its whole name, nothing cut' '
	test "$(cat rec/drain6.rc)" = 0 &&
	deep=$(cat rec/deep.txt) && test "$(cat "$DR/$deep")" = long &&
	f210=$($PY -c "print(\"f\" * 210)") && test "$(cat "$DR/$f210")" = f210 &&
	(cd "$DR" && find . -type f | sort) >files &&
	printf "./%s\n" m1.ckpt t1.ckpt m4.ckpt "$deep" "$f210" | sort >want &&
	test_cmp want files
'
test_expect_success 'the service stopped cleanly; no store left on any host' '
	cat rec/stop.log && test "$(cat rec/stop.rc)" = 0 && test "$(cat rec/serve.rc)" = 0 &&
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'
test_done
