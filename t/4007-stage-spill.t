#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The spill tier (stage --spill DIR): what does not fit the RAM room of
# --to lands in DIR, whole partitions, the replicated ones kept in RAM
# first; the RAM part stays within the room (DSTAGE_RAM_ROOM, the test
# knob that stands for the job's memory budget); every byte reads right
# through the shim, locally, from other nodes' spill tiers through the
# service's window and through the epoch cache; status shows both tiers;
# the job-directory contract (0700, 0600, nothing half-written, clean)
# holds in DIR as well.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

uid=$(id -u)
SP="$TRASH/spill"
SPJ="$SP/dstage.$uid.$JOB"
ROOM=1572864 # 1.5 MiB: the index and 1 MiB of metadata allowance, then a little store

# rows of `dstage status` whose last column, spill bytes ("3.0 MiB"), is not 0
spilled_rows() { awk '/^[0-9]/ && $(NF - 1) != "0" { n++ } END { print n + 0 }' "$1"; }

test_expect_success 'setup: samples, three 1 MiB files, val replicated' '
	make_samples src 30 &&
	mkdir src/train/big && for i in 0 1 2; do
		head -c 1048576 /dev/urandom >src/train/big/f$i || exit 1
	done &&
	"$DSTAGE" pack -q -p 6 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort) >paths
'

test_expect_code 1 'DSTAGE_RAM_ROOM that is not a size fails the step' '
	DSTAGE_RAM_ROOM=lots mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --spill "$SP" --job k1 \
		--node-per-rank -q 2>err
'
test_expect_success '... said, nothing left' '
	test_grep "DSTAGE_RAM_ROOM .lots.: not a size" err &&
	test ! -e "$SHM/dstage.$uid.k1" && test ! -e "$SP/dstage.$uid.k1"
'

test_expect_code 2 '--spill must be absolute (usage, exit 2)' '
	mpirun_n 1 "$DSTAGE" stage pack --to "$SHM" --spill rel/dir --job u1 -q 2>err
'
test_expect_success '... said, nothing made' '
	test_grep "not an absolute path" err && test ! -e "$SHM/dstage.$uid.u1"
'

test_expect_success 'stage on 3 nodes with a small RAM room: exit 0, both tiers right' '
	DSTAGE_RAM_ROOM=$ROOM mpirun_n 3 "$DSTAGE" stage pack --to "$SHM" --spill "$SP" \
		--job "$JOB" --node-per-rank -q &&
	"$T/storecheck" "$JOBDIR" src >holders &&
	wc -l <paths >want && wc -l <holders >got && test_cmp want got &&
	ls "$SPJ" >spilled && test -s spilled
'

test_expect_success 'the RAM part of every node is within the room' '
	for k in 0 1 2; do
		ram=$(($(stat -c %s "$JOBDIR/$k/store") + $(stat -c %s "$JOBDIR/$k/index") +
			$(stat -c %s "$JOBDIR/$k/stats"))) &&
		echo "node $k: $ram bytes in RAM" &&
		test "$ram" -le $ROOM || exit 1
	done
'

test_expect_success 'the spill tier keeps the job-directory contract: 0700, 0600, no .partial' '
	test "$(stat -c %a "$SPJ")" = 700 &&
	for d in "$SPJ"/*; do
		test "$(stat -c %a "$d")" = 700 &&
		test "$(stat -c %a "$d/store")" = 600 || exit 1
	done &&
	! ls -d "$SPJ"/*.partial "$JOBDIR"/*.partial 2>/dev/null
'

test_expect_success 'val (replicated) on every node; status, service down, shows spilled nodes' '
	for k in 0 1 2; do
		shim_on $k cat "$MOUNT/val/labels.txt" >v$k && test_cmp src/val/labels.txt v$k || exit 1
	done &&
	"$DSTAGE" status --to "$SHM" --job "$JOB" >st && cat st &&
	spilled_rows st >n && test "$(cat n)" -ge 1
'

serve_start 3 --seed 7
test_expect_success 'served' 'serve_up 3'

for k in 0 1 2; do
	test_expect_success "node $k: every file through the shim, spilled and remote ones too" '
		(cd src && xargs -d "\n" sha256sum <../paths) >native &&
		shim_on '$k' sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <paths >staged &&
		test_cmp native staged
	'
done

test_expect_success 'epoch 1 in its order through the epoch cache: the same bytes' '
	shim_on 1 cat "$MOUNT/.dstage/epochs/1/all" >e1 && test -s e1 &&
	(cd src && xargs -d "\n" sha256sum <../e1) >native1 &&
	shim_on 1 sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <e1 >staged1 &&
	test_cmp native1 staged1
'

test_expect_success 'status shows RAM and spill bytes of every node while served' '
	"$DSTAGE" status --to "$SHM" --job "$JOB" >st2 && cat st2 &&
	test_grep "^node .* ram *spill$" st2 &&
	test $(grep -c "^[0-9]" st2) = 3 &&
	spilled_rows st2 >n2 && test "$(cat n2)" -ge 1 &&
	ls "$SPJ" | grep -cx "[0-9]*" >n2w && test_cmp n2w n2
'

serve_stop
test_expect_success 'the service stopped cleanly' 'test "$(cat serve.rc)" = 0'

test_expect_success 'a spill tier others can write is not trusted: the shim stays out, serve refuses' '
	k=$(ls "$SPJ" | head -1) && chmod 0777 "$SPJ/$k" &&
	! shim_on $k cat "$MOUNT/val/labels.txt" >got 2>err &&
	test_grep "No such file or directory" err &&
	! shim_on $k ls "$MOUNT" >got 2>err &&
	! timeout 60 mpiexec.mpich -n 3 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank \
		>serve2.log 2>&1 &&
	test_grep "not a spill directory of this user" serve2.log &&
	chmod 0700 "$SPJ/$k" &&
	shim_on $k cat "$MOUNT/val/labels.txt" >v && test_cmp src/val/labels.txt v
'

test_expect_success 'clean removes both tiers' '
	"$DSTAGE" clean --to "$SHM" --job "$JOB" &&
	test ! -e "$JOBDIR" && test ! -e "$SPJ"
'

test_expect_success 'dstage run --spill: stage, then serve; every file right through the shim' '
	DSTAGE_RAM_ROOM=$ROOM timeout -k 5 120 mpiexec.mpich -n 2 "$DSTAGE" run pack --to "$SHM" \
		--spill "$SP" --job "$JOB" --node-per-rank -q >run.log 2>&1 &
	echo $! >run.pid &&
	serve_up 2 && ls "$SPJ" | grep -qx "[0-9]*" &&
	(cd src && xargs -d "\n" sha256sum <../paths) >native &&
	shim_on 1 sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <paths >staged &&
	test_cmp native staged &&
	"$DSTAGE" stop --to "$SHM" --job "$JOB" && wait $(cat run.pid) &&
	"$DSTAGE" clean --to "$SHM" --job "$JOB" && test ! -e "$SPJ"
'

test_expect_code 1 '--spill the same directory as --to: refused' '
	DSTAGE_RAM_ROOM=$ROOM mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --spill "$SHM" \
		--job same --node-per-rank -q 2>err
'
test_expect_success '... said, nothing left' '
	test_grep "the same directory as --to" err && test ! -e "$SHM/dstage.$uid.same"
'

test_expect_code 1 'a write failing on one rank fails the step' '
	DSTAGE_RAM_ROOM=$ROOM DSTAGE_FAULT=stage.write:rank=1 mpirun_n 3 "$DSTAGE" stage pack \
		--to "$SHM" --spill "$SP" --job fw --node-per-rank -q 2>err
'
test_expect_success '... nothing half-written in either tier' '
	test ! -e "$SHM/dstage.$uid.fw" && test ! -e "$SP/dstage.$uid.fw"
'

test_expect_code 1 'a spill directory that cannot be made fails the step' '
	: >notadir &&
	DSTAGE_RAM_ROOM=$ROOM mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" \
		--spill "$TRASH/notadir/x" --job nd --node-per-rank -q 2>err
'
test_expect_success '... nothing left' 'cat err && test ! -e "$SHM/dstage.$uid.nd"'

test_expect_code 1 'a spill job directory planted as a symlink is refused' '
	mkdir -p elsewhere "$SP" && ln -s "$TRASH/elsewhere" "$SP/dstage.$uid.pl" &&
	DSTAGE_RAM_ROOM=$ROOM mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --spill "$SP" \
		--job pl --node-per-rank -q 2>err
'
test_expect_success '... said, nothing written through it, nothing left' '
	test_grep "not a directory of this user" err &&
	ls -A elsewhere >ls.out && test_cmp /dev/null ls.out &&
	test ! -e "$SHM/dstage.$uid.pl" && rm "$SP/dstage.$uid.pl"
'

test_expect_success '--force without --spill takes the old spill tier away' '
	DSTAGE_RAM_ROOM=$ROOM mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --spill "$SP" \
		--job fo --node-per-rank -q &&
	test -d "$SP/dstage.$uid.fo" &&
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --job fo --node-per-rank --force -q &&
	test ! -e "$SP/dstage.$uid.fo" &&
	"$T/storecheck" "$SHM/dstage.$uid.fo" src >h2 &&
	wc -l <paths >w && wc -l <h2 >g && test_cmp w g
'

test_expect_success 'a room that fits everything: no spill tier at all' '
	mpirun_n 2 "$DSTAGE" stage pack --to "$SHM" --spill "$SP" --job all --node-per-rank -q &&
	test ! -e "$SP/dstage.$uid.all" &&
	"$T/storecheck" "$SHM/dstage.$uid.all" src >h3 &&
	"$DSTAGE" clean --to "$SHM" --job all && test ! -e "$SP/dstage.$uid.all"
'

test_done
