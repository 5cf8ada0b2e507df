#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The harness itself (t/test-lib.sh): prerequisites skip with the reason; an
# interrupted script bails out, cleans up and runs nothing more (before, a
# Ctrl-C removed the scratch directory and the script went on from "/");
# a script that dies before test_done fails; background pids registered
# from inside a test are killed at the end.  Each case is a small script
# run against the library in a copy of the layout (t/, tools/, the builds
# linked).
. "$(dirname "$0")/test-lib.sh"

mkdir -p fake/t tmp &&
	ln -s "$SRCDIR/t/test-lib.sh" fake/t/test-lib.sh &&
	ln -s "$SRCDIR/build" fake/build &&
	ln -s "$SRCDIR/build-openmpi" fake/build-openmpi &&
	ln -s "$SRCDIR/tools" fake/tools || exit 1

# run_case NAME: run fake/t/NAME.t (its scratch dirs under $TRASH/tmp),
# stdout to NAME.out, exit status to NAME.rc
run_case() {
	(DSTAGE_TEST_TMP="$TRASH/tmp" sh "fake/t/$1.t" >"$1.out" 2>"$1.err"; echo $? >"$1.rc")
}
# case NAME <<EOF: the script, after the line sourcing the library
case_script() {
	{
		echo '#!/bin/sh'
		echo '. "$(dirname "$0")/test-lib.sh"'
		cat
	} >"fake/t/$1.t"
}

test_expect_success 'a missing prerequisite: the test is skipped with the reason, not run' '
	case_script prereq <<-\EOF &&
	test_lazy_prereq NEVER "false" "never here"
	test_lazy_prereq ALWAYS "true"
	test_set_prereq SET
	test_expect_success NEVER "needs NEVER" "echo ran >\"$TRASH/../ran\""
	test_expect_success ALWAYS,SET "needs ALWAYS and SET" "true"
	test_expect_success !SET "needs no SET" "false"
	test_expect_code NEVER 1 "a code test needing NEVER" "false"
	test_expect_success "plain" "true"
	test_have_prereq NEVER || echo "# have: no ($test_missing_prereq)"
	test_done
	EOF
	run_case prereq && cat prereq.out prereq.err &&
	test "$(cat prereq.rc)" = 0 &&
	cat >expect <<-\EOF &&
	ok 1 # skip needs NEVER (missing NEVER: never here)
	ok 2 - needs ALWAYS and SET
	ok 3 # skip needs no SET (missing !SET: SET is present)
	ok 4 # skip a code test needing NEVER (missing NEVER: never here)
	ok 5 - plain
	# have: no (NEVER)
	1..5
	EOF
	test_cmp expect prereq.out && ! test -e tmp/ran
'

test_expect_success 'a lazy prerequisite is evaluated once, in a scratch directory' '
	case_script lazy <<-EOF &&
	test_lazy_prereq ONCE "echo x >>\"$TRASH/evals\"; pwd >\"$TRASH/where\"; touch left-here"
	test_expect_success ONCE "one" "true"
	test_expect_success ONCE "two" "true"
	test_have_prereq ONCE
	test_expect_success "nothing left in the test directory" "! test -e left-here"
	test_done
	EOF
	run_case lazy && cat lazy.out &&
	test "$(cat lazy.rc)" = 0 && test "$(wc -l <evals)" = 1 &&
	grep -q "/\.prereq-ONCE$" where
'

test_expect_success 'test_require: the whole script is skipped with the reason' '
	case_script require <<-\EOF &&
	test_lazy_prereq NEVER "false" "never here"
	test_require NEVER
	echo "not reached"
	test_done
	EOF
	run_case require && cat require.out &&
	test "$(cat require.rc)" = 0 &&
	echo "1..0 # SKIP missing NEVER: never here" >expect && test_cmp expect require.out
'

# interrupt NAME SIGNAL: start fake/t/NAME.t in a process group of its own
# with default signal handling (as a terminal runs a command: a shell would
# start it with SIGINT ignored), wait for its first test to be running, send
# SIGNAL to the whole group (Ctrl-C does that), wait for the end
interrupt() {
	rm -f started
	DSTAGE_TEST_TMP="$TRASH/tmp" perl -e '
		my ($script, $out, $err, $sig) = @ARGV;
		my $pid = fork() // die "fork: $!";
		if ($pid == 0) {
			setpgrp(0, 0);
			$SIG{$_} = "DEFAULT" for qw(INT TERM QUIT);
			open(STDOUT, ">", $out) or die; open(STDERR, ">", $err) or die;
			exec("sh", $script) or die "exec: $!";
		}
		for (1 .. 100) { last if -e "started"; select(undef, undef, undef, 0.1); }
		kill($sig, -$pid);
		waitpid($pid, 0);
		print(($? & 127) ? 128 + ($? & 127) : $? >> 8, "\n");
	' "fake/t/$1.t" "$1.out" "$1.err" "$2" >"$1.rc"
}

test_expect_success 'SIGINT during a test: bail out, clean up, exit 130, nothing more runs' '
	case_script int <<-EOF &&
	sleep 300 &
	test_bg \$!
	echo \$! >"$TRASH/bg.pid"
	echo "\$TRASH" >"$TRASH/trash.path"
	test_expect_success "slow" "touch \"$TRASH/started\"; sleep 30"
	test_expect_success "after" "pwd >\"$TRASH/after.pwd\""
	touch "$TRASH/top-level-ran"
	test_done
	EOF
	interrupt int INT && cat int.out int.err &&
	test "$(cat int.rc)" = 130 &&
	grep "^Bail out! interrupted (SIGINT)" int.out &&
	! grep "^ok 2\|^not ok 2" int.out &&
	! test -e after.pwd && ! test -e top-level-ran &&
	! test -e "$(cat trash.path)" &&
	! kill -0 "$(cat bg.pid)" 2>/dev/null
'

test_expect_success 'SIGTERM: the same, exit 143' '
	case_script term <<-EOF &&
	test_expect_success "slow" "touch \"$TRASH/started\"; sleep 30"
	test_expect_success "after" "pwd >\"$TRASH/after.pwd\""
	test_done
	EOF
	rm -f after.pwd && interrupt term TERM && cat term.out &&
	test "$(cat term.rc)" = 143 &&
	grep "^Bail out! interrupted (SIGTERM)" term.out && ! test -e after.pwd
'

test_expect_success 'a script that exits before test_done fails, says so, keeps its directory' '
	case_script early <<-EOF &&
	test_expect_success "one" "true"
	echo "\$TRASH" >"$TRASH/early.path"; echo "\$SHM" >"$TRASH/early.shm"
	exit 0
	test_done
	EOF
	run_case early && cat early.out &&
	test "$(cat early.rc)" = 1 &&
	grep "^# early: the script exited with status 0 after test 1, before test_done" early.out &&
	test -d "$(cat early.path)" && test -d "$(cat early.shm)" &&
	rm -rf "$(cat early.path)" "$(cat early.shm)"
'

test_expect_success 'test_bg from inside a test body: killed at the end; test_atexit runs' '
	case_script bg <<-EOF &&
	test_expect_success "a service from a test" "sleep 300 & test_bg \\\$!; echo \\\$! >\"$TRASH/svc.pid\""
	test_atexit "echo atexit-ran >\"$TRASH/atexit\""
	test_done
	EOF
	run_case bg && cat bg.out &&
	test "$(cat bg.rc)" = 0 && test -s svc.pid &&
	! kill -0 "$(cat svc.pid)" 2>/dev/null &&
	grep -q atexit-ran atexit
'

test_expect_success TMPFS 'a mount left under the scratch directory is undone, not emptied through' '
	case_script mnt <<-EOF &&
	mkdir m && mount -t tmpfs tmpfs m && echo x >m/f
	echo "\$TRASH" >"$TRASH/mnt.path"
	test_expect_success "mounted" "mountpoint -q m"
	test_done
	EOF
	run_case mnt && cat mnt.out &&
	test "$(cat mnt.rc)" = 0 && ! test -e "$(cat mnt.path)" &&
	! grep -q "$(cat mnt.path)" /proc/self/mounts
'

test_expect_success 'test_status: the status checked, the && chain kept, what it says in the test'"'"'s output' '
	case_script status <<-EOF &&
	echo "\$TRASH" >"$TRASH/status.path"; echo "\$SHM" >"$TRASH/status.shm"
	t() { echo "to-out"; echo "to-err" >&2; return \$1; }
	test_expect_success "exit 1 as wanted" "test_status 1 t 1 >o 2>e && grep -q to-err e && echo after"
	test_expect_success "exit 0 as wanted" "test_status 0 t 0 2>e && echo after0"
	test_expect_success "exit 0 where 1 is wanted" "test_status 1 t 0 >o 2>e && echo not-reached"
	test_expect_success "exit 2 where 0 is wanted" "test_status 0 t 2 >o 2>e && echo not-reached"
	test_expect_success "--show: the file after the command, either way" "test_status --show e 3 t 4 >o 2>e && echo not-reached"
	test_done
	EOF
	run_case status && cat status.out &&
	test "$(cat status.rc)" = 1 &&
	grep -q "^ok 1 - exit 1 as wanted" status.out &&
	grep -q "^ok 2 - exit 0 as wanted" status.out &&
	grep -q "^not ok 3 - exit 0 where 1 is wanted" status.out &&
	grep -q "^#   test_status: t exited 0, want 1" status.out &&
	grep -q "^not ok 4 - exit 2 where 0 is wanted" status.out &&
	grep -q "^#   test_status: t exited 2, want 0" status.out &&
	grep -q "^not ok 5 - --show" status.out &&
	grep -q "^#   to-err" status.out && grep -q "^#   test_status: t exited 4, want 3" status.out &&
	! grep "not-reached\|to-out" status.out &&
	rm -rf "$(cat status.path)" "$(cat status.shm)"
'

test_expect_success 'nothing of the cases is left' '
	ls -A tmp >left && test_cmp /dev/null left
'
test_expect_success 'kill_ranks: each pid must run when called; wait_gone: an exited child is gone' '
	sleep 100 &
	a=$!
	sleep 100 &
	b=$!
	! kill_ranks KILL "" && ! kill_ranks KILL x && ! kill_ranks KILL &&
	kill_ranks KILL $a $b &&
	wait_gone 30 $a $b &&
	! proc_running $a && ! kill_ranks KILL $a $b &&
	{ wait $a $b || :; } # exit 137: killed, as meant
'

test_done
