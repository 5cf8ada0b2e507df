#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/e2e.sh: end to end (row 7): torchvision ImageFolder +
# DataLoader(num_workers=2, batch_size=32, shuffle) images/s, one epoch per
# run, through the shim vs the same tree on tmpfs vs squashfuse (remounted
# before each of its runs); with PIL decode (CenterCrop 224 + ToTensor) and
# with a raw-bytes loader (decode off: the I/O path alone).  One long-lived
# Python worker per peer (torch imported once), driven A B C A B C ...;
# medians of ROUNDS.  Needs /usr/bin/python3 with torch, torchvision, PIL.
#   sh bench/e2e.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import torch, torchvision, PIL' 2>/dev/null; then
	note "End to end: not measured: /usr/bin/python3 lacks torch, torchvision or PIL."
	say "no torch/torchvision/PIL under $PY: skipped"
	exit 0
fi
if [ $QUICK = 1 ]; then C=6 PER=50; else C=16 PER=125; fi
$PY "$top/bench/e2e.py" gen "$W/src" $C $PER
N=$((C * PER))
"$DSTAGE" pack -q --no-fsync -p 4 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" e2e 1 -q
ST=$(jobdir "$W/st" e2e)
MNT=$(mount_prefix)
cd "$W"
peers="tmpfs=$W/src shim=$MNT,LD_PRELOAD=$PRELOAD,DSTAGE_STORE=$ST,DSTAGE_NODE=0,DSTAGE_MOUNT=$MNT"
if have_squashfuse; then
	sq_make "$W/src" "$W/img" && sq_mount "$W/img" "$W/sq"
	printf 'fusermount -u %s 2>/dev/null || fusermount3 -u %s; squashfuse %s %s\n' "$W/sq" "$W/sq" "$W/img" "$W/sq" >"$W/squashfuse.remount"
	peers="$peers squashfuse=$W/sq"
fi
say "$N JPEGs ($(du -sm "$W/src" | cut -f1) MiB), $ROUNDS rounds"
# shellcheck disable=SC2086
$PY "$top/bench/e2e.py" drive "$ROUNDS" $peers >"$W/runs"
ips() { awk -v p="$1" -v m="$2" '$1 == p && $2 == m { print $3 / $4 }' "$W/runs" | median; }
: >"$RES/e2e.dat"
for m in decode raw; do
	t=$(ips tmpfs $m) s=$(ips shim $m) q=-
	have_squashfuse && q=$(ips squashfuse $m)
	echo "$m $t $s $q" >>"$RES/e2e.dat"
	case $m in
	decode) what="ImageFolder + DataLoader(num_workers=2), PIL decode" g=">= 0.95" ;;
	raw) what="ImageFolder + DataLoader(num_workers=2), raw bytes (decode off)" g=">= 0.95" ;;
	esac
	row "$what: shim vs tmpfs" "$(fmt_rate "$s" images)" "tmpfs $(fmt_rate "$t" images)" "$(ratio "$s" "$t")" "$g" ours
	row "$what: shim vs squashfuse" "$(fmt_rate "$s" images)" "squashfuse $(fmt_rate "$q" images)" "$(ratio "$s" "$q")" "-"
done
note "End to end: $N JPEGs of about 480x360 (~$(($(du -sk "$W/src" | cut -f1) / N)) KiB each) in $C classes; one epoch per run, batch 32, shuffle, 2 workers (fork), torch.set_num_threads(1); decode = PIL open + convert RGB + CenterCrop(224) + ToTensor; raw = open().read(). One Python process per peer imports torch once and runs the epochs it is told to, in turn with the others; squashfuse is remounted before each of its epochs. Medians of $ROUNDS rounds."
