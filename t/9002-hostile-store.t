#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hostile node stores: the shim maps NODEDIR/index without the full CRC and
# structure check (start-up speed), so a damaged index must still never crash
# a reader, read out of bounds, hang, or lead a name out of the store: a
# damaged entry is "not there" (ENOENT) or an I/O error (EIO), a damaged
# header makes the shim stay out of the way.  Every mutation of
# t/helpers/hard-index.c (bad magic, offsets and counts past the end, names
# without their NUL, ids out of range, bytes past the store, ...) and 60
# random multi-byte corruptions go through ls -laR, find, cat, the stat
# family and a Python reader that compares every byte it gets with the
# source.  The full check (what the service and `dstage status` rely on)
# rejects them, also when the damaged index is resealed with a valid CRC.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

READER="$SRCDIR/t/helpers/hard-reader.py"

# readers NAME [--strict]: the battery on the store in $JOBDIR; fails on a
# signal (exit >= 128), a timeout (124), or (python) wrong bytes or an
# unexpected errno
readers() {
	name=$1
	shift
	fail=0
	for cmd in "ls -laR $MOUNT" "find $MOUNT" "cat-all" "shim-stat" "reader"; do
		case $cmd in
		cat-all) (cd src && find . -type f | sed "s,^\.,$MOUNT," | sort |
			tr '\n' '\0' >"$TRASH/files0") &&
			shim timeout 30 xargs -0 cat <"$TRASH/files0" >/dev/null 2>&1 ;;
		shim-stat) shim timeout 30 "$T/shim-stat" "$MOUNT" <"$TRASH/paths" >/dev/null 2>&1 ;;
		reader) shim DSTAGE_TIMEOUT=1 timeout 60 "$PY" "$READER" "$MOUNT" src "$@" \
			>reader.out 2>&1 ;;
		*) shim timeout 30 $cmd >/dev/null 2>&1 ;;
		esac
		rc=$?
		# xargs reports a killed child as 125
		if [ $rc -ge 124 ] || { [ "$cmd" = reader ] && [ $rc != 0 ]; }; then
			echo "$name: '$cmd' exit $rc"
			[ "$cmd" = reader ] && cat reader.out
			fail=1
		fi
	done
	return $fail
}
shim() {
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE=0 \
		DSTAGE_TIMEOUT=1 "$@"
}

test_expect_success 'setup: a tree, a one-node store (raw) and its index' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 3 &&
	tree_paths "$TRASH/src" >"$TRASH/paths" &&
	cp "$JOBDIR/0/index" good.index &&
	"$T/hard-index" check good.index &&
	"$T/hard-index" list >mutations && test $(wc -l <mutations) -ge 50
'

test_expect_success 'the intact store reads back exactly (the battery itself is sound)' '
	readers intact --strict && test_grep "read-ok=" reader.out &&
	! grep -q "read-wrong\|EIO" reader.out
'

# One test per mutation: the readers survive, get no wrong bytes (--strict),
# and the full check rejects the damaged index as it is and resealed.
# Mutations that change only data the readers check anyway (a CRC, the
# codec claim) or nothing a reader relies on (the hash: lookups fail) are
# allowed past a resealed full check.
for m in $("$T/hard-index" list); do
	test_expect_success "damaged index: $m" '
		rc=0; "$T/hard-index" $m good.index bad.index || rc=$?;
		if [ $rc = 2 ]; then echo "# $m: does not apply to this tree" && exit 0; fi;
		test $rc = 0 && cp bad.index "$JOBDIR/0/index" &&
		readers $m --strict &&
		! "$T/hard-index" check bad.index >check.out &&
		"$T/hard-index" $m good.index sealed.index --reseal &&
		if "$T/hard-index" check sealed.index >check.out; then
			case $m in crc|zlib_lie|hash_full|store_size) ;;
			*) echo "resealed $m passes the full check"; exit 1 ;; esac
		fi
	'
done

test_expect_success 'a name that climbs out ("../../tmp/...") never becomes a real path' '
	rm -rf /tmp/dstage-escape &&
	"$T/hard-index" name_dotdot good.index "$JOBDIR/0/index" &&
	! shim "$PY" -c "
import os, sys
os.chdir(sys.argv[1] + \"/a/b/c\")
os.chdir(\"..\")
os.chdir(\"..\")
print(os.getcwd())" "$MOUNT" 2>err &&
	test_grep "Input/output error" err &&
	test ! -e /tmp/dstage-escape &&
	! find "$SHM" -name dstage-escape | grep .
'

test_expect_success 'the index builder refuses symlinks leaving the tree (behind the pack readers)' '
	"$T/hard-index" builder
'

test_expect_success '60 random corruptions (16 bytes each, resealed): no crash, no hang' '
	for s in $(seq 1 60); do
		"$T/hard-index" flip $s 16 good.index "$JOBDIR/0/index" --reseal &&
		readers flip$s || exit 1
	done
'

test_expect_success 'setup: the same tree stored zlib-compressed' '
	stage_tree "$TRASH/src" -N 1 -p 3 -z &&
	cp "$JOBDIR/0/index" goodz.index &&
	readers intact-z --strict
'

test_expect_success 'zlib store: every mutation, no crash, no wrong bytes' '
	for m in $("$T/hard-index" list); do
		rc=0; "$T/hard-index" $m goodz.index bad.index || rc=$?
		[ $rc = 2 ] && continue
		test $rc = 0 && cp bad.index "$JOBDIR/0/index" &&
		shim DSTAGE_TIMEOUT=1 timeout 60 "$PY" "$READER" "$MOUNT" src --strict \
			>reader.out 2>&1 || { echo "$m:"; cat reader.out; exit 1; }
	done
'

test_expect_success 'compressed files damaged in the store file: EIO, never wrong bytes' '
	mkdir zsrc && for i in $(seq 1 12); do seq $i $((i * 3000)) >zsrc/f$i.txt || exit 1; done &&
	rm -rf "$JOBDIR" && "$T/mkstore" -N 1 -p 2 -z zsrc "$SHM" >/dev/null &&
	size=$(stat -c %s "$JOBDIR/0/store") &&
	for off in 100 5000 $((size / 3)) $((size / 2)) $((size - 20)); do
		printf "\125\252" | dd of="$JOBDIR/0/store" bs=1 seek=$off conv=notrunc 2>/dev/null || exit 1
	done &&
	shim "$PY" "$READER" "$MOUNT" zsrc --strict >reader.out 2>&1 ||
		{ cat reader.out; false; } &&
	test_grep "EIO=" reader.out && test_grep "read-ok=" reader.out
'

test_expect_success 'a store file shorter than the index says: the shim stays correct' '
	stage_tree "$TRASH/src" -N 1 -p 3 &&
	truncate -s 4096 "$JOBDIR/0/store" &&
	readers short-store --strict
'

test_expect_success 'an index that is a directory, a FIFO, empty, or unreadable: no hang, not ours' '
	for kind in dir fifo empty; do
		rm -f "$JOBDIR/0/index" &&
		case $kind in
		dir) mkdir "$JOBDIR/0/index" ;;
		fifo) mkfifo "$JOBDIR/0/index" ;;
		empty) : >"$JOBDIR/0/index" ;;
		esac &&
		test_status 2 shim timeout 10 ls "$MOUNT" >out 2>&1 || { echo "$kind: ls"; cat out; exit 1; }
		rm -rf "$JOBDIR/0/index" || exit 1
	done
'
test_done
