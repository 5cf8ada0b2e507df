#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Soak (`make soak`; `make test` skips it: set DSTAGE_SOAK=1 to run it by
# hand): 4 simulated nodes serve for DSTAGE_SOAK_EPOCHS (50) epochs while one
# reader per node follows its epoch lists at full speed through the shim
# (t/helpers/hard-soak.c), checking every byte against the source's
# CRC-32C.  Then:
#  - no read error anywhere (readers, the shim's counters);
#  - memory flat: the anonymous memory (RssAnon: heap, stacks) of every
#    reader and every service process after the warm-up epochs and at the
#    end, within a small margin.  VmRSS is reported too; it also counts the
#    pages of the mapped store and epoch caches a process touched, which
#    come and go with what it reads;
#  - no descriptor leak: /proc/PID/fd of the readers (every epoch) and of
#    the services (after warm-up, and at the end with the readers gone);
#  - the node stores do not grow (retired epoch caches are removed).
# The figures are printed as TAP comments.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_require SOAK
EPOCHS=${DSTAGE_SOAK_EPOCHS:-50}
N=4
WARM=3 # epochs after which memory and descriptors are taken as the baseline
export DSTAGE_TEST_MPI_TIMEOUT=${DSTAGE_SOAK_TIMEOUT:-7200}

st_kb() { sed -n "s/^$2:[[:space:]]*\([0-9]*\).*/\1/p" /proc/"$1"/status; }
fds() { ls /proc/"$1"/fd | wc -l; }
store_kb() { du -sk "$JOBDIR" | cut -f1; }
svc_sample() { # one line per service: pid VmRSS RssAnon fds
	for p in $svc_pids; do
		echo "$p $(st_kb $p VmRSS) $(st_kb $p RssAnon) $(fds $p)"
	done
}

test_expect_success "setup: $N nodes staged, 4000 small files and 8 of 1-3 MiB" '
	make_samples src 1000 &&
	mkdir -p src/train/big && for i in 1 2 3 4 5 6 7 8; do
		head -c $(( (i % 3 + 1) * 1048576 + i * 4099 )) /dev/urandom >src/train/big/b$i.bin || exit 1
	done &&
	pack_stage src '$N'
'
serve_start $N --seed 5
test_expect_success 'served' 'serve_up '$N
svc_pids=
for n in 0 1 2 3; do svc_pids="$svc_pids $(node_pid $n)"; done
svc_sample >"$TRASH/svc.start"

readers=
n=0
t0=$(date +%s)
while [ $n -lt $N ]; do
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_NODE=$n DSTAGE_MOUNT="$MOUNT" \
		"$T/hard-soak" "$MOUNT" "$TRASH/src" "$EPOCHS" >"$TRASH/reader.$n.log" \
		2>"$TRASH/reader.$n.err" &
	readers="$readers $!"
	test_bg $!
	n=$((n + 1))
done

# after the warm-up: the services' memory and descriptors, the stores' size
i=0
while [ $i -lt 7200 ]; do
	warm=0
	for r in 0 1 2 3; do
		[ "$(grep -c '^epoch=' "$TRASH/reader.$r.log" 2>/dev/null)" -ge $WARM ] && warm=$((warm + 1))
	done
	[ $warm = $N ] && break
	kill -0 $readers 2>/dev/null || break
	sleep 0.2
	i=$((i + 1))
done
svc_sample >"$TRASH/svc.warm"
store_kb >"$TRASH/store.warm"

rc=0
for r in $readers; do
	wait $r || rc=1
done
echo $rc >"$TRASH/readers.rc"
t1=$(date +%s)
sleep 2 # the services notice the readers' connections closing
svc_sample >"$TRASH/svc.end"
store_kb >"$TRASH/store.end"

test_expect_success "every reader: $EPOCHS epochs, every byte checked, no error" '
	cat reader.*.err && test "$(cat readers.rc)" = 0 &&
	for r in 0 1 2 3; do
		test $(grep -c "^epoch=" reader.$r.log) = '$EPOCHS' || exit 1
		! grep -v "errors=0\$" reader.$r.log | grep . || exit 1
	done
'

test_expect_success 'the shim counted no read error on any node' '
	for n in 0 1 2 3; do test "$(stat_val $n read_errors)" = 0 || exit 1; done
'

# the figures, whatever happens
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
{
	echo "# soak: $N nodes, $EPOCHS epochs in $((t1 - t0)) s"
	for r in 0 1 2 3; do
		w=$(sed -n "${WARM}p" "$TRASH/reader.$r.log")
		e=$(tail -n 1 "$TRASH/reader.$r.log")
		files=$(awk '{split($2, a, "="); s += a[2]} END {printf "%.0f", s}' "$TRASH/reader.$r.log")
		bytes=$(awk '{split($3, a, "="); s += a[2]} END {printf "%.0f", s}' "$TRASH/reader.$r.log")
		echo "# reader $r: $files files, $bytes bytes checked;" \
			"VmRSS $(echo "$w" | field rss_kb) -> $(echo "$e" | field rss_kb) KiB," \
			"RssAnon $(echo "$w" | field anon_kb) -> $(echo "$e" | field anon_kb) KiB," \
			"fds $(echo "$w" | field fds) -> $(echo "$e" | field fds)"
	done
	paste "$TRASH/svc.start" "$TRASH/svc.warm" "$TRASH/svc.end" |
	while read -r p r0 a0 f0 p1 r1 a1 f1 p2 r2 a2 f2; do
		echo "# service $p: VmRSS $r0 (start) $r1 (warm) -> $r2 KiB, RssAnon $a0 $a1 -> $a2 KiB," \
			"fds $f0 $f1 -> $f2 (readers gone)"
	done
	echo "# node stores: $(cat "$TRASH/store.warm") KiB after warm-up, $(cat "$TRASH/store.end") KiB at the end"
} | tee "$TRASH/figures"

test_expect_success 'readers: RssAnon at most 1 MiB above its warm-up value, descriptors constant' '
	for r in 0 1 2 3; do
		sed -n "'$WARM',\$p" reader.$r.log | sed "s/.* anon_kb=\([0-9]*\) fds=\([0-9]*\).*/\1 \2/" >rf.$r &&
		read -r b f <rf.$r &&
		awk -v b=$b -v f=$f "\$1 > b + 1024 || \$2 != f {bad = 1; print} END {exit bad}" rf.$r ||
			{ echo "reader $r (anon_kb fds)"; exit 1; }
	done
'

test_expect_success 'services: RssAnon at most 4 MiB above warm-up, no more descriptors than then' '
	paste svc.start svc.warm svc.end | while read -r p r0 a0 f0 p1 r1 a1 f1 p2 r2 a2 f2; do
		# (at start the first epoch caches may not be open yet: compare
		# with the warm-up, which also counts the connections of the readers)
		test -n "$a2" && test $a2 -le $((a1 + 4096)) && test $f2 -le $f1 ||
			{ echo "service $p: anon $a1 -> $a2, fds $f0 (start) $f1 (warm) -> $f2"; exit 1; }
	done
'

test_expect_success 'node stores do not grow (retired epoch caches removed)' '
	test $(cat store.end) -le $(( $(cat store.warm) + 4096 ))
'
serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'
test_done
