#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The epoch prefetch fetches samples that lie next to each other in their
# holder's store with one MPI get (issue 27: one get per sample was ~12 s of
# a 5M-sample epoch).  The plan is sorted by (holder, place there), the
# epoch cache lays such a run out as it lies in the holder, and one get fills
# it.  On two nodes half of a holder's samples are in the other node's share,
# so runs are common: serve.status counts the gets of each epoch
# (`gets=`), which must be well below the samples fetched (`fetched=`);
# readers still get every byte right from the cache, none by a remote read.
# With DSTAGE_SERVE_COALESCE=0 (one get per sample, in read order) the same
# count equals the samples fetched: the count is the gets made.  And the
# start: the index's full check runs beside the first plan and the window
# where the host has a core for it (DSTAGE_SERVE_CHECK_THREAD=1 here), at
# once where not (=0); either way a node whose index fails it (a byte of a
# name no plan reads) refuses to serve, and no node opens its socket.
# And an epoch given up while its cache is being made (the file's
# posix_fallocate held here until the test lets it go, as a slow file
# system would) is freed once its helper is done: main does not wait for it
# (it waited, and a 2 s --timeout ended both nodes).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged (400 samples of 1-9 KiB)' '
	make_samples src 100 &&
	pack_stage src 2
'

serve_start 2 --seed 5
test_expect_success 'served' 'serve_up 2'

test_expect_success 'epoch 0 is fetched with fewer gets than samples' '
	wait_until 60 have_epoch 0 0 && wait_until 60 have_epoch 1 0 &&
	for k in 0 1; do
		f=$(epoch_val $k 0 fetched) && g=$(epoch_val $k 0 gets) &&
		echo "node $k: $f samples fetched with $g gets" &&
		test "$f" -ge 50 && test -n "$g" && test "$g" -ge 1 &&
		test $((4 * g)) -le $((3 * f)) || return 1
	done
'

test_expect_success 'the readers of epoch 0 get every byte right from the cache' '
	read_list 0 0 && read_list 1 0
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'

DSTAGE_SERVE_COALESCE=0
export DSTAGE_SERVE_COALESCE
serve_start 2 --seed 5
unset DSTAGE_SERVE_COALESCE
test_expect_success 'DSTAGE_SERVE_COALESCE=0: one get per sample, the same bytes' '
	serve_up 2 &&
	wait_until 60 have_epoch 0 0 && wait_until 60 have_epoch 1 0 &&
	for k in 0 1; do
		f=$(epoch_val $k 0 fetched) && g=$(epoch_val $k 0 gets) &&
		echo "node $k: $f samples fetched with $g gets" &&
		test "$f" -ge 50 && test "$g" = "$f" || return 1
	done &&
	read_list 0 0 && read_list 1 0
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'

# slowalloc.so: posix_fallocate of a file whose name contains
# $SLOW_ALLOC_MATCH says so ($SLOW_ALLOC_GATE/blocked.PID), then waits for
# $SLOW_ALLOC_GATE/release
test_expect_success CC 'an epoch cache given up while it is made: main goes on (--timeout 2)' '
	cat >slowalloc.c <<-\EOF &&
	#define _GNU_SOURCE
	#include <dlfcn.h>
	#include <fcntl.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	#include <unistd.h>
	int posix_fallocate64(int fd, off64_t off, off64_t len)
	{
		static int (*real)(int, off64_t, off64_t);
		if (!real)
			real = (int (*)(int, off64_t, off64_t))dlsym(RTLD_NEXT, "posix_fallocate64");
		const char *m = getenv("SLOW_ALLOC_MATCH"), *g = getenv("SLOW_ALLOC_GATE");
		char l[64], p[4096], f[4200];
		ssize_t n;
		snprintf(l, sizeof(l), "/proc/self/fd/%d", fd);
		if (m && g && (n = readlink(l, p, sizeof(p) - 1)) > 0) {
			p[n] = 0;
			if (strstr(p, m)) {
				snprintf(f, sizeof(f), "%s/blocked.%d", g, (int)getpid());
				close(open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
				snprintf(f, sizeof(f), "%s/release", g);
				for (int i = 0; i < 12000 && access(f, F_OK); i++)
					usleep(10000);
			}
		}
		return real(fd, off, len);
	}
	EOF
	cc -shared -fPIC -O2 -o slowalloc.so slowalloc.c -ldl && mkdir -p gate
'
if test_have_prereq CC; then
	test_atexit 'touch "$TRASH/gate/release"'
	# a fresh cache file for every epoch (not the retired one taken over):
	# epoch 2's is made with posix_fallocate, held at the gate
	SLOW_ALLOC_MATCH=/epochs/2. SLOW_ALLOC_GATE="$TRASH/gate" DSTAGE_CACHE_RECYCLE=0
	LD_PRELOAD="$TRASH/slowalloc.so"
	export SLOW_ALLOC_MATCH SLOW_ALLOC_GATE DSTAGE_CACHE_RECYCLE LD_PRELOAD
	serve_start 2 --seed 5 --timeout 2
	unset LD_PRELOAD SLOW_ALLOC_MATCH SLOW_ALLOC_GATE DSTAGE_CACHE_RECYCLE
fi
held() { ls gate | grep -q "^blocked\."; }
alive() { kill -0 "$SERVE_PID" 2>/dev/null || { echo "the service is gone"; cat serve.log; return 1; }; }
followed() { test "$(status_val 0 reader_epoch)" = "$1" && test "$(status_val 1 reader_epoch)" = "$1"; }
test_expect_success CC 'readers enter epoch 1: epoch 2'"'"'s cache is being made, held' '
	serve_up 2 &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	wait_until 60 held
'
test_expect_success CC 'readers leave for epoch 5: epoch 2 given up, the service lives on' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/5/all" >list.0 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/5/all" >list.1 &&
	wait_until 60 followed 5 && alive && held &&
	sleep 4 && alive && ! grep -E "no answer|has not returned" serve.log
'
test_expect_success CC 'released: epoch 5 prefetched and read byte for byte; a clean stop' '
	touch gate/release &&
	for k in 0 1; do
		wait_until 60 eval "test \"\$(status_val $k prefetch_epoch)\" -ge 5 &&
			test \"\$(stat_val $k prefetch_done)\" = \"\$(stat_val $k prefetch_total)\"" &&
		sed "s|^|$MOUNT/|" list.$k | shim_on $k xargs -d "\n" cat >got &&
		sed "s|^|src/|" list.$k | xargs -d "\n" cat >want && cmp got want || return 1
	done
'
if test_have_prereq CC; then
	serve_stop
fi
test_expect_success CC 'stopped cleanly, no node taken as gone' '
	test "$(cat serve.rc)" = 0 && ! grep -E "no answer|has not returned|error" serve.log
'

test_expect_success 'an index that fails the full check (a name changed): no node serves' '
	"$PY" - "$JOBDIR/1/index" <<-\EOF &&
	import sys
	d = bytearray(open(sys.argv[1], "rb").read())
	i = d.find(b"labels.txt")  # the index keeps base names (format v3)
	assert i > 0
	d[i + 9] = ord("u")
	open(sys.argv[1], "wb").write(bytes(d))
	EOF
	for th in 1 0; do
		DSTAGE_SERVE_CHECK_THREAD=$th && export DSTAGE_SERVE_CHECK_THREAD &&
		test_status 1 mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank \
			2>err &&
		cat err && grep -q "node 1: .*/index.: checksum mismatch" err &&
		! test -e "$JOBDIR/0/sock" && ! test -e "$JOBDIR/1/sock" || return 1
	done &&
	unset DSTAGE_SERVE_CHECK_THREAD
'

test_done
