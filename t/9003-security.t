#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Nobody is let in: node stores are 0700 and their files 0600 whatever the
# umask; a process of another uid (a user made for this test) cannot list or
# read a store, cannot talk to the node service (the 0700 directory keeps it
# from the socket, and SO_PEERCRED refuses it when the directory is opened
# up), and through the shim with DSTAGE_STORE pointing at the store gets
# ENOENT/EACCES, never bytes; the other way round, a reader never takes a
# store planted by another user (or writable by others) for its own.  Two jobs of one user on one node see only
# their own dataset; stopping one leaves the other serving.  A job directory
# planted by another user (directory or symlink) is refused by stage.  No
# name from a pack becomes a path in the store.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
. "$SRCDIR/t/lib-hard.sh"

uid=$(id -u)
OTHER=
cleanup_user() {
	[ -n "$OTHER" ] && userdel "$OTHER" 2>/dev/null
	OTHER=
}
# USERADD: the tests as another user (a failing useradd fails them)
if test_have_prereq USERADD; then
	OTHER=dstage-t-$$
	test_atexit cleanup_user
	useradd -M -N -s /bin/sh "$OTHER" || echo "# useradd $OTHER failed"
fi
# as_other CMD...: run CMD as the other user (no supplementary groups)
as_other() {
	setpriv --reuid="$OTHER" --regid="$(id -g "$OTHER")" --clear-groups "$@"
}
# a Unix-socket client: connect, send a PING, print what happened
cat >"$TRASH/ping.py" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %s" % e.strerror)
    sys.exit(0)
s.settimeout(5)
try:
    s.sendall(struct.pack("<IIIIQQ", 0x44535131, 2, 0, 0, 0, 0))
    r = s.recv(16)
    print("answer: %d bytes" % len(r) if r else "answer: closed")
except OSError as e:
    print("answer: %s" % e.strerror)
EOF

test_expect_success 'two nodes staged with umask 000' '
	make_samples src 12 &&
	(umask 000 && pack_stage src 2)
'
old_umask=$(umask)
umask 000
serve_start 2 --seed 3
umask "$old_umask"
test_expect_success 'served' 'serve_up 2'

test_expect_success 'directories 0700, files 0600, the socket 0600, whatever the umask' '
	test "$(stat -c %a "$JOBDIR")" = 700 &&
	for k in 0 1; do
		test "$(stat -c %a "$JOBDIR/$k")" = 700 &&
		test "$(stat -c %a "$JOBDIR/$k/sock")" = 600 &&
		test "$(stat -c %a "$JOBDIR/$k/stats")" = 600 &&
		test "$(stat -c %a "$JOBDIR/$k/index")" = 600 &&
		test "$(stat -c %a "$JOBDIR/$k/store")" = 600 || exit 1
	done &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/0/all" >/dev/null &&
	find "$JOBDIR" -mindepth 1 -type d ! -perm 700 >loose &&
	find "$JOBDIR" -mindepth 1 ! -type d ! -type l -perm /077 >>loose &&
	test_cmp /dev/null loose
'

test_expect_success 'no name from the pack is a path in the store' '
	(cd src && find . -mindepth 1 | sed "s,.*/,,") | sort -u >names &&
	(cd "$JOBDIR" && find . -mindepth 1 | sed "s,.*/,,") | sort -u >store-names &&
	comm -12 names store-names >both && test_cmp /dev/null both
'

test_expect_success USERADD 'another user cannot list or read the store' '
	f=$(cd "$JOBDIR/0" && ls) &&
	! as_other ls "$JOBDIR" 2>err && test_grep "Permission denied" err &&
	! as_other cat "$JOBDIR/0/store" >out 2>err && test_cmp /dev/null out &&
	! as_other cat "$JOBDIR/0/index" >out 2>err && test_cmp /dev/null out &&
	! as_other cat "$JOBDIR/epoch.conf" >out 2>err && test_cmp /dev/null out
'

test_expect_success USERADD 'another user cannot reach the service socket' '
	as_other "$PY" "$TRASH/ping.py" "$JOBDIR/0/sock" >out &&
	test_grep "connect: Permission denied" out &&
	"$PY" "$TRASH/ping.py" "$JOBDIR/0/sock" >mine && test_grep "answer: 16 bytes" mine
'

test_expect_success USERADD 'the service refuses another uid even when the directory is opened' '
	chmod 711 "$JOBDIR" "$JOBDIR/0" && chmod 666 "$JOBDIR/0/sock" &&
	rc=0 && { as_other "$PY" "$TRASH/ping.py" "$JOBDIR/0/sock" >out || rc=$?; } &&
	chmod 700 "$JOBDIR" "$JOBDIR/0" && chmod 600 "$JOBDIR/0/sock" &&
	test $rc = 0 && cat out &&
	test_grep "answer: closed\|answer: Connection reset\|answer: Broken pipe" out &&
	test_grep "refused a connection from uid $(id -u "$OTHER")" serve.log
'

test_expect_success USERADD 'another user gets nothing through the shim' '
	p=$(cd src && find train -type f | head -n 1) &&
	cd / &&
	as_other env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE=0 \
		DSTAGE_MOUNT="$MOUNT" "$PY" -c "
import errno, os, sys
m, p = sys.argv[1], sys.argv[2]
for f in (lambda: open(os.path.join(m, p), \"rb\").read(), lambda: os.listdir(m),
          lambda: os.stat(os.path.join(m, p)),
          lambda: open(os.path.join(m, \".dstage/epochs/0/all\"), \"rb\").read()):
    try:
        f()
        print(\"GOT SOMETHING\")
    except OSError as e:
        print(errno.errorcode[e.errno])
" "$MOUNT" "$p" >"$TRASH/out" &&
	cd "$TRASH" && cat out && ! grep -q GOT out &&
	! grep -v "ENOENT\|EACCES" out
'

test_expect_success 'a second job of the same user: its own tree, nothing of the first' '
	mkdir src2 && printf "second job\n" >src2/only-in-two.txt &&
	"$DSTAGE" pack -q src2 pack2 &&
	mpirun_n 2 "$DSTAGE" stage pack2 --to "$SHM" --job "${JOB}b" --node-per-rank -q &&
	J2="$SHM/dstage.$uid.${JOB}b" &&
	p=$(cd src && find train -type f | head -n 1) &&
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$J2" DSTAGE_NODE=0 DSTAGE_MOUNT="$MOUNT" \
		ls -R "$MOUNT" >ls2 &&
	test_grep only-in-two.txt ls2 && ! grep -q "img\|train" ls2 &&
	! env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$J2" DSTAGE_NODE=0 DSTAGE_MOUNT="$MOUNT" \
		cat "$MOUNT/$p" 2>err && test_grep "No such file" err &&
	! shim_on 0 cat "$MOUNT/only-in-two.txt" 2>err && test_grep "No such file" err &&
	shim_on 0 cat "$MOUNT/$p" | cmp - "src/$p"
'

test_expect_success 'stopping the second job leaves the first serving' '
	{ "$DSTAGE" stop --to "$SHM" --job "${JOB}b" >/dev/null 2>&1 || :; } &&
	grep -q "^state=running" "$JOBDIR/0/serve.status" &&
	"$PY" "$TRASH/ping.py" "$JOBDIR/1/sock" | grep -q "answer: 16 bytes" &&
	"$DSTAGE" clean --to "$SHM" --job "${JOB}b" && test ! -e "$SHM/dstage.$uid.${JOB}b" &&
	test -d "$JOBDIR/0"
'

test_expect_success USERADD 'a job directory planted by another user is refused' '
	mkdir -m 1777 pub &&
	as_other mkdir -m 777 "pub/dstage.$uid.planted" &&
	! mpirun_n 2 "$DSTAGE" stage pack2 --to "$PWD/pub" --job planted --node-per-rank 2>err &&
	test_grep "not a directory of this user" err &&
	test -z "$(ls -A "pub/dstage.$uid.planted")" &&
	as_other ln -s /tmp "pub/dstage.$uid.link" &&
	! mpirun_n 2 "$DSTAGE" stage pack2 --to "$PWD/pub" --job link --node-per-rank 2>err &&
	test_grep "not a directory of this user" err &&
	! ls /tmp | grep -q "^[0-9]*\.partial$"
'

test_expect_success USERADD 'a store planted by another user is not read (the shim stays out of the way)' '
	mkdir -p -m 1777 pub2 && mkdir fake && printf "planted\n" >fake/evil.txt &&
	chmod -R a+rX fake &&
	as_other "$T/mkstore" -N 1 fake "$PWD/pub2" >/dev/null &&
	planted=$(ls -d pub2/dstage.*.0) && test -n "$planted" &&
	! env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$PWD/$planted" DSTAGE_NODE=0 DSTAGE_MOUNT="$MOUNT" \
		cat "$MOUNT/evil.txt" 2>err && test_grep "No such file" err
'

test_expect_success 'a job id with a "/" stays one directory under --to (stage, clean)' '
	mkdir -p jid/to jid/victim && : >jid/victim/keep &&
	mpirun_n 1 "$DSTAGE" stage pack2 --to "$PWD/jid/to" --job x -q &&
	mpirun_n 1 "$DSTAGE" stage pack2 --to "$PWD/jid/to" --job "x/../../victim" -q &&
	test -e jid/victim/keep && test -z "$(ls -A jid/victim | grep -v keep)" &&
	"$DSTAGE" clean --to "$PWD/jid/to" --job "x/../../victim" &&
	test -e jid/victim/keep && test -d "jid/to/dstage.$uid.x"
'

test_expect_success 'a store others can write is not read either' '
	chmod 777 "$JOBDIR" &&
	rc=0 && { shim_on 0 ls "$MOUNT" >/dev/null 2>err || rc=$?; } &&
	chmod 700 "$JOBDIR" && test $rc != 0 && test_grep "No such file" err &&
	shim_on 0 ls "$MOUNT" >/dev/null
'

serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'
cleanup_user
test_expect_success 'the test user is gone' '! id dstage-t-$$ 2>/dev/null'
test_done
