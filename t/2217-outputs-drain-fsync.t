#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What the drain changes in the drain directory is durable before it
# counts (docs/outputs.md "Drain"): strace of the services shows, for every
# rename into DIR, an fsync of the directory the new name is in (and of
# the one the old name was in, when the drain repeats a rename across
# directories: else the file could be there twice after a power loss); for
# every directory the drain makes, an fsync of its parent (else a file
# drained into it vanishes with it); for every unlink it repeats, an fsync
# of its directory.  Every rename and unlink in DIR acts on a directory
# descriptor opened without following symlinks (renameat/unlinkat).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'
test_require STRACE

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
DR="$TRASH/drain"
rm -f serve.rc stop.rc
strace -ff -y -qq -e trace=fsync,rename,renameat,renameat2,mkdir,mkdirat,unlink,unlinkat \
	-o "$TRASH/trace" timeout -k 5 120 mpiexec.mpich -n 2 \
	"$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank --outputs out --drain-to "$DR" \
	>serve.log 2>&1 &
SERVE_PID=$!
test_bg "$SERVE_PID"
test_expect_success 'served under strace' 'serve_up 2'

test_expect_success 'outputs in new directories, renamed across directories, unlinked' '
	shim_on 0 sh -c "mkdir -p $MOUNT/out/a/b/c && echo one >$MOUNT/out/a/b/c/f1 && echo top >$MOUNT/out/top.txt" &&
	shim_on 1 sh -c "mkdir -p $MOUNT/out/n1/d && echo two >$MOUNT/out/n1/d/f2" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/a/b/c/f1")" = one && test "$(cat "$DR/n1/d/f2")" = two &&
	shim_on 0 sh -c "mkdir -p $MOUNT/out/x/y && mv $MOUNT/out/a/b/c/f1 $MOUNT/out/x/y/g1 && rm $MOUNT/out/top.txt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/x/y/g1")" = one && ! test -e "$DR/a/b/c/f1" && ! test -e "$DR/top.txt"
'
serve_stop
test_expect_success 'stopped; every outputs.status written whole' '
	test "$(cat serve.rc)" = 0 && ! grep "not updated" serve.log
'

cat >check.py <<'PY'
import os, re, sys
dr = os.path.realpath(sys.argv[1])
# strace -y: fd<path>; strings quoted
ev = []
lines = []  # strace -ff: one file per process, each line whole
for f in sys.argv[2:]:
    lines += [(f.rsplit(".", 1)[1], l) for l in open(f)]
for pid, line in lines:
    m = re.match(r"(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
    if not m or m.group(3) != "0":
        continue
    call, args = m.group(1), m.group(2)
    fds = re.findall(r"\d+<([^>]*)>", args)
    strs = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
    pairs = re.findall(r'(?:AT_FDCWD|\d+)(?:<([^>]*)>)?,\s*"((?:[^"\\]|\\.)*)"', args)
    def at(i):  # the i-th (dirfd, name) pair of an *at call
        return os.path.join(pairs[i][0], pairs[i][1])
    if call == "fsync":
        ev.append((pid, "fsync", fds[0], None))
    elif call == "rename":
        ev.append((pid, "rename", strs[0], strs[1]))
    elif call in ("renameat", "renameat2"):
        ev.append((pid, "rename", at(0), at(1)))
    elif call == "mkdir":
        ev.append((pid, "mkdir", strs[0], None))
    elif call == "mkdirat":
        ev.append((pid, "mkdir", at(0), None))
    elif call == "unlink":
        ev.append((pid, "unlink", strs[0], None))
    elif call == "unlinkat":
        ev.append((pid, "unlink", at(0), None))
def under(p):
    return p == dr or p.startswith(dr + "/")
bad = seen = 0
for i, (pid, kind, a, b) in enumerate(ev):
    if kind == "fsync" or not under(a if kind != "rename" else b):
        continue
    if kind == "unlink" and ".dstage-drain." in a:
        continue  # a temporary copy dropped: nothing promised
    need = set()
    if kind == "rename":
        need.add(os.path.dirname(b))
        if os.path.dirname(a) != os.path.dirname(b) and ".dstage-drain." not in a:
            need.add(os.path.dirname(a))
    else:
        need.add(os.path.dirname(a))
    seen += 1
    later = {x[2] for x in ev[i + 1:] if x[0] == pid and x[1] == "fsync"}
    for d in need:
        if d not in later:
            print("no fsync of %s after %s %s%s" % (d, kind, a, " -> " + b if b else ""))
            bad += 1
print("checked", seen, "changes in", dr, "; missing fsyncs:", bad)
sys.exit(1 if bad or seen < 8 else 0)
PY
test_expect_success 'every rename, unlink and mkdir in DIR is followed by the fsync that makes it durable' '
	cat trace.* | grep -c . &&
	"$PY" check.py "$DR" trace.*
'
test_expect_success 'DIR is used by descriptor: no rename or unlink by path in it' '
	! cat trace.* | grep -E "(rename|unlink)\(\"$DR"
'
test_done
