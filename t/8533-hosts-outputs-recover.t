#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Write-once outputs on separate hosts (t/lib-hosts.sh: 3 hosts, each with
# its own /dev/shm, /tmp and network, MPI over TCP; docs/outputs.md),
# issue 24's items 2 and 5 on a host that is not node 0:
#   - item 2: a writer on host n2 closes 1000 long-named outputs under a
#     drain too slow to take them (its outputs.status far past 64 KiB);
#     every service is SIGKILLed; `dstage drain --wait` on n2 recovers
#     every one, byte for byte, exit 0, and the status says recovered;
#   - item 5 (needs USERADD): --outputs-to a 0777 directory in each host's
#     own /tmp; after the service started, another user on n2 swaps
#     DIR/dstage.<uid>.<job> for a directory of their own: no output
#     written after it lands there (the writer's opens fail, EIO), a
#     reader on n2 is not served their file, and the drain has what the
#     writer closed (an output it held open across the swap, whole).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

test_require PYTHON
DSTAGE_HOSTS=3
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8533-$$
UCX_TLS=tcp,self
export DSTAGE_DIR DSTAGE_MOUNT UCX_TLS DSTAGE_HOSTS
unset DSTAGE_PACK DSTAGE_TIMEOUT DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE DSTAGE_FAULT \
	DSTAGE_NODE DSTAGE_JOB DSTAGE_STORE

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done
mkdir rec2 rec5
export PY n TRASH DSTAGE

# Common to both jobs (run on host n1, node 0; host h runs node h-1).
cat >lib.sh <<'EOF'
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
# serve LOG OPTS...: stage, serve in the background ($svc), wait until up
serve() {
	log=$1
	shift
	srun -N$n --ntasks-per-node=1 "$DSTAGE" stage "$TRASH/pack" --to "$DSTAGE_DIR" -q || exit 1
	srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" serve --to "$DSTAGE_DIR" "$@" >"$log" 2>&1 &
	svc=$!
	srun -N$n --ntasks-per-node=1 --overlap sh -c 'i=0
		until grep -qs "^state=running" "$1/$SLURM_NODEID/serve.status" && test -S "$1/$SLURM_NODEID/sock"; do
			sleep 0.1; i=$((i + 1)); test $i -lt 300 || exit 1; done' sh "$jobdir" || exit 1
}
EOF

# item 2: 1000 outputs, shards/rNN/<170 bytes>-NNNNNN.pt, each holding its name
cat >shards.py <<'EOF'
import os, sys
out, what = sys.argv[1], sys.argv[2]
bad = 0
for i in range(1000):
    name = "shards/r%02d/%s-%06d.pt" % (i % 20, "model-shard-of-a-long-run" * 7, i)
    p = os.path.join(out, name)
    if what == "write":
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(name + "\n")
    else:
        try:
            got = open(p).read()
        except OSError as e:
            print("missing", name, e)
            bad += 1
            continue
        if got != name + "\n":
            print("wrong bytes", name)
            bad += 1
print("bad", bad)
sys.exit(1 if bad else 0)
EOF
cat >job2.sh <<'EOF'
#!/bin/sh
. "$TRASH/lib.sh"
R=$TRASH/rec2
serve "$TRASH/serve2.log" --outputs out --drain-to "$TRASH/drain2" --drain-rate 1
date +%s >"$R/t.write"
shim 2 "$PY" "$TRASH/shards.py" "$M" write >"$R/write" 2>&1; echo $? >"$R/write.rc"
date +%s >>"$R/t.write"
on 2 stat -c %s "$jobdir/1/outputs.status" >"$R/status.size"
on 2 grep -c "^undrained=" "$jobdir/1/outputs.status" >"$R/status.count"
srun -N$n --ntasks-per-node=1 --overlap sh -c 'kill -KILL $(sed -n "s/^pid=//p" "$1/$SLURM_NODEID/serve.status")' sh "$jobdir"
wait $svc
date +%s >>"$R/t.write"
on 2 "$DSTAGE" drain --wait --to "$DSTAGE_DIR" >"$R/drain.out" 2>"$R/drain.err"; echo $? >"$R/drain.rc"
date +%s >>"$R/t.write"
on 2 cat "$jobdir/1/outputs.status" >"$R/status.after"
srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" clean --to "$DSTAGE_DIR"
EOF

# item 5: SCR in each host's own /tmp, 0777, no sticky bit
SCR=/tmp/scratch-t8533-$$
export SCR
OTHER=dstage-t-$$
export OTHER
if test_have_prereq USERADD; then
	test_atexit 'userdel "$OTHER"'
	useradd -M -N -s /bin/sh "$OTHER" || echo "# useradd $OTHER failed"
fi
# the writer: its outputs set up and an output open before the swap; after
# it, a new output, a read of first.txt, a reopen of the open one
cat >writer.py <<'EOF2'
import errno, os, sys, time
m, r = sys.argv[1], sys.argv[2]
os.listdir(m)
held = open(m + "/held.txt", "w")
held.write("held")
held.flush()
open(r + "/ready", "w").close()
while not os.path.exists(r + "/go"):
    time.sleep(0.05)
res = []
try:
    with open(m + "/secret.txt", "w") as f:
        f.write("secret")
    res.append("write ok")
except OSError as e:
    res.append("write " + errno.errorcode[e.errno])
try:
    res.append("read " + open(m + "/first.txt").read().strip())
except OSError as e:
    res.append("read " + errno.errorcode[e.errno])
try:
    with open(m + "/held.txt", "a") as f:
        f.write("secret-reopen")
    res.append("reopen ok")
except OSError as e:
    res.append("reopen " + errno.errorcode[e.errno])
held.close()
open(r + "/result", "w").write("\n".join(res) + "\n")
EOF2
cat >job5.sh <<'EOF'
#!/bin/sh
. "$TRASH/lib.sh"
R=$TRASH/rec5
srun -N$n --ntasks-per-node=1 sh -c 'mkdir -p "$SCR" && chmod 0777 "$SCR"' || exit 1
date +%s >"$R/t5"
serve "$TRASH/serve5.log" --outputs out --outputs-to "$SCR" --drain-to "$TRASH/drain5"
shim 2 sh -c 'echo first >"$1/first.txt"' sh "$M" && echo $? >"$R/first.rc"
shim 3 cat "$M/first.txt" >"$R/first.n3"
# a training process on n2, started before the swap, writes after it
rm -f "$R/ready" "$R/go" "$R/result"
shim 2 "$PY" "$TRASH/writer.py" "$M" "$R" >"$R/writer.log" 2>&1 &
wr=$!
i=0
until [ -e "$R/ready" ] || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
JD=$SCR/dstage.$(id -u).$SLURM_JOB_ID
# another user on n2 swaps the job directory for one of theirs (with the
# writer's token in w/, as if they had guessed it, and a forged first.txt)
tok=$(on 2 ls "$JD/1.out/w")
on 2 setpriv --reuid="$OTHER" --regid="$(id -g "$OTHER")" --clear-groups sh -c '
	mv "$1" "$2/moved" && mkdir -p "$1" &&
	for k in 0 1 2; do mkdir -p "$1/$k.out/ns" "$1/$k.out/w"; echo forged >"$1/$k.out/ns/first.txt"; done &&
	for x in $3; do : >"$1/1.out/w/$x"; done && chmod -R 0777 "$1"' sh "$JD" "$SCR" "$tok"
echo $? >"$R/swap.rc"
touch "$R/go"
wait $wr
on 2 setpriv --reuid="$OTHER" --regid="$(id -g "$OTHER")" --clear-groups sh -c '
	find "$1" -ls; grep -rl secret "$1"' sh "$JD" >"$R/other.sees" 2>&1
on 2 find "$JD" -user 0 >"$R/root.files" 2>&1
"$DSTAGE" drain --wait --to "$DSTAGE_DIR" >"$R/drain.out" 2>&1; echo $? >"$R/drain.rc"
date +%s >>"$R/t5"
"$DSTAGE" stop --to "$DSTAGE_DIR" >"$R/stop.log" 2>&1
wait $svc
srun -N$n --ntasks-per-node=1 --overlap "$DSTAGE" clean --to "$DSTAGE_DIR"
srun -N$n --ntasks-per-node=1 --overlap rm -rf "$SCR"
EOF

test_expect_success 'a small dataset, packed on the shared file system' '
	mkdir -p src/a && for i in 1 2 3 4 5 6 7 8; do echo "$i" >src/a/$i || exit 1; done &&
	"$DSTAGE" pack -q -p 4 src pack
'
test_expect_success "item 2: the job on $n hosts: 1000 outputs closed on n2, every service killed" '
	{ sbatch_wait 200 -N$n --export=ALL -o "$TRASH/job2.out" job2.sh >sb2.out 2>&1 || :; } &&
	cat sb2.out job2.out rec2/write && test "$(cat rec2/write.rc)" = 0
'
test_expect_success 'item 2: n2 s outputs.status lists them all, far past 64 KiB' '
	cat rec2/status.size rec2/status.count &&
	test "$(cat rec2/status.size)" -gt 150000 && test "$(cat rec2/status.count)" -ge 999
'
test_expect_success 'item 2: dstage drain --wait on n2 recovers every one, byte for byte, exit 0' '
	tail -n 3 rec2/drain.err && test "$(cat rec2/drain.rc)" = 0 &&
	"$PY" shards.py drain2 check &&
	test "$(find drain2 -type f | wc -l)" = 1000 &&
	! grep "^undrained=" rec2/status.after && grep -q "^recovered=" rec2/status.after
'

test_expect_success USERADD "item 5: the job on $n hosts: --outputs-to $SCR on each, swapped on n2" '
	{ sbatch_wait 200 -N$n --export=ALL -o "$TRASH/job5.out" job5.sh >sb5.out 2>&1 || :; } &&
	cat sb5.out job5.out && test "$(cat rec5/first.n3)" = first && test "$(cat rec5/swap.rc)" = 0
'
test_expect_success USERADD 'item 5: not one byte written after the swap lands in the planted directory' '
	cat rec5/writer.log rec5/result rec5/other.sees rec5/root.files && test -s rec5/result &&
	! grep -q "secret" rec5/other.sees && ! test -s rec5/root.files
'
test_expect_success USERADD 'item 5: a reader on n2 is not served the other user s file' '
	! grep forged rec5/result
'
test_expect_success USERADD 'item 5: what was drained is what the writer closed' '
	test "$(cat rec5/drain.rc)" = 0 && test "$(cat drain5/first.txt)" = first &&
	test "$(cat drain5/held.txt)" = held && ! test -e drain5/secret.txt &&
	! grep -rqs "forged" drain5
'
test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'
test_done
