#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Sizes: a file over 4 GiB (sparse), a directory of 100k entries, paths up
# to PATH_MAX; and the virtual epoch lists under .dstage.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a sparse file over 4 GiB, 100k entries, deep path' '
	mkdir -p src/huge src/many src/deep &&
	truncate -s $(( (4 << 30) + (1 << 20) )) src/huge/f &&
	printf "beyond4g" | dd of=src/huge/f bs=1 seek=$((4 * 1024 * 1024 * 1024 + 12345)) conv=notrunc status=none &&
	printf "end" | dd of=src/huge/f bs=1 seek=$(( (4 << 30) + (1 << 20) - 3 )) conv=notrunc status=none &&
	(cd src/many && seq -f "f%06g" 1 100000 | xargs touch) &&
	d=src/deep && c=$(printf "%0200d" 0) &&
	for i in $(seq 1 19); do d=$d/$c; done && mkdir -p "$d" && printf deep >"$d/leaf" &&
	touch -d @0 src &&
	stage_tree "$TRASH/src" -N 1 -p 2
'

test_expect_success 'a file over 4 GiB: size, pread beyond 4 GiB, SEEK_END' '
	shim "$PY" -c "
import os, sys
p = sys.argv[1] + \"/huge/f\"
assert os.stat(p).st_size == (4 << 30) + (1 << 20)
fd = os.open(p, os.O_RDONLY)
assert os.pread(fd, 8, (4 << 30) + 12345) == b\"beyond4g\"
assert os.lseek(fd, -3, 2) == (4 << 30) + (1 << 20) - 3 and os.read(fd, 10) == b\"end\"
assert os.pread(fd, 4, 1 << 32) == bytes(4)
" "$MOUNT"
'

test_expect_success 'a directory of 100k entries: ls, find, os.scandir' '
	test $(shim ls "$MOUNT/many" | wc -l) = 100000 &&
	shim ls -f "$MOUNT/many" | sort >s && ls -f src/many | sort >n && test_cmp n s &&
	test $(shim "$PY" -c "import os,sys; print(sum(1 for e in os.scandir(sys.argv[1]) if e.is_file()))" "$MOUNT/many") = 100000
'

test_expect_success 'paths up to PATH_MAX; longer ones are ENAMETOOLONG' '
	leaf=$(cd src && find deep -name leaf) &&
	test ${#leaf} -gt 3800 &&
	test "$(shim cat "$MOUNT/$leaf")" = deep &&
	shim "$T/shim-io" access "$MOUNT/$leaf/$(printf "%0300d" 0)" F_OK >out &&
	grep -q ENAMETOOLONG out &&
	shim "$T/shim-io" access "$MOUNT/many/$(printf "%0256d" 0)" F_OK >out &&
	grep -q ENAMETOOLONG out
'

test_expect_success 'epoch lists: this node share, reader slices, a permutation over nodes' '
	rm -rf src2 && mkdir -p src2/train src2/val &&
	for i in $(seq 1 40); do echo $i >src2/train/s$i || exit 1; done && echo v >src2/val/v &&
	rm -rf "$JOBDIR" && "$T/mkstore" -N 2 -p 4 --replicate val src2 "$SHM" >/dev/null &&
	NODE=0 shim cat "$MOUNT/.dstage/epochs/3/all" >e0 &&
	NODE=1 shim cat "$MOUNT/.dstage/epochs/3/all" >e1 &&
	test $(wc -l <e0) = 20 && test $(wc -l <e1) = 20 &&
	sort e0 e1 | uniq -d >dup && test_cmp /dev/null dup &&
	(cd src2 && find train -type f | sort) >all && sort e0 e1 >got && test_cmp all got &&
	NODE=0 shim cat "$MOUNT/.dstage/epochs/3/0-of-2" "$MOUNT/.dstage/epochs/3/1-of-2" | sort >r &&
	sort e0 >e0s && test_cmp e0s r &&
	NODE=0 shim cat "$MOUNT/.dstage/epochs/4/all" >e4 && ! test_cmp e0 e4 >/dev/null &&
	shim "$T/shim-io" open "$MOUNT/.dstage/epochs/3/all" wronly >out && grep -q EROFS out &&
	shim "$T/shim-io" open "$MOUNT/.dstage/epochs/3/2-of-2" rdonly >out && grep -q ENOENT out &&
	test "$(NODE=0 shim stat -c %s "$MOUNT/.dstage/epochs/3/all")" = $(wc -c <e0)
'

test_done
