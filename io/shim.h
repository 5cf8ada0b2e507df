/* SPDX-License-Identifier: BSD-3-Clause */
/* shim.h: the inside of libdstage-preload.so (io/).  Not a public header.
 *
 * Include first in every io/ source file: the Makefile compiles everything with
 * _FILE_OFFSET_BITS=64, which makes glibc's headers rename open to open64,
 * stat to stat64 and so on; the shim must define both generations under
 * their own names, so it undoes that before any system header is read.
 *
 * The pieces:
 *   init.c    once-only start: real functions, environment, the mapped
 *             index, store and counters, fork handling
 *   path.c    "is this path ours" and resolution of a path to an entry
 *             (cwd, dirfd, symlinks, "..", the virtual .dstage tree)
 *   fdtab.c   the descriptor table and open-file objects
 *   fd.c      open, read, seek, dup, fcntl, mmap, close ...
 *   stat.c    stat family, statfs, access, readlink, xattrs
 *   cwd.c     chdir, fchdir, getcwd, realpath
 *   dir.c     directory streams
 *   stdio.c   FILE streams (fopencookie)
 *   rofs.c    every call that would change the tree: EROFS
 *   remote.c  bytes held by another node: epoch cache, node service
 *   epoch.c   the virtual epoch lists
 *   syscall.c syscall(2) for the file-system numbers emulated above
 *   dl.c      dlopen of staged objects through a private mirror
 *   exec.c    staged descriptors across exec (DSTAGE_FDS)
 *   offset.c  offsets shared across fork and exec
 *   fresh.c   other calls that hand out descriptor numbers
 *   procfd.c  /proc/self/fd/N and /dev/fd/N of staged descriptors
 *   write.c   write-once outputs under MOUNT/SUBDIR (dsout.h) */
#ifndef DS_SHIM_H
#define DS_SHIM_H

#undef _FILE_OFFSET_BITS

#include "dscommon.h"
#include "dsindex.h"
#include "dsproto.h"
#include "wrap.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DS__LIKELY(x) __builtin_expect(!!(x), 1)
#define DS__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- global state (init.c) ---------------------------------------------- */
/* Where the data a process writes while it names no staged path lives (its
 * start, fork and exit: ds__g, the init flags, the fork lock): in .data,
 * right after the GOT the dynamic loader writes anyway, so that such a
 * process copies one page of the shim's data, not seven (a page fault costs
 * ~4 us of a ~600 us fork + exec here).  .data is small; big, cold tables
 * stay in .bss. */
#define DS__HOT __attribute__((section(".data")))

struct ds__global {
	int active;             /* a node store is mapped: paths under mount are ours */
	char *mount;            /* normalised, no trailing '/' (strings in init.c) */
	size_t mlen;
	char *jobdir;           /* $DSTAGE_STORE */
	char *nodedir;          /* jobdir/<node> */
	uint32_t node;
	struct ds_index ix;
	const char *store;      /* this node's store, mapped read-only */
	size_t store_len;
	dev_t store_dev;        /* the identity of the file mapped (sread.c) */
	ino_t store_ino;
	size_t ram_len;         /* store[0, ram_len) is NODEDIR/store, the rest the
	                           spill tier's file (init.c, ds__spill_store) */
	dev_t spill_dev;        /* the identity of the spill file mapped */
	ino_t spill_ino;
	struct ds_stats *stats; /* NULL when there is no stats file */
	int timeout_ms;         /* bound on a remote read */
	int tmpl_fd;            /* O_PATH descriptor duplicated to reserve fds */
	dev_t tmpl_dev;         /* identity of the reservation (NODEDIR/reserved) */
	ino_t tmpl_ino;
	pid_t pid;              /* process that owns per-process state */
};
extern struct ds__global ds__g;
/* The spill tier's store file (SPILL/dstage.<uid>.<job>/<node>/store), when
 * the store spills (ds__g.ram_len < ds__g.store_len). */
extern char ds__spill_store[PATH_MAX];
/* 0 before init, 1 after; read on every call, written once. */
extern int ds__ready;
/* Per-thread recursion guard: set while the shim itself runs code that may
 * call wrapped functions (init, logging); wrappers then go straight to libc. */
extern __thread int ds__busy __attribute__((tls_model("initial-exec")));

void ds__init(void);
/* Lazy start: a process whose environment names a store maps it (index,
 * store, stats, descriptor table) only when it first names a path that may
 * be under the mount; until then ds__pending is 1 and ds__g.active 0.
 * ds__live: active or pending.  ds__activate: map it now if pending;
 * returns ds__g.active. */
extern int ds__pending;
static inline int ds__live(void)
{
	return __atomic_load_n(&ds__g.active, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&ds__pending, __ATOMIC_RELAXED);
}
int ds__activate(void);
static inline void ds__ensure_init(void)
{
	if (DS__UNLIKELY(!ds__ready) && !ds__busy)
		ds__init();
}

/* Relaxed counter update in the node's shared stats (no-op without). */
#define DS__COUNT(field, n)                                                              \
	do {                                                                             \
		if (ds__g.stats)                                                         \
			__atomic_fetch_add(&ds__g.stats->field, (n), __ATOMIC_RELAXED);  \
	} while (0)

/* Is p NULL?  Without telling the compiler: glibc declares most path
 * arguments nonnull, yet programs do pass NULL and expect EFAULT. */
static inline int ds__null(const void *p)
{
	const void *volatile q = p;
	return q == NULL;
}

/* Set errno and return -1 (or NULL): wrappers report errors the libc way. */
static inline int ds__fail(int err)
{
	errno = err;
	return -1;
}

/* ---- paths (path.c) ----------------------------------------------------- */
/* Emulated current directory: entry id inside the mount, or -1 when the real
 * (kernel) cwd is in force. */
extern _Atomic int64_t ds__cwd;
/* At start: a real cwd inside the shadow tree means an emulated cwd was
 * inherited across exec (cwd.c). */
void ds__cwd_inherit(void);
/* The shadow of staged directory id (cwd.c: empty, 0500), made if missing:
 * its real name in shadow.  0 or -errno. */
int ds__cwd_shadow(int64_t id, char *shadow, size_t size);

/* Virtual entries (the .dstage tree) carry ids above every real entry. */
enum ds__virt {
	DS__V_NONE = 0,
	DS__V_ROOT,   /* .dstage */
	DS__V_EPOCHS, /* .dstage/epochs */
	DS__V_EPOCH,  /* .dstage/epochs/<e> */
	DS__V_LIST,   /* .dstage/epochs/<e>/all or <l>-of-<n> */
};
struct ds__vent {
	enum ds__virt kind;
	uint64_t epoch;
	uint32_t l, n; /* n == 0: "all" */
};

/* The result of resolving a path. */
struct ds__res {
	int ours;             /* 1: id/virt name an entry of ours */
	int64_t id;           /* entry id (ours, not virtual) */
	struct ds__vent v;    /* virtual entry when v.kind != DS__V_NONE */
	/* not ours: what to hand to libc instead */
	int rdirfd;           /* the caller's dirfd, or AT_FDCWD with a rewritten path */
	const char *rpath;    /* the caller's path or buf */
	int out;              /* not ours: a name in the outputs (write.c), rpath in AREA/ns */
	const char *orel;     /* out: the name relative to the outputs root (in buf) */
	char buf[PATH_MAX];
};

/* Fast test done first by every path wrapper: can this path possibly be
 * ours?  No system call, no allocation; false for almost every path outside
 * the prefix after two byte compares. */
int ds__maybe_ours(const char *path);
/* Could a relative path from real directory dirfd (or the real cwd,
 * AT_FDCWD) lead into the mount?  Cheap; false for almost every path. */
int ds__rel_maybe(int dirfd, const char *path);
/* The real cwd changed (chdir, fchdir): forget the cached one. */
void ds__rcwd_invalidate(void);
/* Resolve path (relative to dirfd, AT_FDCWD or a staged directory) to an
 * entry.  follow: follow a symlink in the last component.  Returns 0 (see
 * r->ours), or -errno for a path of ours that does not resolve. */
#define DS__RES_FOLLOW 1
#define DS__RES_PARENT 2 /* the last component need not exist: r->id = its parent (rofs) */
int ds__resolve(int dirfd, const char *path, int flags, struct ds__res *r);
/* The path of entry id relative to the mount ("" for the root). */
/* Entry id's relative path, built into buf (PATH_MAX bytes): for messages
 * and for names that become real paths. */
static inline const char *ds__ename(int64_t id, char *buf)
{
	ds_ix_path(&ds__g.ix, (uint32_t)id, buf, PATH_MAX);
	return buf;
}
/* Absolute name under the mount of entry id into buf; -ERANGE if too small,
 * else the length. */
int ds__abs_name(int64_t id, const struct ds__vent *v, char *buf, size_t size);

/* ---- write-once outputs (write.c) ----------------------------------------- */
/* The outputs are on (NODEDIR/outputs.conf) and (c, cl) is their top-level
 * name. */
int ds__out_match(const char *c, size_t cl);
/* The walk entered the outputs: the rest of *pp into r (0), or 1 when a ".."
 * climbed back to the mount root (*pp moved past it), or -errno. */
int ds__out_walk(char **pp, struct ds__res *r);
/* dirfd/cwd is a real directory inside the outputs: the mount name of
 * path from it into work (PATH_MAX): 1, else 0. */
int ds__out_rel(int dirfd, const char *path, char *work);
/* a chdir into the outputs happened: relative names may be outputs */
extern _Atomic int ds__out_cwd;
void ds__out_chdir(void);
/* writers' descriptors open in this process */
extern _Atomic unsigned ds__out_nw;
/* open/close/namespace calls on r->out names (fd or -1 with errno). */
int ds__out_open(struct ds__res *r, int flags, mode_t mode);
int ds__out_close(int fd);
/* dup family on real descriptors: a writer's copy is a writer; a writer's
 * number replaced by dup2 is a close. */
int ds__out_dupped(int oldfd, int newfd);
int ds__out_dup_pre(int newfd, uint64_t *token);
void ds__out_dup_post(int oldfd, int newfd, int rc, int had, uint64_t token);
int ds__out_path_op(int op, struct ds__res *r, unsigned arg);
int ds__out_rename(struct ds__res *a, struct ds__res *b, unsigned flags);
/* The outputs directory as an entry of the mount root (name, length, the
 * d_ino stat gives it): 1, or 0 when there are no outputs. */
int ds__out_root_entry(const char **name, size_t *nlen, uint64_t *ino);
#define DS__OUT_OP_DENY 100

/* ---- descriptors and open files (fdtab.c) -------------------------------- */
enum ds__fkind { DS__F_REG = 1, DS__F_DIR, DS__F_LNK, DS__F_VIRT, DS__F_VDIR };

/* One open file description, shared by every descriptor dup'ed from it (like
 * the kernel's struct file).  Objects come from a type-stable pool and are
 * never returned to malloc, so a reader racing with close can look at one
 * safely (see ds__fd_get). */
struct ds__file {
	_Atomic uint32_t ref;
	uint16_t kind;         /* enum ds__fkind */
	uint16_t remote;       /* bytes are not in this node's store */
	int64_t id;            /* entry id (or -1 for virtual) */
	struct ds__vent v;     /* virtual entry */
	_Atomic int flags;     /* status flags as F_GETFL reports them */
	_Atomic int64_t off;   /* file offset (directories: stream position) */
	_Atomic int64_t *offp; /* the offset in use: &off, or a cell shared
	                        * across fork and exec (offset.c) */
	int32_t cell;          /* that cell, or -1 */
	uint32_t forkgen;      /* offset.c: cell counted in this fork */
	_Atomic int sread;     /* small reads take pread (sread.c), decided at
	                        * the read from the file's start */
	uint64_t size;         /* st_size */
	const char *_Atomic data; /* the file's bytes once available */
	void *own;             /* malloc'd bytes to free at the last close */
	struct ds_cache_ref *cref; /* epoch cache mapping held */
	pthread_mutex_t lock;  /* making data available (inflate, fetch) */
	struct ds__file *next; /* pool free list */
};

/* [fd]: struct ds__file * | DS__FD_CLOEXEC, or DS__FD_PRIVATE */
extern _Atomic uintptr_t *ds__fdtab;
extern unsigned ds__fdtab_len;
#define DS__FD_CLOEXEC ((uintptr_t)1) /* FD_CLOEXEC as the caller sees it */
#define DS__FD_PRIVATE ((uintptr_t)2) /* the shim's own descriptor (template, socket) */
#define DS__FD_FILE(v) ((v) & ~(uintptr_t)3)

void ds__fdtab_init(void);
struct ds__file *ds__file_new(void);
void ds__file_put(struct ds__file *f);
/* The file behind fd with a reference taken, or NULL when fd is not ours.
 * Lock-free (async-signal-safe for read). */
static inline struct ds__file *ds__fd_get(int fd);
struct ds__file *ds__fd_get_slow(int fd, uintptr_t v);
static inline struct ds__file *ds__fd_get(int fd)
{
	if (DS__UNLIKELY((unsigned)fd < ds__fdtab_len)) {
		uintptr_t v = atomic_load_explicit(&ds__fdtab[fd], memory_order_acquire);
		if (DS__FD_FILE(v))
			return ds__fd_get_slow(fd, v);
	}
	return NULL;
}
/* Is fd ours right now (no reference taken)? */
static inline int ds__fd_is_ours(int fd)
{
	return (unsigned)fd < ds__fdtab_len &&
	       DS__FD_FILE(atomic_load_explicit(&ds__fdtab[fd], memory_order_relaxed));
}
/* Does the table say anything about fd (ours or private)? */
static inline int ds__fd_known(int fd)
{
	return (unsigned)fd < ds__fdtab_len &&
	       atomic_load_explicit(&ds__fdtab[fd], memory_order_relaxed);
}
/* The same test for an *at() call: a staged dirfd, or a real one the path
 * may climb from into the mount (path relative, dirfd not AT_FDCWD). */
int ds__out_dirfd(int fd);
static inline int ds__at_maybe_ours(int dirfd, const char *path)
{
	return ds__fd_is_ours(dirfd) || DS__UNLIKELY(ds__out_dirfd(dirfd)) ||
	       (ds__live() && !ds__busy && path[0] && ds__rel_maybe(dirfd, path) && ds__activate());
}
static inline int ds__fd_is_private(int fd)
{
	return (unsigned)fd < ds__fdtab_len &&
	       atomic_load_explicit(&ds__fdtab[fd], memory_order_relaxed) == DS__FD_PRIVATE;
}
/* Reserve a kernel descriptor (>= minfd) and bind f to it (takes over the
 * caller's reference).  cloexec: what F_GETFD will report.  fd or -errno. */
int ds__fd_install(struct ds__file *f, int minfd, int cloexec);
/* Bind f (one new reference taken) to a descriptor number the kernel has just
 * made for us; returns the file previously bound there, if any (put it). */
struct ds__file *ds__fd_bind(int fd, struct ds__file *f, int cloexec);
/* Forget fd; returns its file (the caller puts it) or NULL. */
struct ds__file *ds__fd_unbind(int fd);
int ds__fd_cloexec(int fd);
void ds__fd_set_cloexec(int fd, int on);
/* Highest descriptor ever bound + 1 (for fork and close_range). */
extern _Atomic unsigned ds__fd_hwm;
void ds__fdtab_atfork_child(void);
/* The shim's own descriptors (docs/design.md section 5: the program owns its numbers).  A
 * private number is invisible to the program: close gives EBADF without
 * closing, closefrom/close_range close around it, dup2 onto it first moves
 * ours away.  Mark only a number the kernel has just given us. */
void ds__fd_private(int fd, int on);
/* fd moved up to RLIMIT_NOFILE - below or above, out of the numbers a
 * program uses (when the limit is finite and over 256; else fd as it is),
 * the old number closed: the descriptor to keep.  Callers mark it private. */
int ds__fd_high(int fd, int below);
/* Move private descriptor fd elsewhere (the program wants its number): the
 * template is re-made, a socket is forgotten (its thread reconnects). */
void ds__fd_private_evict(int fd);
/* Is private fd still the object registered (fstat)?  If not, the mark is
 * dropped (the number is the program's): 0. */
int ds__fd_private_check(int fd);
/* Private numbers in [lowfd, highfd], ascending, at most cap: n. */
int ds__fd_private_list(unsigned lowfd, unsigned highfd, int *out, int cap);
/* The kernel has just given the program fd: anything the table says about it
 * is stale (a raw close behind our back): forget it, never close it. */
void ds__fd_fresh_slow(int fd);
static inline int ds__fd_fresh(int fd)
{
	if (DS__UNLIKELY(fd >= 0 && ds__fd_known(fd)))
		ds__fd_fresh_slow(fd);
	return fd;
}
/* Is fd (still) the reservation?  One fstat. */
int ds__fd_is_reservation(int fd);
/* The owner of the shim's state: 0 in a vfork child (or a child made
 * without fork's handlers), which shares or copied the parent's memory and
 * must change nothing in it.  No system call until such a child may exist
 * (owner.c raises ds__forked_raw at vfork, clone, _Fork), one getpid after. */
extern _Atomic int ds__forked_raw;
void ds__forked_raw_note(void);
static inline int ds__owner(void)
{
	return DS__LIKELY(!atomic_load_explicit(&ds__forked_raw, memory_order_relaxed)) ||
	       getpid() == ds__g.pid;
}
/* What a vfork child did to staged numbers (dup2/close), kept apart from the
 * table it shares with its parent, for its exec (exec.c). */
void ds__vfork_note(int fd, uintptr_t v);
int ds__vfork_lookup(int fd, uintptr_t *v); /* 1 found, 0 not, -1 unknown (overflow) */
/* exec.c: take over the staged descriptors a previous image passed in
 * DSTAGE_FDS (at init). */
void ds__exec_inherit(void);
/* exec.c: "DSTAGE_FDS=..." into buf (DS__FDS_BUF bytes) for an exec, or for
 * a posix_spawn (spawn.c: all = 1 describes the close-on-exec ones that
 * are sources of the ndups pairs {from, to} of its dup2 actions too; each
 * source is listed under its new number as well).  Gives each open file its own object
 * (dup'ed onto its numbers).  1 when something was described. */
#define DS__FDS_NAME "DSTAGE_FDS"
/* exec.c and spawn.c: the cwd is in the outputs (write.c) */
#define DS__OUT_CWD_NAME "DSTAGE_OUT_CWD"
#define DS__FDS_MAX 128 /* descriptors described; more are left to EBADF */
#define DS__FDS_BUF (DS__FDS_MAX * 84 + 32)
int ds__exec_describe(char *buf, size_t size, int regfd, const int (*dups)[2], int ndups, int all);
/* exec.c: look up the real exec calls now (before a fork). */
void ds__exec_resolve(void);
/* offset.c: offsets shared across fork and exec, like the kernel's.  Give
 * f (a regular file just made) a shared cell (or leave it its own offset
 * when there is none); drop f's hold on its cell at its last put. */
void ds__offcell_attach(struct ds__file *f);
void ds__offcell_put(struct ds__file *f);
void ds__offcell_atfork_child(void);
/* exec: the region's descriptor made inheritable for an exec (-1 none);
 * restore after a failed exec.  Next image: map the region passed. */
int ds__offcell_exec_fd(void);
void ds__offcell_exec_failed(int fd);
int ds__offcell_adopt(int fd);
/* Bind f to cell (taken over from the previous image; inc: count it). */
void ds__offcell_bind(struct ds__file *f, int32_t cell, int inc);
/* procfd.c: the staged descriptor /proc/self/fd/N, /dev/fd/N,
 * /proc/<own pid>/fd/N names, or -1. */
int ds__procfd(const char *path);

/* ---- operations on open files (fd.c) ------------------------------------- */
/* Open an entry of ours.  Returns the fd or -errno. */
int ds__open_res(struct ds__res *r, int flags, mode_t mode);
/* The open file for r opened with flags (checks as open does), not yet bound
 * to a descriptor.  0 or -errno. */
int ds__file_make(struct ds__res *r, int flags, struct ds__file **out);
/* pread (off >= 0) or read at the file offset (off == -1).  n or -errno. */
ssize_t ds__file_read(struct ds__file *f, void *buf, size_t n, int64_t off);
int64_t ds__file_seek(struct ds__file *f, int64_t off, int whence);
int ds__close(int fd);

/* ---- large reads of the node store (sread.c) ------------------------------ */
/* Reads shorter than this never take pread. */
#define DS__STORE_READ_MIN 4096
/* Copy k bytes at offset so of the mapped store into buf with pread when k
 * is large enough or small says so (ds__store_small), and the store's
 * descriptor is sound: k (fewer only when buf ends early: the kernel's
 * EFAULT after some bytes), -EFAULT, or 0: nothing done, copy from the
 * mapping. */
ssize_t ds__store_read(void *buf, size_t k, uint64_t so, int small);
/* Should the small reads of a file of size bytes at store offset so, read
 * from its start now, take pread (1) or copy out of the mapping (0)?  Then
 * ds__store_note(end) after every read of the store, end its end. */
int ds__store_small(uint64_t so, uint64_t size);
void ds__store_note(uint64_t end);

/* ---- metadata (stat.c) ---------------------------------------------------- */
/* stat of an entry (real or virtual). */
int ds__stat_res(const struct ds__res *r, struct stat *st);
int ds__stat_file(const struct ds__file *f, struct stat *st);
/* May the caller access entry (mode bits R_OK/X_OK as the kernel checks). */
int ds__perm(const struct stat *st, int mask);

/* ---- directory listing (dir.c) ------------------------------------------- */
/* Name, d_ino and d_type of the i-th entry of directory f listed after "."
 * and ".."; -ENOENT past the last.  A staged child's name is decoded
 * through nm (the stream's: the next child costs one step of the front
 * coding), a virtual one's written into tmp. */
int ds__dir_child(const struct ds__file *f, size_t i, struct ds_ix_names *nm, const char **name,
                  size_t *nlen, uint64_t *ino, unsigned char *type, char *tmp, size_t tmplen);
void ds__dir_atfork_child(void);

/* ---- stdio (stdio.c) ------------------------------------------------------ */
void ds__stdio_atfork_child(void);

/* ---- remote bytes (remote.c) --------------------------------------------- */
/* Make f->data available: inflate a zlib file, fetch a remote one (epoch
 * cache, else the service).  0 or -EIO/-ENOMEM. */
int ds__materialize(struct ds__file *f);
/* Drop the epoch-cache mapping f holds. */
void ds__cache_release(struct ds__file *f);
/* Fetch `len` STORED bytes of entry id from offset off of its stored bytes
 * through the node service.  0 or -EIO/-errno. */
int ds__remote_read(uint32_t id, uint64_t off, void *buf, uint64_t len);
/* Tell the service a reader started epoch e (best effort, never blocks). */
void ds__remote_epoch(uint64_t epoch);
/* failover.c: is the job's service restarted after a lost node
 * (JOBDIR/nodes says failover=1)?  Then wait a little (backoff) and return 1
 * to ask again, 0 once the deadline has passed or without failover. */
int ds__failover_mode(void);
int ds__failover_retry(double deadline, int attempt);
void ds__remote_atfork_child(void);

/* ---- virtual epoch lists (epoch.c) ---------------------------------------- */
/* Parse a path relative to the mount that starts with ".dstage": 0 with *v
 * set, -ENOENT/-ENOTDIR.  rest: what follows ".dstage".  1 when a ".." led
 * back to the mount root: the walk goes on from rest + *used. */
int ds__virt_lookup(const char *rest, size_t len, struct ds__vent *v, size_t *used);
/* Epoch `epoch`'s list of local reader l of nr on this node (nr = 0: the
 * node's whole share) as entry ids, malloc'd: the published share sliced
 * when it is ours, else computed.  A computed id is a sample the index can
 * follow; a published one is the service's word only: the caller checks
 * what it follows. */
int ds__epoch_ids(uint64_t epoch, uint32_t l, uint32_t nr, uint32_t **out, size_t *count);
/* The content of a list (malloc'd), its length. */
int ds__virt_content(const struct ds__vent *v, char **data, size_t *len);
uint64_t ds__virt_ino(const struct ds__vent *v);
/* A virtual entry's stat.  A list's st_size is its content's length, which
 * takes the epoch's share (O(samples)): with_size = 0 leaves it 0, for the
 * callers that need the type, mode or inode only or know the size. */
void ds__virt_stat(const struct ds__vent *v, struct stat *st, int with_size);
/* Children of a virtual directory: the i-th name; -ENOENT past the last. */
int ds__virt_child(const struct ds__vent *v, size_t i, char *name, size_t len, struct ds__vent *c);

/* ---- the Python helper's entry points (pyapi.c) ---------------------------
 * ds_py_*: exported for io/python/dstage (ctypes, on the library already
 * preloaded), so that a dataset and a sampler cost a reader its share, not
 * the dataset (docs/shim.md, "The Python helper's entry points").  ABI:
 * ds_py_abi() == DS_PY_ABI; the helper falls back to walking the tree
 * when it differs or the symbols are absent. */
#define DS_PY_ABI 2 /* 2: ds_py_entry_name into a buffer */
int ds_py_abi(void);
int ds_py_active(void);
const char *ds_py_mount(void);
int ds_py_dir(const char *rel, size_t len, uint64_t *out);
int64_t ds_py_children(const char *rel, size_t len, int64_t *rows, size_t nrows, char *names,
                       size_t cap, const char *exts, size_t elen);
int64_t ds_py_lookup(const char *rel, size_t len);
int ds_py_list(uint64_t epoch, uint32_t l, uint32_t nr, uint32_t **ids, size_t *count);
int64_t ds_py_map(const uint32_t *ids, size_t n, const int64_t *seg, size_t nseg, int64_t *out);
int64_t ds_py_entry_name(uint64_t id, char *buf, size_t size);
void ds_py_free(void *p);

#endif
