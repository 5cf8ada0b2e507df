#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Readers treat a pack as untrusted: flipped bytes, truncated or missing
# files, and crafted manifests (a valid seal over bad content) all give a
# clear message and exit 1, never a crash or a read out of bounds.
. "$(dirname "$0")/test-lib.sh"

TOOL="$T/h5-packtool"
[ -x "$TOOL" ] || { echo "Bail out! $TOOL not built (run make)"; exit 1; }

expect_exit() {
	want=$1
	shift
	"$@"
	rc=$?
	[ "$rc" = "$want" ] || { echo "exit $rc, want $want: $*"; return 1; }
}

# every reader fails with exit 1 and says $2 about pack $1
readers_refuse() {
	expect_exit 1 $DSTAGE ls "$1" >/dev/null 2>err && test_grep -e "$2" err &&
	expect_exit 1 $DSTAGE verify "$1" >/dev/null 2>err && test_grep -e "$2" err &&
	expect_exit 1 $DSTAGE cat "$1" aa/bb >out 2>err && test_grep -e "$2" err &&
	test ! -s out &&
	expect_exit 1 "$TOOL" read-image "$1/index.h5" 2>err && test_grep -e "$2" err
}

# the string pool of the test pack: "aa" "aa/bb" "aa/cc" "zz" back to back
test_expect_success 'setup: a small pack of two partitions' '
	mkdir -p src/aa && seq 1 5000 >src/aa/bb && head -c 70000 /dev/urandom >src/aa/cc &&
	echo zz >src/zz &&
	$DSTAGE pack -q -p 2 src good && $DSTAGE verify -q good &&
	$DSTAGE pack -q -p 2 -z zlib src goodz &&
	"$TOOL" read-image good/index.h5 >n && test_grep "4 entries, 2 partitions" n
'

fresh() {
	rm -rf "$1" && cp -r "${2:-good}" "$1"
}

# ---- damage to the bytes -----------------------------------------------------
test_expect_success 'one flipped payload byte: verify and cat name the file' '
	fresh flip &&
	set -- $("$TOOL" payload-offset flip/part-00000.h5) &&
	"$TOOL" flip flip/part-00000.h5 $(($1 + 100)) &&
	expect_exit 1 $DSTAGE verify flip >v 2>err &&
	test_grep "dstage: verify: .aa/bb.: checksum mismatch (flip/part-00000.h5)" err &&
	test_grep "1 problem" v &&
	expect_exit 1 $DSTAGE cat flip aa/bb >out 2>err &&
	test_grep "dstage: cat: .aa/bb.: checksum mismatch" err &&
	test ! -s out &&
	$DSTAGE cat flip zz >z && cmp z src/zz
'

test_expect_success 'one flipped byte of a zlib stream: verify and cat fail' '
	fresh flipz goodz &&
	set -- $("$TOOL" payload-offset flipz/part-00000.h5) &&
	"$TOOL" flip flipz/part-00000.h5 $(($1 + 50)) &&
	expect_exit 1 $DSTAGE verify flipz 2>err &&
	test_grep -e "aa/bb.: \(checksum mismatch\|corrupt stored data\)" err &&
	expect_exit 1 $DSTAGE cat flipz aa/bb >out 2>err &&
	test ! -s out
'

test_expect_success 'a flipped byte in index.h5: refused by the seal' '
	fresh flipix && "$TOOL" flip flipix/index.h5 5000 &&
	readers_refuse flipix "flipix/index.h5.: corrupt (checksum mismatch in its tables or HDF5 structure)"
'

test_expect_success 'a flipped byte in the seal' '
	fresh flipseal && "$TOOL" flip flipseal/index.h5 30 &&
	readers_refuse flipseal "corrupt header (checksum mismatch in the seal)"
'

test_expect_success 'a truncated index.h5' '
	fresh trunc && truncate -s 6000 trunc/index.h5 &&
	readers_refuse trunc "trunc/index.h5.: truncated: 6000 bytes, the seal says"
'

test_expect_success 'not a pack at all' '
	fresh notpack && cp /etc/hostname notpack/index.h5 &&
	expect_exit 1 $DSTAGE ls notpack 2>err && test_grep "truncated" err &&
	head -c 9000 /dev/zero >notpack/index.h5 &&
	expect_exit 1 $DSTAGE ls notpack 2>err && test_grep "not a dstage pack index file" err &&
	expect_exit 1 $DSTAGE ls nowhere 2>err && test_grep "nowhere/index.h5.: No such file" err
'

test_expect_success 'a truncated partition: named, the other one still checked' '
	fresh truncp && truncate -s 5000 truncp/part-00001.h5 &&
	expect_exit 1 $DSTAGE verify truncp >v 2>err &&
	test_grep "truncp/part-00001.h5.: truncated" err &&
	! test_grep "aa/bb" err &&
	$DSTAGE cat truncp aa/bb >b && cmp b src/aa/bb &&
	expect_exit 1 $DSTAGE cat truncp zz 2>err && test_grep "truncated" err
'

test_expect_success 'a missing partition' '
	fresh missing && rm missing/part-00000.h5 &&
	expect_exit 1 $DSTAGE verify missing 2>err &&
	test_grep "missing/part-00000.h5.: No such file or directory" err
'

test_expect_success 'a partition of another pack' '
	fresh mixed && cp goodz/part-00001.h5 mixed/ &&
	expect_exit 1 $DSTAGE verify mixed 2>err &&
	test_grep "mixed/part-00001.h5.: belongs to another pack" err
'

# ---- crafted manifests: the seal is valid, the content is not ---------------
crafted() {
	fresh "$1" && shift && name=$1 && shift &&
	"$TOOL" "$@" && "$TOOL" reseal "$name/index.h5"
}

test_expect_success 'a path with ".."' '
	crafted dotdot dotdot pool dotdot/index.h5 2 "../bb" &&
	readers_refuse dotdot "entry 1 (.\.\./bb.): .\.\.. path component"
'

test_expect_success 'an absolute path' '
	crafted abs abs pool abs/index.h5 12 "/z" &&
	readers_refuse abs "entry 3 (./z.): absolute name"
'

test_expect_success 'a name that is not UTF-8 in the index' '
	crafted bad8 bad8 pool bad8/index.h5 13 "$(printf "\377")" &&
	readers_refuse bad8 "entry 3 (.z\\\\xff.): name is not valid UTF-8"
'

test_expect_success 'entries out of order (a duplicate)' '
	crafted dup dup set dup/index.h5 entries 3 path_off 7 &&
	readers_refuse dup "entries not sorted, or a duplicate"
'

test_expect_success 'an offset past the payload' '
	crafted past past set past/index.h5 entries 1 offset 1000000000000 &&
	readers_refuse past "entry 1 (.aa/bb.): stored bytes outside the partition payload"
'

test_expect_success 'an offset that overflows with its size' '
	crafted wrap wrap set wrap/index.h5 entries 1 offset 18446744073709551615 &&
	readers_refuse wrap "stored bytes outside the partition payload"
'

test_expect_success 'a path outside the string pool' '
	crafted pool pool set pool/index.h5 entries 2 path_len 4000000000 &&
	readers_refuse pool "entry 2: path outside the string pool"
'

test_expect_success 'huge counts and offsets in the seal' '
	fresh nparts && "$TOOL" seal-set nparts/index.h5 nparts 4000000000 &&
	readers_refuse nparts "corrupt seal (tables outside the file or counts out of range)" &&
	fresh nent && "$TOOL" seal-set nent/index.h5 nentries 1000000000000 &&
	readers_refuse nent "corrupt seal" &&
	fresh soff && "$TOOL" seal-set soff/index.h5 strings_off 18446744073709551615 &&
	readers_refuse soff "corrupt seal" &&
	fresh eoff && "$TOOL" seal-set eoff/index.h5 entries_off 100 &&
	readers_refuse eoff "corrupt seal"
'

test_expect_success 'a partition claiming 4 billion files' '
	crafted nfiles nfiles set nfiles/index.h5 partitions 0 nfiles 4294967295 &&
	readers_refuse nfiles "partition 0: 4294967295 files listed"
'

test_expect_success 'a partition number out of range' '
	crafted partno partno set partno/index.h5 entries 3 part 7 &&
	readers_refuse partno "entry 3 (.zz.): partition number out of range"
'

test_expect_success 'an unknown codec, unknown flags, a bad file type' '
	crafted codec codec set codec/index.h5 entries 3 codec 9 &&
	readers_refuse codec "unknown codec" &&
	crafted flags flags set flags/index.h5 entries 3 flags 128 &&
	readers_refuse flags "unknown flags" &&
	crafted fifo fifo set fifo/index.h5 entries 3 mode 4516 &&
	readers_refuse fifo "not a directory, file or symlink"
'

test_expect_success 'HDF5 attributes that disagree with the seal: verify says so' '
	crafted version version set-attr version/index.h5 version 2 &&
	$DSTAGE ls version >/dev/null &&
	expect_exit 1 $DSTAGE verify version 2>err &&
	test_grep "version/index.h5.: HDF5 attribute .version. differs from the seal" err &&
	crafted hnparts hnparts set-attr hnparts/part-00001.h5 nparts 4000000000 &&
	"$TOOL" reseal hnparts/part-00001.h5 &&
	expect_exit 1 $DSTAGE verify hnparts 2>err &&
	test_grep "hnparts/part-00001.h5.: HDF5 attribute .nparts. differs from the seal" err
'

test_expect_success 'HDF5 structure damaged behind a valid seal: only verify reads it' '
	fresh h5bad && "$TOOL" flip h5bad/index.h5 4096 && "$TOOL" reseal h5bad/index.h5 &&
	$DSTAGE ls h5bad >/dev/null &&
	expect_exit 1 $DSTAGE verify h5bad 2>err &&
	test_grep "h5bad/index.h5.: not readable as HDF5" err
'

test_expect_success 'a partition table that disagrees with index.h5' '
	fresh ptable && "$TOOL" set ptable/part-00000.h5 entries 0 crc 12345 &&
	"$TOOL" reseal ptable/part-00000.h5 &&
	expect_exit 1 $DSTAGE verify ptable 2>err &&
	test_grep "ptable/part-00000.h5.: its entries table differs from index.h5 at .aa/bb." err
'

test_expect_success 'a partition payload of the wrong size' '
	crafted psize psize set psize/index.h5 partitions 1 size 123456789 &&
	expect_exit 1 $DSTAGE verify psize 2>err &&
	test_grep "psize/part-00001.h5.: payload of .* bytes, the manifest says 123456789" err &&
	expect_exit 1 $DSTAGE cat psize zz 2>err && test_grep "the manifest says" err
'

test_expect_success 'overlapping files in a payload' '
	fresh overlap &&
	"$TOOL" set overlap/index.h5 entries 3 offset 10 && "$TOOL" reseal overlap/index.h5 &&
	expect_exit 1 $DSTAGE verify overlap 2>err &&
	test_grep "zz.: stored bytes overlap those of .aa/cc." err
'

test_done
