#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Files held by another node: the shim asks the node service over its Unix
# socket (here a stand-in speaking the same protocol, t/helpers/
# fake-service.c) and gets the same bytes; zlib files inflate; big files go
# range by range; counters land in the node's stats.  A dead or stuck
# service gives EIO within DSTAGE_TIMEOUT, never a hang.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

start_service() { fake_service_start "$@"; }
# The service was started by another test's body: not a child here (`wait`
# cannot reap it), so wait until it has exited before the next one starts.
stop_service() {
	kill -9 $(cat svc.pid) 2>/dev/null
	kill -CONT $(cat svc.pid) 2>/dev/null
	wait_gone 30 $(cat svc.pid) &&
	rm -f "$JOBDIR/0/sock"
}
sums() {
	(cd "$1" && find . -type f | sort | while read -r f; do
		printf "%s %s\n" "$f" "$($2 sha256sum <"$f" 2>&1 | cut -c1-64)"; done)
}

test_expect_success 'setup: 2 nodes, each partition on one of them' '
	make_tree "$TRASH/src" &&
	head -c 20000000 /dev/urandom >"$TRASH/src/a/big20m" &&
	touch_root "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 2 -R 1 -p 4 &&
	head -c 256 /dev/zero >"$JOBDIR/0/stats" &&
	(cd src && find . -type f | sed "s,^\./,," | sort) >files
'

test_expect_success 'some files are only on node 1: without a service they fail with EIO' '
	DSTAGE_TIMEOUT=2 shim "$PY" -c "
import sys, errno
bad = 0
for f in open(\"files\").read().splitlines():
    try: open(sys.argv[1] + \"/\" + f, \"rb\").read()
    except OSError as e:
        assert e.errno == errno.EIO, (f, e); bad += 1
print(bad)
" "$MOUNT" >n && test $(cat n) -gt 3
'

test_expect_success 'with the service: every file identical to the source' '
	start_service --log "$TRASH/svc.log" &&
	(cd src && xargs -d "\n" sha256sum <../files) >native &&
	(cd src && shim sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <../files) >staged &&
	test_cmp native staged &&
	grep -q "^read " svc.log
'

test_expect_success 'a big remote file is read range by range, not whole' '
	shim "$PY" -c "
import sys, os
fd = os.open(sys.argv[1] + \"/a/big20m\", os.O_RDONLY)
os.lseek(fd, 12345678, 0); a = os.read(fd, 1000); b = os.pread(fd, 10, 19999995)
n = open(\"src/a/big20m\", \"rb\").read()
assert a == n[12345678:12346678] and b == n[19999995:], (len(a), len(b))
" "$MOUNT" &&
	! grep -q " 0 20000000\$" svc.log
'

test_expect_success 'counters: opens, local and remote reads and bytes' '
	"$PY" -c "
import struct, sys
v = struct.unpack(\"<32Q\", open(sys.argv[1], \"rb\").read(256))
opens, lr, lb, cr, cb, rr, rb, st, err = v[2:11]
print(opens, lr, lb, rr, rb, err)
assert opens > 0 and lr > 0 and lb > 0 and rr > 0 and rb > 0 and err > 0
" "$JOBDIR/0/stats"
'

test_expect_success 'zlib files held remotely inflate to the same bytes' '
	stop_service &&
	stage_tree "$TRASH/src" -N 2 -R 1 -p 4 -z &&
	start_service &&
	(cd src && shim sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <../files) >staged-z &&
	test_cmp native staged-z
'

remote_file() {
	# a file whose partition is not on node 0
	shim "$PY" -c "
import sys, errno
for f in open(\"files\").read().splitlines():
    if f.startswith(\"a/big\"): continue
    try: open(sys.argv[1] + \"/\" + f, \"rb\").read(1)
    except OSError: print(f); break
" "$MOUNT"
}

test_expect_success 'a stuck service: EIO within the bound' '
	stop_service && f=$(DSTAGE_TIMEOUT=1 remote_file) && test -n "$f" &&
	start_service --hang &&
	start=$(date +%s%N) &&
	! DSTAGE_TIMEOUT=1 shim cat "$MOUNT/$f" >/dev/null 2>err &&
	end=$(date +%s%N) && grep -q "Input/output error" err &&
	test $(( (end - start) / 1000000 )) -lt 4000 &&
	test $(( (end - start) / 1000000 )) -ge 900
'

test_expect_success 'a service stopped (SIGSTOP), then killed: EIO, no hang' '
	stop_service && f=$(DSTAGE_TIMEOUT=1 remote_file) && test -n "$f" && start_service &&
	shim cat "$MOUNT/$f" >/dev/null &&
	kill -STOP $(cat svc.pid) &&
	start=$(date +%s%N) &&
	! DSTAGE_TIMEOUT=1.5 shim cat "$MOUNT/$f" >/dev/null 2>err &&
	end=$(date +%s%N) && grep -q "Input/output error" err &&
	test $(( (end - start) / 1000000 )) -lt 5000 &&
	kill -9 $(cat svc.pid) && wait_gone 30 $(cat svc.pid) &&
	start=$(date +%s%N) &&
	! DSTAGE_TIMEOUT=30 shim cat "$MOUNT/$f" >/dev/null 2>err &&
	end=$(date +%s%N) && grep -q "Input/output error" err &&
	test $(( (end - start) / 1000000 )) -lt 3000
'

test_expect_success 'a service that dies mid-way: EIO for the rest, no wrong bytes' '
	stop_service && start_service --die-after 3 &&
	! (cd src && shim sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <../files) >part 2>err &&
	grep -q "Input/output error" err &&
	sort part >p1 && sort native >n1 && comm -23 p1 n1 >wrong && test_cmp /dev/null wrong
'

test_expect_success 'cleanup' 'stop_service'
test_done
