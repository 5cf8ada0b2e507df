#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Hostile packs through dstage verify, ls and cat.  t/helpers/hard-pack.py
# writes each crafted pack with h5py as whole, valid HDF5 files with a valid
# seal (its CRCs recomputed), so only dstage's semantic checks can stop them:
# unsafe names (.., absolute, NUL, newline, not UTF-8, too long), symlinks
# leaving the tree, duplicates, a directory claiming to be a file and the
# reverse, devices, overlapping files, offsets and sizes past the payload or
# wrapping, zlib bombs and lies, huge counts, a reused string pool,
# partitions that disagree with the manifest.  Then the same for truncated
# files and random bit flips, raw and resealed.
#
# Each command exits 1 with a "dstage: CMD: ..." message (never a crash, a
# hang or exit 2), and nothing is written outside its output.  With a
# sanitizer build (make SANITIZE=address,undefined O=build-asan, done by
# `make fuzz`) the same runs go through it as well.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hard.sh"
# what a name that escapes would make: this script's own (helpers/hard-pack.py)
export DSTAGE_TEST_PWNED=dstage-pwned.$test_name.$$

CRAFT="$PY $SRCDIR/t/helpers/hard-pack.py"

# Once bugs, kept as named tests: ds__target_check() counted a link's depth
# past its name in the string pool (escaping targets passed verify); the
# manifest reader (cat, stage) had no overlap check
ESCAPE="symlink-escape symlink-escape-indirect"
OVERLAP="overlap-whole overlap-partial"
# Not hostile: a pack of directories only (pack itself never writes one)
BENIGN="no-partitions"

in_list() {
	case " $2 " in *" $1 "*) return 0 ;; esac
	return 1
}

# run_all BIN: every crafted pack through verify, ls -l and cat with BIN;
# results in res.BIN-NAME: "NAME verify ls cat", first verify error in
# first.NAME
run_all() {
	bin=$1
	tag=$2
	: >"res.$tag"
	for m in $(cat mutations); do
		p=$(cat "all/$m.cat")
		timeout 60 "$bin" verify "all/$m" >"v.$tag.$m" 2>&1
		v=$?
		timeout 60 "$bin" ls -l "all/$m" >/dev/null 2>"l.$tag.$m"
		l=$?
		timeout 60 "$bin" cat "all/$m" "$p" >/dev/null 2>"c.$tag.$m"
		c=$?
		echo "$m $v $l $c" >>"res.$tag"
	done
}

# check_all TAG: the expectations on res.TAG
check_all() {
	tag=$1
	fail=0
	while read -r m v l c; do
		for rc in $v $l $c; do
			no_crash $rc || { echo "$m: a crash"; fail=1; }
			[ $rc -le 1 ] || { echo "$m: exit $rc"; fail=1; }
		done
		in_list $m "$BENIGN" && continue
		if [ $v != 1 ]; then
			echo "$m: verify exit $v"; cat "v.$tag.$m"; fail=1
		fi
		if [ $v = 1 ] && ! grep -q "^dstage: verify: " "v.$tag.$m"; then
			echo "$m: verify failed without a message"; fail=1
		fi
		# a manifest error: ls and cat refuse the pack too
		if head -n 1 "v.$tag.$m" | grep -q "^dstage: verify: '\''[^'\'']*index.h5'\''"; then
			[ $l = 1 ] && grep -q "^dstage: ls: " "l.$tag.$m" ||
				{ echo "$m: ls exit $l on a bad manifest"; fail=1; }
		fi
		if [ $c != 1 ] && ! in_list $m "part-table-disagrees"; then
			echo "$m: cat exit $c"; fail=1
		fi
		[ $c = 1 ] && ! grep -q "^dstage: cat: " "c.$tag.$m" &&
			{ echo "$m: cat failed without a message"; fail=1; }
	done <"res.$tag"
	return $fail
}

test_expect_success 'setup: a pack and every crafted variant of it' '
	make_hard_src src &&
	"$DSTAGE" pack -q -p 3 -z zlib --replicate val src pack &&
	$CRAFT pack same identity &&
	"$DSTAGE" verify -q same &&
	$CRAFT list >mutations && test $(wc -l <mutations) -ge 50 &&
	mkdir all && $CRAFT all pack all &&
	rm -rf "/tmp/$DSTAGE_TEST_PWNED" && touch marker
'

test_expect_success 'every crafted pack: verify, ls, cat exit 1 with a message, no crash' '
	run_all "$DSTAGE" plain && check_all plain
'

for m in $ESCAPE; do
	test_expect_success "verify refuses '$m'" "
		grep -q '^$m 1 ' res.plain
	"
done
for m in $OVERLAP; do
	test_expect_success "cat refuses '$m'" "
		grep -q '^$m [01] [01] 1\$' res.plain
	"
done

test_expect_success 'the messages name the problem' '
	test_grep "'\''\.\.'\'' path component" v.plain.dotdot &&
	test_grep "absolute name" v.plain.absolute &&
	test_grep "absolute symlink target" v.plain.symlink-absolute &&
	test_grep "duplicate" v.plain.duplicate-file &&
	test_grep "parent directory missing" v.plain.dir-claims-file &&
	test_grep "outside the partition payload" v.plain.offset-wraps &&
	test_grep "overlap" v.plain.overlap-whole &&
	test_grep "corrupt seal" v.plain.nentries-huge &&
	test_grep "string pool" v.plain.pool-reused &&
	test_grep "not valid UTF-8" v.plain.not-utf8 &&
	test_grep "top-level .\.dstage. is reserved" v.plain.dstage-top &&
	test_grep "top-level .\.dstage. is reserved" c.plain.dstage-top &&
	test_grep "corrupt stored data\|checksum mismatch" c.plain.zlib-bomb
'

test_expect_success 'cat never follows a symlink out of the pack' '
	for m in symlink-escape symlink-escape-indirect symlink-absolute; do
		! "$DSTAGE" cat all/$m classes >out 2>err && test_cmp /dev/null out || exit 1
	done
'

test_expect_success 'nothing was written outside the packs' '
	test ! -e "/tmp/$DSTAGE_TEST_PWNED" &&
	find . -newer marker -type f ! -name "*.plain*" ! -name "res.*" ! -name ".out" \
		! -name "*.asan*" ! -name out ! -name err ! -name new >new && test_cmp /dev/null new
'

# ---- raw damage: truncation and flips ------------------------------------------
test_expect_success 'truncated index.h5 and partitions: exit 1, named' '
	for f in index.h5 part-00000.h5 part-00002.h5; do
		size=$(stat -c %s pack/$f) &&
		for len in 0 1 127 128 4095 4096 4097 $((size / 2)) $((size - 1)); do
			rm -rf t && cp -r pack t && truncate -s $len t/$f || exit 1
			test_status 1 timeout 60 "$DSTAGE" verify t >out 2>&1 && test_grep -q "$f" out || { echo "$f at $len"; exit 1; }
			rc=0 && timeout 60 "$DSTAGE" cat t docs/seq.txt >/dev/null 2>&1 || rc=$?
			no_crash $rc && test $rc -le 1 || { echo "cat: $f at $len"; exit 1; }
		done
	done
'

test_expect_success 'bit flips after the user block, seal not updated: the seal catches them' '
	for f in index.h5 part-00000.h5; do
		for s in $(seq 1 15); do
			rm -rf t && cp -r pack t && $CRAFT flip t/$f $s 3 || exit 1
			# a flip inside the payload is caught by the file CRCs instead
			test_status 1 timeout 60 "$DSTAGE" verify t >out 2>&1 && test_grep -q "checksum mismatch\|corrupt" out ||
				{ echo "$f seed $s"; cat out; exit 1; }
		done
	done
'

test_expect_success 'bit flips, resealed: no crash, no hang, never a wrong byte from cat' '
	for f in index.h5 part-00000.h5; do
		for s in $(seq 1 15); do
			rm -rf t && cp -r pack t && $CRAFT flip t/$f $s 4 && $CRAFT reseal t/$f || exit 1
			rc=0 && timeout 60 "$DSTAGE" verify t >out 2>&1 || rc=$?
			no_crash $rc && test $rc -le 1 || { echo "verify: $f seed $s"; exit 1; }
			rc=0 && timeout 60 "$DSTAGE" ls -l t >/dev/null 2>&1 || rc=$?
			no_crash $rc && test $rc -le 1 || { echo "ls: $f seed $s"; exit 1; }
			for p in docs/seq.txt README; do
				rc=0 && timeout 60 "$DSTAGE" cat t $p >out 2>/dev/null || rc=$?
				no_crash $rc && test $rc -le 1 || { echo "cat: $f seed $s"; exit 1; }
				if [ $rc = 0 ]; then cmp -s out src/$p ||
					{ echo "cat $p: wrong bytes ($f seed $s)"; exit 1; }; fi
			done
		done
	done
'

test_expect_success ASAN 'the crafted packs under ASan/UBSan (build-asan)' '
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1 \
		run_all "$ASAN_DSTAGE" asan &&
	check_all asan &&
	! grep -l "ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer" [vlc].asan.* 2>/dev/null |
		grep . || { cat $(grep -l "Sanitizer\|runtime error" [vlc].asan.* | head -3); false; }
'
test_done
