# SPDX-License-Identifier: BSD-3-Clause
# t/lib-serve.sh: what the node service's tests (t/30NN-*.t) share.  Source it
# after test-lib.sh.
#
#   make_samples DIR [FILES_PER_CLASS [SIZE]]
#                        a small training tree: 4 classes under train/, files
#                        of SIZE bytes (default: mixed 1..9 KiB), plus val/
#   pack_stage SRC N [stage options]
#                        dstage pack SRC, then dstage stage on N simulated
#                        nodes into $SHM, job $JOB, i.e. into $JOBDIR
#   serve_start N [serve options]   (top level of the script)
#                        dstage serve in the background on N simulated nodes,
#                        log in serve.log
#   serve_up N           (in a test) wait until every node serves
#   outputs_up FILES_PER_CLASS [serve options]
#                        (top level) the outputs tests' start: make_samples
#                        src FILES_PER_CLASS staged on 2 nodes, dstage serve
#                        with --outputs out --drain-to $DR ($TRASH/drain),
#                        and a test that both serve
#   serve_stop           (top level) dstage stop, then wait: exit statuses
#                        in stop.rc and serve.rc
#   serve_wait           (top level) wait for the service (at most
#                        DSTAGE_TEST_MPI_TIMEOUT s, then it is killed): serve.rc
#   shim_on K CMD...     run CMD with the shim preloaded as a reader on node K
#   shim_bg K CMD...     the same in the background; $! is CMD's pid
#   node_pid K           pid of node K's service (NODEDIR/serve.status)
#   status_val K KEY     a value from node K's serve.status
#   stat_val K FIELD     a counter of node K's NODEDIR/stats (dstage status)
#   running K...         every node K's service runs and has its socket
#   stage_r2_nopack      (in a test) make_samples src 24 staged on 4 nodes
#                        with R = 2 and the pack removed; holders (the
#                        index's file -> nodes), pair23 (the files held by
#                        nodes 2 and 3 alone, not empty), every (all files)
#   epoch_val K E KEY    a figure of epoch E's line in node K's serve.status
#   have_epoch K E       node K's serve.status has epoch E's line (prefetched)
#   read_list K E        (in a test) node K reads its list of epoch E through
#                        the shim: the bytes are src/'s, none read remotely,
#                        at least the epoch's fetched samples from the cache
#   epoch_reads_right E K...
#                        (in a test) on every node K, epoch E's list read
#                        through the shim in its order gives src/'s bytes

JOB=t$$
JOBDIR="$SHM/dstage.$(id -u).$JOB"
MOUNT=/dstage-test-$$
[ -e "$MOUNT" ] && { echo "Bail out! $MOUNT exists on disk"; exit 1; }

make_samples() {
	d=$1
	per=${2:-24}
	size=$3
	for c in cat dog fox owl; do
		mkdir -p "$d/train/$c" || return 1
		i=0
		while [ $i -lt "$per" ]; do
			n=${size:-$((1024 + (i * 977 + ${#c} * 131) % 8192))}
			head -c "$n" /dev/urandom >"$d/train/$c/img$i.jpg" || return 1
			i=$((i + 1))
		done
	done
	mkdir -p "$d/val" && printf 'val\n' >"$d/val/labels.txt"
}

pack_stage() {
	src=$1
	n=$2
	shift 2
	"$DSTAGE" pack -p $((2 * n)) --replicate val "$src" pack >pack.log 2>&1 &&
	mpirun_n "$n" "$DSTAGE" stage pack --to "$SHM" --job "$JOB" --node-per-rank -q "$@" >stage.log 2>&1 ||
		{ cat pack.log stage.log; return 1; }
}

# The service runs in the background of the test script itself (not of a
# test's subshell), so that the script can wait for it and kill it.
SERVE_PID=
serve_start() {
	n=$1
	shift
	rm -f serve.rc stop.rc "$JOBDIR"/*/serve.status # a killed service leaves "running"
	# the shell truncates serve.log in the child, after the `&`: serve_up
	# must not find the "error" of the previous service there meanwhile
	rm -f serve.log
	# its life is the script's to decide, its end is bounded (serve_wait):
	# a fixed bound from its start ended t/3202's first service under a
	# load of 13, before the script had done with it; this one only stops a
	# service the script forgot
	timeout -k 5 "$((${DSTAGE_TEST_MPI_TIMEOUT:-120} * 5))" $ds_mpiexec -n "$n" \
		"$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank "$@" >serve.log 2>&1 &
	SERVE_PID=$!
	test_bg "$SERVE_PID"
}

# serve_up N: in a test: wait until all N nodes serve (or the service died)
serve_up() {
	k=0
	while [ $k -lt 300 ]; do
		up=0
		i=0
		while [ $i -lt "$1" ]; do
			grep -qs '^state=running' "$JOBDIR/$i/serve.status" && [ -S "$JOBDIR/$i/sock" ] &&
				up=$((up + 1))
			i=$((i + 1))
		done
		[ $up = "$1" ] && return 0
		[ -s serve.log ] && grep -q "error" serve.log && break
		sleep 0.1
		k=$((k + 1))
	done
	echo "serve did not come up:"
	cat serve.log
	return 1
}

# serve_stop: at the top level: dstage stop, then the service's exit status
# in serve.rc (stop's own in stop.rc)
outputs_up() {
	outputs_per=$1
	shift
	test_expect_success 'two nodes staged' '
		make_samples src $outputs_per &&
		pack_stage src 2
	'
	DR="$TRASH/drain"
	serve_start 2 --outputs out --drain-to "$DR" "$@"
	test_expect_success 'served with outputs' 'serve_up 2'
}

serve_stop() {
	"$DSTAGE" stop --to "$SHM" --job "$JOB" >stop.log 2>&1
	echo $? >stop.rc
	serve_wait
}
serve_wait() {
	# bounded from now (DSTAGE_TEST_MPI_TIMEOUT): a service that does not
	# end is stopped, and its status says so
	wait_gone "${DSTAGE_TEST_MPI_TIMEOUT:-120}" "$SERVE_PID" >/dev/null || {
		echo "# serve_wait: the service did not end in ${DSTAGE_TEST_MPI_TIMEOUT:-120} s: killed"
		_test_kill "$SERVE_PID"
	}
	wait "$SERVE_PID"
	echo $? >serve.rc
}

shim_on() {
	k=$1
	shift
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE="$k" DSTAGE_MOUNT="$MOUNT" "$@"
}

# shim_bg K CMD...: shim_on in the background, with $! CMD's own pid (a
# function run with & is a subshell: killing $! then left CMD running)
shim_bg() {
	k=$1
	shift
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE="$k" DSTAGE_MOUNT="$MOUNT" "$@" &
}

node_pid() { sed -n 's/^pid=//p' "$JOBDIR/$1/serve.status"; }
status_val() { sed -n "s/^$2=//p" "$JOBDIR/$1/serve.status"; }

# The shim's and service's counters of node K, by field name of struct
# ds_stats (read straight from the shared file: 8-byte little-endian words).
stat_val() {
	case $2 in
	opens) w=2 ;; local_reads) w=3 ;; local_bytes) w=4 ;; cache_reads) w=5 ;;
	cache_bytes) w=6 ;; remote_reads) w=7 ;; remote_bytes) w=8 ;; stalls) w=9 ;;
	read_errors) w=10 ;; served_reads) w=11 ;; served_bytes) w=12 ;; epoch) w=13 ;;
	prefetch_epoch) w=14 ;; prefetch_done) w=15 ;; prefetch_total) w=16 ;;
	fetched_bytes) w=17 ;; *) echo "stat_val: '$2'?" >&2; return 1 ;;
	esac
	od -An -t u8 -j $((w * 8)) -N 8 "$JOBDIR/$1/stats" | tr -d ' '
}

# wait_until SECS CMD...: poll CMD every 0.1 s until it succeeds
wait_until() {
	t=$1
	shift
	k=0
	while [ $k -lt $((t * 10)) ]; do
		"$@" && return 0
		sleep 0.1
		k=$((k + 1))
	done
	return 1
}

running() {
	for i in "$@"; do
		grep -qs ^state=running "$JOBDIR/$i/serve.status" && test -S "$JOBDIR/$i/sock" || return 1
	done
}

stage_r2_nopack() {
	make_samples src 24 &&
	pack_stage src 4 -R 2 &&
	rm -rf pack &&
	"$DSTAGE_TEST_BUILD/t/index-holders" "$JOBDIR/0/index" >holders &&
	awk "\$2 == \"2,3\" || \$2 == \"3,2\" { print \$1 }" holders | sort >pair23 &&
	awk "{ print \$1 }" holders | sort >every &&
	test -s pair23
}

epoch_reads_right() {
	e=$1
	shift
	for k in "$@"; do
		shim_on $k cat "$MOUNT/.dstage/epochs/$e/all" >e$e.$k &&
		sed "s|^|$MOUNT/|" e$e.$k | shim_on $k xargs -d "\n" cat >got &&
		sed "s|^|src/|" e$e.$k | xargs -d "\n" cat | cmp - got || return 1
	done
}

epoch_val() { sed -n "s/^epoch\.$2=.* $3=\([0-9]*\).*/\1/p" "$JOBDIR/$1/serve.status"; }
have_epoch() { grep -qs "^epoch\.$2=" "$JOBDIR/$1/serve.status"; }

read_list() {
	shim_on $1 cat "$MOUNT/.dstage/epochs/$2/all" >list.$1 &&
	r0=$(stat_val $1 remote_reads) && c0=$(stat_val $1 cache_reads) &&
	sed "s|^|$MOUNT/|" list.$1 | shim_on $1 xargs -d "\n" cat >got.$1 &&
	sed "s|^|src/|" list.$1 | xargs -d "\n" cat >want.$1 &&
	cmp got.$1 want.$1 &&
	r1=$(stat_val $1 remote_reads) && c1=$(stat_val $1 cache_reads) &&
	echo "node $1, epoch $2: remote reads $r0 -> $r1, from the cache $c0 -> $c1" &&
	test "$r1" = "$r0" && test $((c1 - c0)) -ge "$(epoch_val $1 $2 fetched)"
}
