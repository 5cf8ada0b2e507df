#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --outputs-to DIR in a scratch directory others can write (0777, no sticky
# bit): after the service started, another user renames
# DIR/dstage.<uid>.<job> away and puts a directory of their own, with the
# same layout, in its place (docs/outputs.md "Privacy").  The service uses
# its output area by descriptor only, so no output is created, published
# or drained through the planted directory; a writer whose path leads there
# gets an error, never a descriptor on another user's file; a reader is
# not served another user's file as an output.  Not one byte reaches the
# other user.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_require USERADD
OTHER=dstage-t-$$
test_atexit 'userdel "$OTHER"'
useradd -M -N -s /bin/sh "$OTHER" || echo "# useradd $OTHER failed"
as_other() { setpriv --reuid="$OTHER" --regid="$(id -g "$OTHER")" --clear-groups "$@"; }

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
SCR="$TRASH/scratch"
mkdir -p "$SCR" && chmod 0777 "$SCR" && chmod 0755 "$TRASH"
DR="$TRASH/drain"
serve_start 2 --outputs out --outputs-to "$SCR" --drain-to "$DR"
test_expect_success 'served, outputs in a scratch directory others can write' '
	serve_up 2 &&
	JD=$(ls -d "$SCR"/dstage.*) && test -d "$JD/0.out/ns" &&
	shim_on 0 sh -c "echo first >$MOUNT/out/first.txt" &&
	test "$(shim_on 1 cat "$MOUNT/out/first.txt")" = first
'
# a training process: started before the swap (it has the outputs set up),
# it writes its next checkpoint and reads one back after it
cat >writer.py <<'PY'
import errno, os, sys, time
m, k = sys.argv[1], sys.argv[2]
os.listdir(m + "/out")  # the outputs are set up in this process
held = open(m + "/out/held-" + k + ".txt", "w")  # being written across the swap
held.write("held-" + k)
held.flush()
open("ready-" + k, "w").close()
while not os.path.exists("go"):
    time.sleep(0.05)
res = []
try:
    with open(m + "/out/secret-" + k + ".txt", "w") as f:
        f.write("secret-" + k)
    res.append("write ok")
except OSError as e:
    res.append("write " + errno.errorcode[e.errno])
try:
    res.append("read " + open(m + "/out/first.txt").read().strip())
except OSError as e:
    res.append("read " + errno.errorcode[e.errno])
try:  # a writer reopening its own output (HDF5 does)
    with open(m + "/out/held-" + k + ".txt", "a") as f:
        f.write("secret-reopen-" + k)
    res.append("reopen ok")
except OSError as e:
    res.append("reopen " + errno.errorcode[e.errno])
held.close()
open("result-" + k, "w").write("\n".join(res) + "\n")
PY
shim_on 0 $PY writer.py "$MOUNT" 0 >w0.log 2>&1 &
W0=$!
test_bg $W0
shim_on 1 $PY writer.py "$MOUNT" 1 >w1.log 2>&1 &
W1=$!
test_bg $W1
test_expect_success 'another user swaps the job directory for one of theirs' '
	wait_until 20 test -e ready-0 && wait_until 20 test -e ready-1 &&
	JD=$(ls -d "$SCR"/dstage.*) &&
	T0=$(ls "$JD/0.out/w") && T1=$(ls "$JD/1.out/w") && echo "tokens $T0 $T1" &&
	as_other sh -c "mv \"$JD\" \"$SCR/moved\" && mkdir -p \"$JD\" &&
		for n in 0 1; do mkdir -p \"$JD/\$n.out/ns\" \"$JD/\$n.out/w\"; done &&
		: >\"$JD/0.out/w/$T0\" && : >\"$JD/1.out/w/$T1\" &&
		echo forged >\"$JD/0.out/ns/first.txt\" && echo forged >\"$JD/1.out/ns/first.txt\" &&
		chmod -R 0777 \"$JD\"" &&
	ls -ln "$JD" "$JD/0.out"
'
test_expect_success 'outputs written after it: not one byte lands in the planted directory' '
	JD=$(ls -d "$SCR"/dstage.*) &&
	touch go && wait_until 30 test -e result-0 && wait_until 30 test -e result-1 &&
	cat result-0 result-1 w0.log w1.log &&
	as_other find "$JD" -ls &&
	! as_other grep -rs secret "$JD" &&
	test -z "$(find "$JD" -user 0)"
'
test_expect_success 'a reader is not served the other user'"'"'s file as an output' '
	! grep forged result-0 result-1
'
test_expect_success 'what was drained is what the writer closed' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/first.txt")" = first &&
	! grep -rqs forged "$DR"
'
serve_stop
test_done
