#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The service's wake-up socket (shuffle/progress.c) is a UDP port: anyone on
# the host can send to it.  Datagrams of every wrong shape (short, long,
# another magic, a guessed cookie, a node number out of range, this node's
# own number), a flood of them, are dropped: the service keeps answering
# every read right, does not poll MPI for them (its CPU stays that of an
# idle service: checked loosely, it is a shared box), and stops cleanly.
# The socket binds to loopback when every node is on this host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_lazy_prereq PYTHON3 'command -v python3' "no python3 on PATH"
test_require PYTHON3

test_expect_success 'two nodes staged' '
	make_samples src 12 &&
	pack_stage src 2
'
serve_start 2 --seed 1 --locality 1 -v
test_expect_success 'served' 'serve_up 2 && grep -q "wake-ups over UDP (loopback)" serve.log'

# udp_ports PID: the UDP ports PID holds (from /proc/net/udp by inode)
udp_ports() {
	for l in /proc/"$1"/fd/*; do
		readlink "$l" 2>/dev/null
	done | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' >inodes
	awk 'NR > 1 { print $10, $2 }' /proc/net/udp | while read -r ino addr; do
		if grep -qx "$ino" inodes; then echo "$addr"; fi
	done
}

test_expect_success 'each node has one wake-up port, on 127.0.0.1 only' '
	for k in 0 1; do
		udp_ports "$(node_pid $k)" >ports.$k &&
		echo "node $k:" && cat ports.$k &&
		test "$(wc -l <ports.$k)" = 1 &&
		grep -q "^0100007F:" ports.$k || exit 1
	done
'

test_expect_success 'forged and broken datagrams to both nodes: dropped' '
	for k in 0 1; do
		p=$(sed "s/.*://" ports.$k) &&
		python3 - "$((0x$p))" <<-\EOF || exit 1
		import os, socket, struct, sys
		port = int(sys.argv[1])
		s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
		to = ("127.0.0.1", port)
		magic = 0x64737077
		msgs = [b"", b"x", b"\0" * 15, b"\0" * 17, os.urandom(65000),
		        struct.pack("<IIII", 0xdeadbeef, 1, 1, 0),
		        struct.pack("<IIII", magic, 7, 1, 12345),
		        struct.pack("<IIII", magic, 0xffffffff, 1, 0),
		        struct.pack("<IIII", magic, 0, 9, 0),
		        struct.pack("<IIII", magic, 1, 1, 0)]
		for _ in range(3000):
		    msgs.append(struct.pack("<IIII", magic, 1, 1, int.from_bytes(os.urandom(4), "little")))
		for m in msgs:
		    try:
		        s.sendto(m, to)
		    except OSError:
		        pass
		EOF
	done
'

test_expect_success 'the services still serve every remote file right' '
	for k in 0 1; do
		"$T/serve-read" -a -R -t 4 "$JOBDIR" $k >out.$k && cat out.$k &&
		grep -q "errors=0" out.$k && ! grep -q "remote=0 " out.$k || exit 1
	done
'

# CPU seconds of node K's service (every thread), from schedstat
svc_cpu() { cat /proc/"$(node_pid "$1")"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }

test_expect_success 'a flood of forged BEGINs does not make an idle service poll' '
	p=$(sed "s/.*://" ports.1) &&
	sleep 0.5 &&
	c0=$(svc_cpu 1) &&
	python3 - "$((0x$p))" <<-\EOF &&
	import os, socket, struct, sys, time
	s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
	end = time.time() + 2
	while time.time() < end:
	    s.sendto(struct.pack("<IIII", 0x64737077, 0, 1, int.from_bytes(os.urandom(4), "little")), ("127.0.0.1", int(sys.argv[1])))
	    time.sleep(0.005)
	EOF
	c1=$(svc_cpu 1) &&
	echo "service CPU over 2 s of forged BEGINs: $(( (c1 - c0) / 1000000 )) ms" &&
	# a real BEGIN would keep it polling (a core); dropped ones wake it
	# 400 times for a few us each
	test $(( (c1 - c0) / 1000000 )) -lt 500
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'

test_done
