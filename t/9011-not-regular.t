#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A FIFO, a directory, a device or a socket in place of index.h5 or of a
# partition: verify, ls, cat and stage refuse it at once, naming the file,
# exit 1 (before, opening a FIFO for reading hung them for ever).
. "$(dirname "$0")/test-lib.sh"

uid=$(id -u)
# every command runs under a timeout: a hang is a failure, not a stuck test
T10="timeout -k 2 20"

test_expect_success 'set up' '
	"$T/mksample" -c 2 -n 6 src >/dev/null && "$DSTAGE" pack -q -p 2 src pack &&
	(cd src && find . -type f | sed "s|^\./||") >files && test -s files
'

# plant KIND FILE: a copy of the pack with FILE replaced by a KIND
plant() {
	rm -rf bad && cp -r pack bad && rm -f "bad/$2" &&
	case $1 in
	fifo) mkfifo "bad/$2" ;;
	dir) mkdir "bad/$2" ;;
	device) ln -s /dev/zero "bad/$2" ;;
	socket) "$PY" -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "bad/$2" ;;
	esac
}

for kind in fifo dir device socket; do
	for file in index.h5 part-00001.h5; do
		test_expect_success "$kind as $file: verify and ls refuse it, naming it" '
			plant '$kind' '$file' &&
			test_status --show err 1 $T10 "$DSTAGE" verify bad >/dev/null 2>err &&
			grep -q "bad/'$file'.: not a regular file" err &&
			rc=0 && { $T10 "$DSTAGE" ls bad >/dev/null 2>err || rc=$?; } && cat err &&
			if test '$file' = index.h5; then
				test $rc = 1 && grep -q "bad/'$file'.: not a regular file" err
			else
				test $rc = 0 # ls reads the manifest only
			fi
		'
		test_expect_success "$kind as $file: cat of every file: the bytes, or refused naming it" '
			plant '$kind' '$file' && refused=0 &&
			while read -r f; do
				rc=0 && $T10 "$DSTAGE" cat bad "$f" >got 2>err || rc=$?
				if test $rc = 0; then cmp got "src/$f" || exit 1
				else test $rc = 1 && grep -q "bad/'$file'.: not a regular file" err ||
					{ cat err; exit 1; }; refused=$((refused + 1)); fi
			done <files &&
			echo "$refused refused" && test $refused -gt 0
		'
		test_expect_success "$kind as $file: stage refuses it on every rank, no store" '
			plant '$kind' '$file' &&
			! mpirun_n 2 "$DSTAGE" stage bad --to "$SHM" --job '$kind' --node-per-rank 2>err &&
			cat err && test_grep "bad/'$file'.: not a regular file" err &&
			! test -e "$SHM/dstage.$uid.'$kind'"
		'
	done
done
test_done
