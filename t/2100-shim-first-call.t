#!/bin/sh
# Every wrapped call as the first call of a process (issue 25): the shim
# starts lazily (io/init.c), and whichever wrapper a process calls first on
# a name under the mount must find the tree.  The list of calls is read from
# io/wrap.h, so a new wrapper is covered (or must be listed below with the
# reason it is not): each runs in a fresh process (t/helpers/shim-first.c),
# on a file, a directory, symlinks to both, the mount root and a missing
# name, once through the shim and once on the same tree bind-mounted
# read-only (a private mount namespace): results and errno must be the
# same.  The tree lives on the node store's file system (/dev/shm), so
# st_blocks and pathconf are compared with what that file system gives.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/helpers/shim-lib.sh"

# unshare -m as root, unshare -rm (a user namespace) otherwise
test_lazy_prereq ROBIND '
	mkdir -p a b && for u in "unshare -m" "unshare -rm"; do
		$u sh -c "mount --bind a b && mount -o remount,bind,ro b" 2>/dev/null &&
		echo "$u" >"$TRASH/unshare" && exit 0
	done; exit 1' "cannot bind-mount a tree read-only in a private mount namespace (unshare -m / -rm)"
test_require ROBIND

# Wrappers not called here, with the reason.  Everything else in io/wrap.h
# must be known to shim-first (--list).
not_called='
execve		exec of a staged program is the kernels: ENOENT by design (docs/shim.md); staged descriptors across exec: t/2096
execvpe		as execve
fexecve		as execve
execveat	as execve
pipe		takes no name and no staged descriptor: only hands out a fresh number (t/2095)
pipe2		as pipe
socket		as pipe
socketpair	as pipe
accept		as pipe
accept4		as pipe
eventfd		as pipe
memfd_create	as pipe
epoll_create1	as pipe
'

# the names io/wrap.h lists, one a line
sed -n 's/^[[:space:]]*X([^,]*,[[:space:]]*\([A-Za-z_0-9]*\),.*/\1/p' "$SRCDIR/io/wrap.h" >wrapped
printf '%s\n' "$not_called" | sed -n 's/^\([A-Za-z_0-9]*\)\t.*/\1/p' | sort >not-called

test_expect_success 'setup: a tree on the store file system, staged; its read-only twin' '
	test $(wc -l <wrapped) -gt 150 &&
	make_tree "$SHM/src" &&
	touch_root "$SHM/src" &&
	stage_tree "$SHM/src" -N 1 &&
	mkdir ro
'

test_expect_success 'every wrapper of io/wrap.h is called here or listed with a reason' '
	"$T/shim-first" --list | sort >known &&
	sort wrapped >w &&
	comm -23 w known | comm -23 - not-called >neither &&
	comm -13 w known >stale-known &&
	comm -13 w not-called >stale-listed &&
	comm -12 known not-called >both &&
	for f in neither stale-known stale-listed both; do
		test -s $f && { echo "$f:"; cat $f; }
	done
	! test -s neither && ! test -s stale-known && ! test -s stale-listed && ! test -s both
'

rels='"" a/x.txt a/b links/tofile links/todir a/missing'
test_expect_success 'each wrapper, first call of a fresh process: as on a read-only native copy' '
	comm -23 w not-called >calls &&
	cat >run.sh <<-EOF &&
	set -e
	mount --bind "$SHM/src" "$TRASH/ro"
	mount -o remount,bind,ro "$TRASH/ro"
	"$T/shim-first" --run "$TRASH/ro" $rels <calls >native.out
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE=0 \
		"$T/shim-first" --run "$MOUNT" $rels <calls >staged.out
	EOF
	$(cat "$TRASH/unshare") sh run.sh &&
	test $(wc -l <native.out) = $(( $(wc -l <calls) * 6 )) &&
	! grep -q "child status" native.out staged.out &&
	# the one difference by design: a pack records no entry for its root,
	# so the mount root is 4096 bytes (8 blocks) whatever the source said
	sed "/^[^ ]* '\'''\'': /{
		s/mode=40755 size=[0-9]* /mode=40755 size=4096 /g
		s/\(size=4096 nlink=[0-9]* uid=[0-9]* gid=[0-9]*\) blocks=[0-9]*/\1 blocks=8/g
	}" native.out >native.cmp &&
	diff -u native.cmp staged.out
'

test_expect_success 'the run covered each kind of name: file, directory, symlinks, root, missing' '
	grep -q "^readlink '\''links/tofile'\'': rc=10\"../a/x.txt\"" staged.out &&
	grep -q "^stat '\'''\'': rc=0 mode=40755" staged.out &&
	grep -q "^open '\''a/missing'\'': rc=-1 err=ENOENT" staged.out &&
	grep -q "^pathconf '\''a/b'\'': 0=" staged.out &&
	grep -q "^read '\''a/x.txt'\'': rc=6\"hello" staged.out
'

test_done
