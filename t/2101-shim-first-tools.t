#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Issue 25's ordinary tools, each the first program to touch the mount in
# its process: readlink, readlink -f / -e, realpath and realpath
# --relative-to (a readlink was the first call: ENOENT for every staged
# path), getconf (pathconf: not handled at all), du and du -s (st_blocks
# as a native copy has them, on the source's file system and on the
# store's), and the mount root's mtime (it was 1970).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

test_expect_success 'setup: a tree, staged' '
	make_tree src &&
	touch_root src &&
	stage_tree src -N 1 &&
	SRC=$(cd src && pwd -P) && echo "$SRC" >srcdir
'
SRC=$(cat srcdir 2>/dev/null)

names='links/tofile links/chain links/todir links/self a/b/up a/x.txt a/b links/dangling links/loop1'

# run_both CMD ARGS-WITH-@: CMD on the source (@ = $SRC) and through the
# shim on the mount (@ = $MOUNT), output with the prefix back to @, then
# the exit status
run_both() {
	cmd=$1 && shift &&
	(eval "$cmd $(echo "$*" | sed "s|@|$SRC|g")" 2>&1; echo "exit $?") |
		sed "s|$SRC|@|g" >want &&
	(eval "shim $cmd $(echo "$*" | sed "s|@|$MOUNT|g")" 2>&1; echo "exit $?") |
		sed "s|$MOUNT|@|g" >got &&
	test_cmp want got
}

for n in $names; do
	test_expect_success "readlink, -f, -e, realpath as the first call: $n" '
		run_both readlink @/$n &&
		run_both "readlink -f" @/$n &&
		run_both "readlink -e" @/$n &&
		run_both realpath @/$n &&
		run_both "realpath -e" @/$n &&
		run_both "realpath --relative-to=@/a" @/$n
	'
done

test_expect_success 'the mount root, a missing name, relative names from above and inside' '
	run_both "readlink -e" @ &&
	run_both "readlink -f" @/ &&
	run_both "realpath -e" @/a/missing/x &&
	run_both "readlink -f" @/a/missing/x &&
	(cd "$SRC/.." && readlink -e "$(basename "$SRC")/links/chain" | sed "s|$SRC|@|") >want &&
	(cd "$(dirname "$MOUNT")" && shim readlink -e "$(basename "$MOUNT")/links/chain" |
		sed "s|$MOUNT|@|") >got &&
	test_cmp want got &&
	(cd "$SRC/a" && readlink -f ../links/chain | sed "s|$SRC|@|") >want &&
	shim sh -c "cd $MOUNT/a && readlink -f ../links/chain" | sed "s|$MOUNT|@|" >got &&
	test_cmp want got
'

pcvars='LINK_MAX MAX_CANON MAX_INPUT NAME_MAX PATH_MAX PIPE_BUF _POSIX_CHOWN_RESTRICTED
_POSIX_NO_TRUNC _POSIX_VDISABLE _POSIX_SYNC_IO _POSIX_ASYNC_IO _POSIX_PRIO_IO FILESIZEBITS
POSIX_REC_INCR_XFER_SIZE POSIX_REC_MAX_XFER_SIZE POSIX_REC_MIN_XFER_SIZE POSIX_REC_XFER_ALIGN
POSIX_ALLOC_SIZE_MIN SYMLINK_MAX POSIX2_SYMLINKS'

# the store is on /dev/shm: compare with a copy there
test_expect_success 'getconf (pathconf) of staged names: as on a copy on the store file system' '
	cp -a src "$SHM/native" &&
	for n in "" /a/x.txt /a/b /links/tofile /links/todir /a/missing; do
		for v in $pcvars; do
			{ getconf $v "$SHM/native$n" 2>&1 || echo "$v exit $?"; } |
				sed "s|$SHM/native|@|g" >>pc.want &&
			{ shim getconf $v "$MOUNT$n" 2>&1 || echo "$v exit $?"; } |
				sed "s|$MOUNT|@|g" >>pc.got || return 1
		done
	done &&
	grep -q "^255$" pc.got &&
	test_cmp pc.want pc.got
'

test_expect_success 'fpathconf of a staged descriptor: as on the copy' '
	"$PY" -c "
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print([os.fpathconf(fd, n) for n in sorted(os.pathconf_names) if n != \"PC_SOCK_MAXBUF\"])
" "$SHM/native/a/x.txt" >fpc.want &&
	shim "$PY" -c "
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print([os.fpathconf(fd, n) for n in sorted(os.pathconf_names) if n != \"PC_SOCK_MAXBUF\"])
" "$MOUNT/a/x.txt" >fpc.got &&
	test_cmp fpc.want fpc.got
'

# (du lists a directory in the order the file system gives: sorted here)
test_expect_success 'du, du -s, du -a agree with the source tree' '
	for o in "" -s -a -sh; do
		(cd "$SRC" && du $o .) | sort >du.want &&
		shim sh -c "cd $MOUNT && du $o ." | sort >du.got &&
		test_cmp du.want du.got || return 1
	done &&
	du -s "$SRC" | sed "s|$SRC|@|" >du.want &&
	shim du -s "$MOUNT" | sed "s|$MOUNT|@|" >du.got &&
	test_cmp du.want du.got
'

# tmpfs gives a directory no blocks; the mount root alone has 4 KiB (a pack
# records no entry for its root: docs/shim.md), so the total is 4 more
test_expect_success 'du, du -s agree with a copy on the store file system (tmpfs)' '
	touch_root "$SHM/native" &&
	stage_tree "$SHM/native" -N 1 &&
	for o in "" -s -a; do
		(cd "$SHM/native" && du $o .) |
			awk -F "\t" "\$2 == \".\" { \$1 += 4 } { print \$1 \"\t\" \$2 }" |
			sort >du.want &&
		shim sh -c "cd $MOUNT && du $o ." | sort >du.got &&
		test_cmp du.want du.got || return 1
	done
'

test_expect_success 'the mount root has the newest mtime of the dataset, not 1970' '
	mkdir -p t1/d &&
	echo a >t1/d/f && echo b >t1/g && ln -s g t1/l &&
	touch -h -d "2021-01-01 00:00:00" t1/l &&
	touch -d "2023-04-05 06:07:08.25" t1/d &&
	touch -d "2022-01-01 00:00:00" t1/d/f t1/g &&
	stage_tree t1 -N 1 &&
	shim stat -c "%.9Y" "$MOUNT" "$MOUNT/" "$MOUNT/.dstage" >mt &&
	want=$(date -d "2023-04-05 06:07:08.25" +%s).250000000 &&
	printf "%s\n" $want $want $want >mt.want &&
	test_cmp mt.want mt &&
	shim ls -ld --time-style=+%Y "$MOUNT" >ls.out &&
	test_grep " 2023 " ls.out
'

test_done
