#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Children that share or copy the shim's memory without fork's handlers
# (vfork, clone, _Fork, a fork system call through syscall()) change nothing
# in the parent's descriptor table, and a vfork child cannot open a staged
# file of its own: the shim asks getpid only once such a child may exist
# (io/owner.c), so every way of making one must be seen.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"
test_require CC

test_expect_success 'setup: a tree, one node; the program' '
	mkdir -p src/a && printf "staged bytes\n" >src/a/f && printf "other\n" >src/a/g &&
	touch_root src && stage_tree src -N 1 -p 2 &&
	cat >kids.c <<-\EOF &&
	#define _GNU_SOURCE
	#include <errno.h>
	#include <fcntl.h>
	#include <sched.h>
	#include <signal.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	#include <sys/syscall.h>
	#include <sys/wait.h>
	#include <unistd.h>
	static const char *other;
	static int fd;
	static volatile int child_open = -2, child_errno;
	/* what every child does: close and dup2 over the parent staged
	 * number, try a staged open of its own */
	static int child(void *arg)
	{
		(void)arg;
		close(fd);
		dup2(2, fd);
		child_open = open(other, O_RDONLY);
		child_errno = errno;
		return 0;
	}
	int main(int argc, char **argv)
	{
		const char *mode = argv[1];
		other = argv[3];
		fd = open(argv[2], O_RDONLY);
		if (fd < 0 || argc != 4)
			return 2;
		pid_t p = -1;
		static char stack[1 << 16];
		if (!strcmp(mode, "vfork")) {
			p = vfork();
			if (p == 0) {
				child(NULL);
				_exit(0);
			}
		} else if (!strcmp(mode, "clone")) {
			p = clone(child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
		} else if (!strcmp(mode, "_Fork")) {
			p = _Fork();
			if (p == 0) {
				child(NULL);
				_exit(child_open >= 0 ? 0 : 3);
			}
		} else if (!strcmp(mode, "sysfork")) {
			p = (pid_t)syscall(SYS_fork);
			if (p == 0) {
				child(NULL);
				_exit(child_open >= 0 ? 0 : 3);
			}
		}
		int st;
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st))
			return 4;
		char b[64] = {0};
		ssize_t n = read(fd, b, sizeof(b) - 1);
		printf("parent read %zd %s", n, n > 0 ? b : "\n");
		if (!strcmp(mode, "vfork") || !strcmp(mode, "clone"))
			printf("child open %s\n", child_open < 0 && child_errno == ENOTSUP ? "ENOTSUP" : "succeeded");
		else
			printf("child exit %d\n", WEXITSTATUS(st));
		return 0;
	}
	EOF
	${CC:-gcc} -O2 -Wall -o kids kids.c
'

for mode in vfork clone; do
	test_expect_success "$mode child: the parent keeps its staged file, the child cannot open one" "
		shim ./kids $mode \"\$MOUNT/a/f\" \"\$MOUNT/a/g\" >out &&
		printf 'parent read 13 staged bytes\nchild open ENOTSUP\n' >expect &&
		test_cmp expect out
	"
done

# a child with a copy of memory that fork's handlers never saw: the shim
# leaves its table alone (a staged open is refused as in a vfork child)
for mode in _Fork sysfork; do
	test_expect_success "$mode child: the parent keeps its staged file" "
		shim ./kids $mode \"\$MOUNT/a/f\" \"\$MOUNT/a/g\" >out &&
		printf 'parent read 13 staged bytes\nchild exit 3\n' >expect &&
		test_cmp expect out
	"
done

test_done
