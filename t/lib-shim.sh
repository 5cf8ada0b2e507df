# SPDX-License-Identifier: BSD-3-Clause
# t/lib-shim.sh: what the shim's tests (t/20NN-*.t) share.  Source it after
# test-lib.sh.
#
#   make_tree DIR        a source tree with every kind of entry the shim must
#                        show: sizes around page and buffer boundaries, modes,
#                        symlinks (relative, to directories, chains, a loop,
#                        dangling), empty files and directories, odd names
#   stage_tree SRC [mkstore options]
#                        build node stores in $SHM with build/t/mkstore, in
#                        $JOBDIR; the mount is $MOUNT (/dstage-test-PID, which must not
#                        exist on disk: interception is then the only way in)
#   shim CMD...          run CMD with the shim preloaded on node $NODE (0)
#   tree_paths SRC       every relative path of SRC plus tricky names
#   fake_service_start [fake-service options]
#                        (in a test) the stand-in node service of node 0
#                        (t/helpers/fake-service.c) in the background, pid
#                        in svc.pid, output in svc.out; returns once it listens

MOUNT=/dstage-test-$$
NODE=${NODE:-0}
[ -e "$MOUNT" ] && { echo "Bail out! $MOUNT exists on disk"; exit 1; }
[ -x "$T/mkstore" ] || { echo "Bail out! $T/mkstore not built (run make)"; exit 1; }

make_tree() {
	d=$1
	mkdir -p "$d/a/b/c" "$d/empty" "$d/modes" "$d/links" "$d/sp ace/ü" "$d/.hidden" &&
	printf 'hello\n' >"$d/a/x.txt" &&
	: >"$d/a/zero" &&
	printf 'one\ntwo\nneedle three\n' >"$d/a/b/grep.txt" &&
	head -c 4095 /dev/urandom >"$d/a/b/p4095" &&
	head -c 4096 /dev/urandom >"$d/a/b/p4096" &&
	head -c 4097 /dev/urandom >"$d/a/b/p4097" &&
	head -c 131072 /dev/urandom >"$d/a/b/c/r128k" &&
	head -c 1500000 /dev/urandom >"$d/a/b/c/r1500k" &&
	seq 1 50000 >"$d/a/b/c/seq.txt" &&
	printf 'x' >"$d/modes/m600" && chmod 600 "$d/modes/m600" &&
	printf 'x' >"$d/modes/m444" && chmod 444 "$d/modes/m444" &&
	printf '#!/bin/sh\necho hi\n' >"$d/modes/m755" && chmod 755 "$d/modes/m755" &&
	printf 'x' >"$d/modes/m000" && chmod 000 "$d/modes/m000" &&
	mkdir "$d/modes/d700" && chmod 700 "$d/modes/d700" &&
	printf 'space\n' >"$d/sp ace/ü/f ile" &&
	printf 'hidden\n' >"$d/.hidden/.dot" &&
	ln -s ../a/x.txt "$d/links/tofile" &&
	ln -s ../a/b "$d/links/todir" &&
	ln -s tofile "$d/links/chain" &&
	ln -s loop2 "$d/links/loop1" && ln -s loop1 "$d/links/loop2" &&
	ln -s nowhere "$d/links/dangling" &&
	ln -s . "$d/links/self" &&
	ln -s ../../a "$d/a/b/up" &&
	touch -d '2020-01-02 03:04:05.123456789' "$d/a/x.txt" &&
	touch -h -d '2021-05-06 07:08:09' "$d/links/tofile" &&
	touch_root "$d"
}

# The node store gives the mount point itself the newest mtime of the
# dataset (a pack records none for its root: common/ixbuild.c): give the
# source root the same, after every change to its entries.
touch_root() {
	_t=$(find "$1" -mindepth 1 -printf '%T@\n' | sort -n | tail -n 1) &&
	touch -d "@${_t:-0}" "$1"
}

JOBDIR="$SHM/dstage.$(id -u).0"
export JOBDIR

stage_tree() {
	src=$1
	shift
	rm -rf "$JOBDIR" &&
	test "$("$T/mkstore" "$@" "$src" "$SHM")" = "$JOBDIR"
}

shim() {
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE="$NODE" "$@"
}

# Relative paths to try: the whole tree, and names that resolve in unusual
# ways (".", "..", "//", trailing '/', through symlinks, missing, too long).
tree_paths() {
	(cd "$1" && find . -mindepth 1 | sed 's,^\./,,' | sort)
	cat <<'PATHS'
.
./
a/
a//x.txt
./a/./x.txt
a/b/../x.txt
a/x.txt/
a/x.txt/.
a/x.txt/..
a/missing
a/missing/deeper
missing/
links/todir/
links/todir/c/seq.txt
links/todir/../x.txt
links/tofile/
links/self/self/tofile
links/loop1/x
a/b/up/b/up/x.txt
empty/.
empty/..
a/b/c/../../../a/b/p4096
PATHS
	printf '%0300d\n' 0
}

# make_raw_so FILE: a shared object with one function, long sc(n, a, b, c,
# d), that makes system call n with the syscall instruction, past libc and
# so past the shim (what a static binary, inline assembly or io_uring does);
# on other machines than x86_64 it fails every call with ENOSYS.  Python
# loads it with ctypes.
make_raw_so() {
	cat >"$1.c" <<-\EOF &&
	#include <errno.h>
	long sc(long n, long a, long b, long c, long d)
	{
	#if defined(__x86_64__)
		long r;
		register long r10 __asm__("r10") = d;
		__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
		                 : "rcx", "r11", "memory");
		if (r < 0 && r > -4096) { errno = (int)-r; return -1; }
		return r;
	#else
		(void)n; (void)a; (void)b; (void)c; (void)d;
		errno = ENOSYS;
		return -1;
	#endif
	}
	EOF
	${CC:-gcc} -shared -fPIC -O2 -o "$1" "$1.c"
}

# The service's "ready" (printed once it listens) is looked for in an
# svc.out of its own: the shell truncates the file in the child, after the
# `&`, so a poll right away could read the "ready" of the previous service
# and a reader then find no socket.  An exit fails at once; 60 s is a bound
# for a start that hangs, never reached by a slow one.
fake_service_start() {
	rm -f svc.out svc.pid
	"$T/fake-service" "$@" "$JOBDIR" 0 >svc.out 2>&1 &
	_fs=$!
	test_bg $_fs
	echo $_fs >svc.pid
	_fk=0
	until grep -q '^ready$' svc.out 2>/dev/null; do
		if ! proc_running $_fs || [ $_fk -ge 600 ]; then
			echo "fake-service did not start:"
			cat svc.out
			return 1
		fi
		sleep 0.1
		_fk=$((_fk + 1))
	done
}
