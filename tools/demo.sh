#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# make demo: the main job end to end on the built-in sample dataset, on 4
# simulated nodes (mpiexec -n 4 --node-per-rank):
#   pack -> verify -> stage (R=1, val/ on every node) -> serve -> readers on
#   every node read 2 epochs through the shim by their lists -> summary ->
#   stop -> clean
# From the source tree (tools/demo.sh: build/bin/dstage, build/t/mksample),
# or installed by make install (PREFIX/share/dstage/demo.sh:
# PREFIX/bin/dstage, PREFIX/libexec/dstage/mksample), which a site runs to
# check an install with nothing from the source tree.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$top/tools/mpienv.sh" ]; then
	# the source tree: DSTAGE_MPILIB (make demo MPI=openmpi), the build and its mpiexec
	. "$top/tools/mpienv.sh"
	B="$ds_build/bin/dstage"
	MKSAMPLE="$ds_build/t/mksample"
else
	# installed (PREFIX/share/dstage/demo.sh): the launcher of the MPI the
	# installed dstage was built with
	B=$(cd "$top/../bin" && pwd)/dstage
	MKSAMPLE=$(cd "$top/../libexec/dstage" && pwd)/mksample
	ds_mpiexec=mpiexec.mpich
	if "$B" --version 2>/dev/null | grep -q "Open MPI"; then
		ds_mpiexec=mpiexec.openmpi
		export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
		if [ "$(id -u)" = 0 ]; then
			export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
		fi
	fi
fi
NODES=${DSTAGE_DEMO_NODES:-4}
work=$(mktemp -d "${TMPDIR:-/tmp}/dstage-demo.XXXXXX")
to=/dev/shm
job="demo$$"
mount="/dstage-demo-$$"
serve_pid=
cleanup() {
	if [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null; then
		"$B" stop --to "$to" --job "$job" >/dev/null 2>&1 || kill "$serve_pid" 2>/dev/null || :
		wait "$serve_pid" 2>/dev/null || :
	fi
	"$B" clean --to "$to" --job "$job" 2>/dev/null || :
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
step() { printf '\n== %s\n' "$*"; }

step "sample dataset: 4 classes x 32 training images, 4 validation images each"
"$MKSAMPLE" -c 4 -n 32 -v 4 "$work/src"
find "$work/src" -type f | wc -l | sed 's/^/files: /'

step "dstage pack -p 8 --replicate val (once, offline)"
"$B" pack -p 8 --replicate val "$work/src" "$work/pack"
"$B" verify "$work/pack" --against "$work/src"

step "dstage stage on $NODES simulated nodes (mpiexec -n $NODES --node-per-rank)"
$ds_mpiexec -n "$NODES" "$B" stage "$work/pack" --to "$to" --job "$job" --node-per-rank
"$B" status --to "$to" --job "$job"

if ! "$B" serve --help >/dev/null 2>&1; then
	echo "dstage demo: this build has no node service yet: stopping after stage-in"
	exit 0
fi

step "dstage serve on $NODES nodes (seed 7), readers on every node read 2 epochs"
$ds_mpiexec -n "$NODES" "$B" serve --to "$to" --job "$job" --node-per-rank --seed 7 &
serve_pid=$!
# every node's socket, within 120 s (a loaded machine starts ranks slowly);
# a service that exits or never comes up stops the demo with the reason
k=0
while [ "$(ls "$to/dstage.$(id -u).$job"/*/sock 2>/dev/null | wc -l)" -lt "$NODES" ]; do
	if ! kill -0 "$serve_pid" 2>/dev/null; then
		echo "dstage demo: the service exited before every node was up" >&2
		exit 1
	fi
	if [ $k -ge 600 ]; then
		echo "dstage demo: the service is not up on $NODES nodes after 120 s" >&2
		exit 1
	fi
	sleep 0.2
	k=$((k + 1))
done
bad=0
for epoch in 0 1; do
	node=0
	while [ $node -lt "$NODES" ]; do
		env_lines=$("$B" env --to "$to" --job "$job" --node $node --mount "$mount")
		list="$work/list.$epoch.$node"
		# the reader's list comes through the shim, like any file
		( eval "$env_lines"; cat "$mount/.dstage/epochs/$epoch/all" ) >"$list"
		got=$( ( eval "$env_lines"; sed "s|^|$mount/|" "$list" | xargs -d '\n' cat ) | sha256sum)
		want=$(sed "s|^|$work/src/|" "$list" | xargs -d '\n' cat | sha256sum)
		if [ "$got" = "$want" ]; then s=ok; else s=MISMATCH; bad=1; fi
		printf 'epoch %d node %d: %4d files read through the shim, bytes %s\n' \
			"$epoch" "$node" "$(wc -l <"$list")" "$s"
		node=$((node + 1))
	done
	# the training samples: every file outside the replicated val/
	( cd "$work/src" && find . -type f ! -path "./val/*" | sed 's|^\./||' | sort ) >"$work/samples"
	cat "$work"/list.$epoch.* | sort -u >"$work/all.$epoch"
	n=$(wc -l <"$work/samples")
	total=$(cat "$work"/list.$epoch.* | wc -l)
	if cmp -s "$work/all.$epoch" "$work/samples"; then
		echo "epoch $epoch: the $NODES lists cover all $n training samples ($((total - n)) repeated to pad equal shares)"
	else
		echo "epoch $epoch: the lists do NOT cover the training samples"
		bad=1
	fi
	if [ $epoch = 1 ] && cmp -s "$work/list.0.0" "$work/list.1.0"; then
		echo "epoch 1: node 0 got the same list as in epoch 0: no shuffle"
		bad=1
	fi
done

step "summary (dstage status)"
"$B" status --to "$to" --job "$job"
"$B" stop --to "$to" --job "$job"
wait "$serve_pid"
serve_pid=
[ $bad = 0 ] && echo "demo: all bytes checked against the source: ok"
exit $bad
