#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every wrapped call as the first call of a process (issue 25): the shim
# starts lazily (io/init.c), and whichever wrapper a process calls first on
# a name under the mount must find the tree.  The list of calls is read from
# io/wrap.h and from the functions the library exports, so a new wrapper is
# covered (or must be listed below with the reason it is not): each runs in
# a fresh process (t/helpers/shim-first.c), on a file, a directory,
# symlinks to both, the mount root and a missing name, by absolute and by
# relative name (from the cwd and from a real directory descriptor), once through the shim and once on the same tree
# bind-mounted read-only (a private mount namespace): results and errno
# must be the same.  The tree lives on the node store's file system
# (/dev/shm), so st_blocks and pathconf are compared with what that file
# system gives.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

# unshare -m as root, unshare -rm (a user namespace) otherwise
test_lazy_prereq ROBIND '
	mkdir -p a b && for u in "unshare -m" "unshare -rm"; do
		$u sh -c "mount --bind a b && mount -o remount,bind,ro b" 2>/dev/null &&
		echo "$u" >"$TRASH/unshare" && exit 0
	done; exit 1' "cannot bind-mount a tree read-only in a private mount namespace (unshare -m / -rm)"
test_lazy_prereq NM 'command -v nm' "no nm (binutils) to list the library's exports"
test_require ROBIND NM

# Wrappers not called here, with the reason.  Everything else in io/wrap.h
# or exported by the library must be known to shim-first (--list).
not_called='
execve		exec of a staged program is the kernels: ENOENT by design (docs/shim.md); staged descriptors across exec: t/2096
execvpe		as execve
fexecve		as execve
execveat	as execve
execl		exported, not in io/wrap.h: builds the argument vector and calls the execve wrapper (as execve)
execle		as execl
execlp		as execl
execv		as execl
execvp		as execl
pipe		takes no name and no staged descriptor: only hands out a fresh number (t/2095)
pipe2		as pipe
socket		as pipe
socketpair	as pipe
accept		as pipe
accept4		as pipe
eventfd		as pipe
memfd_create	as pipe
epoll_create1	as pipe
vfork		exported, not in io/wrap.h: only notes that a child may share the shims memory (io/owner.c; t/2095, t/9006)
aio_read	on a staged descriptor only, which a first call can have only inherited (the shim then starts at init): t/2106
aio_read64	as aio_read
aio_write	as aio_read
aio_write64	as aio_read
aio_fsync	as aio_read
aio_fsync64	as aio_read
aio_cancel	as aio_read
aio_cancel64	as aio_read
lio_listio	as aio_read
lio_listio64	as aio_read
posix_spawn	takes no staged name: hands the processs staged descriptors to the child (t/2105)
posix_spawnp	as posix_spawn
system		as posix_spawn
popen		as posix_spawn
pclose		as posix_spawn
posix_spawn_file_actions_init		records a spawns actions: 0 natively and staged; the spawn is compared in t/2105
posix_spawn_file_actions_destroy	as posix_spawn_file_actions_init
posix_spawn_file_actions_adddup2	as posix_spawn_file_actions_init
posix_spawn_file_actions_addopen	as posix_spawn_file_actions_init
posix_spawn_file_actions_addchdir_np	as posix_spawn_file_actions_init
posix_spawn_file_actions_addfchdir_np	as posix_spawn_file_actions_init
__vfork		as vfork
clone		as vfork
_Fork		as vfork
ds_py_abi	the Python helpers entry points (io/pyapi.c, docs/shim.md), not a libc call: each starts the shim itself (ds__ensure_init); io/python calls them by ctypes: t/3020, t/3021, t/3022
ds_py_active	as ds_py_abi
ds_py_children	as ds_py_abi
ds_py_dir	as ds_py_abi
ds_py_entry_name	as ds_py_abi
ds_py_free	as ds_py_abi
ds_py_list	as ds_py_abi
ds_py_lookup	as ds_py_abi
ds_py_map	as ds_py_abi
ds_py_mount	as ds_py_abi
'

# the names io/wrap.h lists, and every function the library exports (a
# wrapper defined outside the list is a wrapper too), one a line
sed -n 's/^[[:space:]]*X([^,]*,[[:space:]]*\([A-Za-z_0-9]*\),.*/\1/p' "$SRCDIR/io/wrap.h" >wrapped
nm -D --defined-only "$PRELOAD" | awk '$2 == "T" || $2 == "W" || $2 == "i" { print $3 }' >exported
printf '%s\n' "$not_called" | sed -n 's/^\([A-Za-z_0-9]*\)\t.*/\1/p' | sort >not-called

test_expect_success 'setup: a tree on the store file system, staged; its read-only twin' '
	test $(wc -l <wrapped) -gt 150 && test $(wc -l <exported) -gt 150 &&
	make_tree "$SHM/src" &&
	touch_root "$SHM/src" &&
	stage_tree "$SHM/src" -N 1 &&
	mkdir ro
'

test_expect_success 'every wrapper (io/wrap.h, exports) is called here or listed with a reason' '
	"$T/shim-first" --list | sort >known &&
	sort -u wrapped exported >w &&
	comm -23 w known | comm -23 - not-called >neither &&
	comm -13 w known >stale-known &&
	comm -13 w not-called >stale-listed &&
	comm -12 known not-called >both &&
	for f in neither stale-known stale-listed both; do
		test ! -s $f || { echo "$f:" && cat $f; } || exit 1
	done &&
	! test -s neither && ! test -s stale-known && ! test -s stale-listed && ! test -s both
'

# run_first MODE OUT: every call in a fresh process on each name, natively
# on the read-only twin (OUT.native) and through the shim (OUT.staged);
# MODE --run (absolute names), --run-rel (relative to the mount's parent,
# from there: io/path.c's ds__rel_maybe) or --run-at (the same, and the
# *at calls on a real descriptor of that parent: ds__at_maybe_ours).  Then
# the comparison.
rels='"" a/x.txt a/b links/tofile links/todir a/missing'
run_first() {
	comm -23 w not-called >calls &&
	cat >run.sh <<-EOF &&
	set -e
	mount --bind "$SHM/src" "$TRASH/ro"
	mount -o remount,bind,ro "$TRASH/ro"
	"$T/shim-first" $1 "$TRASH/ro" $rels <calls >$2.native
	LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE=0 \
		"$T/shim-first" $1 "$MOUNT" $rels <calls >$2.staged
	EOF
	$(cat "$TRASH/unshare") sh run.sh &&
	test $(wc -l <$2.native) = $(( $(wc -l <calls) * 6 )) &&
	! grep "child status" $2.native $2.staged &&
	# the one difference by design: a pack records no entry for its root,
	# so the mount root is 4096 bytes (8 blocks) whatever the source said
	sed -f - $2.native >$2.want <<-\EOF &&
	/^[^ ]* '': /{
		s/mode=40755 size=[0-9]* /mode=40755 size=4096 /g
		s/\(size=4096 nlink=[0-9]* uid=[0-9]* gid=[0-9]*\) blocks=[0-9]*/\1 blocks=8/g
	}
	EOF
	diff -u $2.want $2.staged
}

test_expect_success 'each wrapper, first call of a fresh process: as on a read-only native copy' '
	run_first --run abs
'

test_expect_success 'the same by relative names from the mount parent: as natively' '
	run_first --run-rel rel
'

test_expect_success 'the same with the *at calls on a real descriptor of the mount parent' '
	run_first --run-at at
'

test_expect_success 'the runs covered each kind of name: file, directory, symlinks, root, missing' '
	for f in abs.staged rel.staged at.staged; do
		grep -q "^readlink '\''links/tofile'\'': rc=10\"../a/x.txt\"" $f &&
		grep -q "^stat '\'''\'': rc=0 mode=40755" $f &&
		grep -q "^open '\''a/missing'\'': rc=-1 err=ENOENT" $f &&
		grep -q "^pathconf '\''a/b'\'': 0=" $f &&
		grep -q "^read '\''a/x.txt'\'': rc=6\"hello" $f &&
		grep -q "^realpath '\''links/todir'\'': rc=ok \"@/a/b\"" $f || return 1
	done
'

test_done
