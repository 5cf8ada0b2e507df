# SPDX-License-Identifier: BSD-3-Clause
# lib-plan.sh: what the tests of the epoch planner (t/3023, t/3024) share:
# a service whose write of one epoch's share file hangs in fsync until the
# test lets it go (the slowest file system there is).  Source it after
# lib-serve.sh.
#
#   slowsync_build       (in a test) compile the interposed fsync, make gate/
#   slowsync_setup       (in a test) slowsync_build, and make_samples src 24
#                        staged on 2 nodes
#   slowsync_serve E N [serve options]
#                        (top level) serve_start N with the fsync of every
#                        node's share file of epoch E held at the gate
#   blocked              every node of 2 has its share write held
#   release              let them go
#   published E          both nodes' shares of epoch E are published

slowsync_build() {
	cat >slowsync.c <<-'EOF'
	/* fsync of a file whose name contains $SLOW_FSYNC_MATCH: say so
	 * ($SLOW_FSYNC_GATE/blocked.PID), then wait for $SLOW_FSYNC_GATE/release */
	#define _GNU_SOURCE
	#include <dlfcn.h>
	#include <fcntl.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	#include <unistd.h>
	int fsync(int fd)
	{
		static int (*real)(int);
		if (!real)
			real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
		const char *m = getenv("SLOW_FSYNC_MATCH"), *g = getenv("SLOW_FSYNC_GATE");
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
		return real(fd);
	}
	EOF
	cc -shared -fPIC -O2 -o slowsync.so slowsync.c -ldl && mkdir -p gate
}

slowsync_setup() {
	slowsync_build && make_samples src 24 && pack_stage src 2
}

slowsync_serve() {
	SLOW_FSYNC_MATCH="/epochs/share.$1." SLOW_FSYNC_GATE="$TRASH/gate"
	export SLOW_FSYNC_MATCH SLOW_FSYNC_GATE
	shift
	test_atexit 'touch "$TRASH/gate/release"'
	LD_PRELOAD="$TRASH/slowsync.so"
	export LD_PRELOAD
	serve_start "$@"
	unset LD_PRELOAD
}

blocked() { test "$(ls gate | grep -c "^blocked\.")" = 2; }
release() { touch gate/release; }
published() { test -s "$JOBDIR/0/epochs/share.$1" && test -s "$JOBDIR/1/epochs/share.$1"; }
