#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# pack's options: -p / -S partitioning, --replicate, --files-from, --exclude,
# --progress, -q; and the partition layout they promise.
. "$(dirname "$0")/test-lib.sh"

TOOL="$T/h5-packtool"

# the partition count of pack $1, as h5dump sees it
nparts() {
	h5dump -a /nparts "$1/index.h5" | sed -n "s/^ *(0): //p"
}

test_expect_success 'setup: train/ (two classes) and val/' '
	for c in cat dog; do
		mkdir -p src/train/$c &&
		i=0 && while [ $i -lt 30 ]; do
			head -c $((1000 + i * 100)) /dev/zero | tr "\0" x >src/train/$c/$i.jpg && i=$((i + 1)) || exit 1
		done
	done &&
	mkdir -p src/val src/tmp &&
	echo v1 >src/val/a && echo v2 >src/val/b &&
	echo junk >src/tmp/x.swp && echo junk >src/train/cat/.DS_Store
'

test_expect_success '-p N gives N partitions' '
	$DSTAGE pack -q -p 4 src p4 && test "$(nparts p4)" = 4 &&
	ls p4 >l && test "$(grep -c "^part-0000[0-3].h5$" l)" = 4 &&
	$DSTAGE verify -q --against src p4
'

test_expect_success '-p larger than the file count: one file per partition' '
	mkdir few && echo 1 >few/a && echo 2 >few/b &&
	$DSTAGE pack -q -p 9 few p9 && test "$(nparts p9)" = 2
'

test_expect_success '-S SIZE: partitions of about SIZE' '
	$DSTAGE pack -q -S 20KiB src s20 &&
	n=$(nparts s20) && test $n = 8 &&
	for f in s20/part-*.h5; do
		set -- $("$TOOL" payload-offset $f) && test $2 -le 30000 || exit 1
	done
'

test_expect_success 'partitions hold contiguous runs of files in path order' '
	$DSTAGE pack -q -p 2 src runs &&
	$DSTAGE ls runs train/cat >cat && $DSTAGE ls runs train/dog >dog &&
	test $(wc -l <cat) = 32 && test $(wc -l <dog) = 31
'

test_expect_success '--replicate: own partitions, flagged' '
	$DSTAGE pack -q -p 2 --replicate val --replicate ./train/dog/3.jpg src rep &&
	test "$(nparts rep)" = 3 &&
	h5dump -d /partitions rep/index.h5 >p &&
	tr -d " \n" <p | grep -o "(2):{[0-9]*,[0-9]*,[0-9]*}" >last &&
	test_grep "(2):{[0-9]*,3,1}" last &&
	$DSTAGE verify -q --against src rep
'

test_expect_success '--replicate of a path not in the tree: exit 1' '
	! $DSTAGE pack --replicate nope src repx 2>err &&
	test_grep "dstage: pack: .nope.: --replicate path not in the packed tree" err &&
	! test -e repx
'

test_expect_success '--exclude by name and by path' '
	$DSTAGE pack -q --exclude "*.swp" --exclude ".DS_Store" --exclude "train/dog" src ex &&
	$DSTAGE ls ex >l &&
	! test_grep -q -e swp -e DS_Store -e "train/dog" l &&
	test_grep "^tmp/$" l && test_grep "^train/cat/0.jpg$" l
'

test_expect_success '--files-from packs exactly the list, with its parents' '
	printf "%s\n" ./train/cat/1.jpg val/a "" train/cat/1.jpg val/ >list &&
	$DSTAGE pack -q --files-from list src ff &&
	$DSTAGE ls ff >l &&
	printf "%s\n" train/ train/cat/ train/cat/1.jpg val/ val/a >want &&
	test_cmp want l &&
	$DSTAGE verify -q --against src ff
'

test_expect_success '--files-from - reads stdin; --exclude applies to it' '
	printf "%s\n" val/a val/b tmp/x.swp | $DSTAGE pack -q --exclude "*.swp" --files-from - src ffs &&
	$DSTAGE ls ffs >l && printf "%s\n" val/ val/a val/b >want && test_cmp want l
'

test_expect_success 'the summary line, and -q without it' '
	$DSTAGE pack -p 3 src sum >out &&
	test_grep "^packed 64 files, 5 dirs, 0 symlinks into 3 partitions: .* in, .* stored (ratio 1.000), .* s, .*/s$" out &&
	$DSTAGE pack -q src quiet >out 2>err && test ! -s out && test ! -s err
'

test_expect_success '--progress prints progress lines' '
	$DSTAGE pack --progress 0.000001 src prog >/dev/null 2>err &&
	test_grep "dstage: pack: scanning: [0-9]* entries" err &&
	test_grep "dstage: pack: [0-9]*/64 files, .*/.*, .*/s" err
'

test_expect_success 'ls -l of replicated and zlib packs still lists everything' '
	$DSTAGE pack -q -z zlib:1 --replicate val src z1 &&
	$DSTAGE ls z1 | wc -l >n && echo 69 >want && test_cmp want n
'

test_done
