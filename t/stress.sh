# SPDX-License-Identifier: BSD-3-Clause
# t/stress.sh: the suite under load, from fresh clones (t/README.md says
# when and how to run it).  Clones HEAD of this checkout into a
# temporary directory, starts two busy loops (one per core of the 2-core CI
# machine), then, N times (default 5): a fresh clone, `make -j2`, `make
# check` (TEST_JOBS as usual), each run's log kept; stops the loops and
# reports every run and every `not ok` line.  Exit 0 only when all N runs
# passed.
#
#   sh t/stress.sh [-n RUNS] [-l BUSY_LOOPS] [-k] [-- PROVE_ARGS...]
#     -n RUNS        consecutive runs (default 5)
#     -l LOOPS       busy loops beside the suite (default 2)
#     -k             keep the clones and logs (default: only the logs)
#     -- ARGS        run `prove $(PROVE_FLAGS) ARGS` instead of `make check`
#                    (e.g. -- t/2040-shim-remote.t t/2209-outputs-sum.t)
#
# The clones are of HEAD (commit what you want tested); the build needs the
# same dependencies as `make check` (`make deps` once, as root; `make
# npm-s3` is run in each clone when build/npm exists here).  Logs go to
# ${DSTAGE_STRESS_DIR:-/tmp/dstage-stress.PID}/run-N.log.
set -u
runs=5
loops=2
keep=
while [ $# -gt 0 ]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-l) loops=$2; shift 2 ;;
	-k) keep=1; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '1,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: sh t/stress.sh [-n RUNS] [-l BUSY_LOOPS] [-k] [-- PROVE_ARGS...]" >&2; exit 2 ;;
	esac
done
case $runs$loops in *[!0-9]* | "") echo "t/stress.sh: -n and -l take numbers" >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
head=$(git -C "$top" rev-parse HEAD) || exit 1
dir=${DSTAGE_STRESS_DIR:-/tmp/dstage-stress.$$}
mkdir -p "$dir" || exit 1
echo "t/stress.sh: $runs run(s) of $(git -C "$top" log -1 --format='%h %s' "$head" | cut -c1-70)"
echo "t/stress.sh: $loops busy loop(s); logs in $dir"

busy=
stop_busy() {
	[ -n "$busy" ] && kill $busy 2>/dev/null
	busy=
}
trap 'stop_busy; exit 130' INT
trap 'stop_busy; exit 143' TERM
trap 'stop_busy' EXIT
i=0
while [ $i -lt "$loops" ]; do
	sh -c 'while :; do :; done' &
	busy="$busy $!"
	i=$((i + 1))
done

failed=0
n=1
while [ $n -le "$runs" ]; do
	clone=$dir/clone-$n
	log=$dir/run-$n.log
	rm -rf "$clone"
	t0=$(date +%s)
	{
		git clone -q --no-local "$top" "$clone" && git -C "$clone" checkout -q "$head" &&
		make -C "$clone" -j2 >"$dir/build-$n.log" 2>&1 &&
		if [ -d "$top/build/npm" ]; then make -C "$clone" npm-s3 >>"$dir/build-$n.log" 2>&1; fi &&
		if [ $# -gt 0 ]; then
			(cd "$clone" && prove --comments --failures --timer -j"${TEST_JOBS:-3}" "$@")
		else
			make -C "$clone" check
		fi
	} >"$log" 2>&1
	rc=$?
	t1=$(date +%s)
	if [ $rc = 0 ]; then
		echo "run $n: ok ($((t1 - t0)) s)"
	else
		failed=$((failed + 1))
		echo "run $n: FAILED, exit $rc ($((t1 - t0)) s), $log:"
		grep -e '^not ok' -e '^Bail out' -e '^t/.*Wstat' "$log" | sed 's/^/    /'
	fi
	[ -n "$keep" ] || rm -rf "$clone"
	n=$((n + 1))
done
stop_busy
echo "t/stress.sh: $((runs - failed)) of $runs run(s) passed"
[ $failed = 0 ]
