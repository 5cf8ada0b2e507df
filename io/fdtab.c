/* SPDX-License-Identifier: BSD-3-Clause */
/* fdtab.c: the descriptor table and the open-file objects.
 *
 * Every staged descriptor is a real kernel descriptor, so numbers never
 * collide with the program's own files: a duplicate of the reservation, an
 * O_PATH|O_NOFOLLOW descriptor of NODEDIR/reserved, a symlink to itself that
 * the shim owns (made at first use, atomically).  The reservation is inert:
 * every operation the shim does not emulate fails loudly (read, ftruncate,
 * mmap: EBADF; openat, mkfifoat, fchdir relative to it: ENOTDIR; reopening
 * /proc/self/fd/N: ELOOP) and names nothing real.  An O_PATH of "/" (the
 * old choice) let mkfifoat(fd, "x") create /x; an O_PATH of an empty memfd
 * reopens as an empty readable file (silent empty input).
 *
 * Identity: every duplicate is checked with one fstat (dev+ino of the
 * reservation): a program that closed the template behind our back (raw
 * close_range) and got its number for its own file never has that file
 * duplicated as a staged descriptor; the number is forgotten, not closed.
 * Cost measured with t/helpers/shim-bench (4 KiB files, open+fstat+read+
 * close): 1.49-1.59M files/s before, 0.95-1.06M after: about 0.35 us per
 * open, all of it this fstat (issue 13: 0.33 us here; a 4 KiB read-once
 * ran 1.95x tmpfs without it, 1.67x with it, in one run).  The
 * cheaper checks (F_GETFL for O_PATH) are a system call as well and say
 * nothing about identity.
 *
 * The kernel copy carries the program's FD_CLOEXEC, so a staged descriptor
 * survives exec as the reservation; the exec wrappers (exec.c) tell the next
 * image's shim what it was (DSTAGE_FDS).  Without a shim there (static
 * binary, setuid, LD_PRELOAD cleared) it reads EBADF: loud, never empty.
 *
 * The table is an array indexed by fd, sized by RLIMIT_NOFILE, reserved
 * with mmap (pages appear as descriptors are used).  A slot holds a pointer
 * to a shared open-file object, refcounted like the kernel's struct file:
 * dup'ed descriptors share the object, hence the offset; or DS__FD_PRIVATE
 * for the shim's own descriptors (the template, the service sockets).
 *
 * Lookups take no lock (read must be usable from signal handlers and 16
 * threads at once): objects come from a type-stable pool and are never
 * freed, so ds__fd_get can take a reference with a CAS on a live count and
 * then check the slot still points at the object. */
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

_Atomic uintptr_t *ds__fdtab;
unsigned ds__fdtab_len;
_Atomic unsigned ds__fd_hwm;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t tmpl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ds__file *pool_free;

#define FDTAB_MAX (1u << 20)
#define POOL_SLAB 256


/* ---- private descriptors ---------------------------------------------------- */
/* Their identity, to tell ours from a program's file that took the number
 * after a raw close (then we forget it, never close it). */
#define PRIV_MAX 64
static struct priv {
	int fd;
	dev_t dev;
	ino_t ino;
} priv[PRIV_MAX];
static int npriv;
static pthread_mutex_t priv_lock = PTHREAD_MUTEX_INITIALIZER;

void ds__fd_private(int fd, int on)
{
	if ((unsigned)fd >= ds__fdtab_len)
		return;
	struct stat st;
	pthread_mutex_lock(&priv_lock);
	for (int i = 0; i < npriv; i++)
		if (priv[i].fd == fd)
			priv[i] = priv[--npriv];
	if (on && npriv < PRIV_MAX && DS__REAL(fstat)(fd, &st) == 0) {
		priv[npriv++] = (struct priv){fd, st.st_dev, st.st_ino};
		/* the kernel just gave us fd: anything the table said was stale */
		uintptr_t old = atomic_exchange(&ds__fdtab[fd], DS__FD_PRIVATE);
		if (DS__FD_FILE(old))
			ds__file_put((struct ds__file *)DS__FD_FILE(old));
	} else {
		uintptr_t p = DS__FD_PRIVATE;
		atomic_compare_exchange_strong(&ds__fdtab[fd], &p, 0);
	}
	pthread_mutex_unlock(&priv_lock);
}

/* Is private fd still the object we registered?  (1 yes; 0: the number is
 * the program's now: the mark is dropped.) */
int ds__fd_private_check(int fd)
{
	struct stat st;
	int ok = 0, known = 0;
	pthread_mutex_lock(&priv_lock);
	for (int i = 0; i < npriv; i++)
		if (priv[i].fd == fd) {
			known = 1;
			ok = DS__REAL(fstat)(fd, &st) == 0 && st.st_dev == priv[i].dev &&
			     st.st_ino == priv[i].ino;
		}
	pthread_mutex_unlock(&priv_lock);
	if (!ok && ds__owner()) {
		if (fd == ds__g.tmpl_fd)
			ds__g.tmpl_fd = -1;
		if (known || ds__fd_is_private(fd))
			ds__fd_private(fd, 0);
	}
	return ok;
}

/* The private numbers >= lowfd that are still ours, ascending (for closefrom
 * and close_range to close around).  n found. */
int ds__fd_private_list(unsigned lowfd, unsigned highfd, int *out, int cap)
{
	int n = 0;
	pthread_mutex_lock(&priv_lock);
	for (int i = 0; i < npriv && n < cap; i++)
		if ((unsigned)priv[i].fd >= lowfd && (unsigned)priv[i].fd <= highfd)
			out[n++] = priv[i].fd;
	pthread_mutex_unlock(&priv_lock);
	for (int i = 1; i < n; i++) /* insertion sort: a handful */
		for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
			int t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

int ds__fd_is_reservation(int fd)
{
	struct stat st;
	return DS__REAL(fstat)(fd, &st) == 0 && S_ISLNK(st.st_mode) &&
	       st.st_dev == ds__g.tmpl_dev && st.st_ino == ds__g.tmpl_ino;
}

/* Open (making it when missing) the reservation: NODEDIR/reserved, a symlink
 * to itself, owned by us, O_PATH|O_NOFOLLOW.  Moved high, out of the way of
 * the low numbers programs expect.  Caller holds tmpl_lock (or runs init). */
static int tmpl_make(void)
{
	char path[PATH_MAX + 16], tmp[PATH_MAX + 48];
	struct stat st;
	ds_store_path(path, sizeof(path), ds__g.nodedir, DS_RESERVED_NAME);
	int fd = DS__REAL(open)(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		snprintf(tmp, sizeof(tmp), "%s/" DS_RESERVED_TMP "%ld", ds__g.nodedir,
		         (long)getpid());
		DS__REAL(unlink)(tmp);
		if (DS__REAL(symlink)(DS_RESERVED_NAME, tmp) == 0 &&
		    DS__REAL(rename)(tmp, path) < 0)
			DS__REAL(unlink)(tmp);
		fd = DS__REAL(open)(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		ds_info("'%s': cannot make the reservation: %s", path, strerror(errno));
		return -1;
	}
	if (DS__REAL(fstat)(fd, &st) < 0 || !S_ISLNK(st.st_mode) || st.st_uid != geteuid()) {
		ds_info("'%s': not a symlink of this user: no reservation", path);
		DS__REAL(close)(fd);
		return -1;
	}
	fd = ds__fd_high(fd, 64);
	ds__g.tmpl_dev = st.st_dev;
	ds__g.tmpl_ino = st.st_ino;
	ds__g.tmpl_fd = fd;
	ds__fd_private(fd, 1);
	return fd;
}

int ds__fd_high(int fd, int below)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 256) {
		int hi = DS__REAL(fcntl)(fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur - (rlim_t)below));
		if (hi >= 0) {
			DS__REAL(close)(fd);
			fd = hi;
		}
	}
	return fd;
}

void ds__fd_private_evict(int fd)
{
	if (!ds__owner())
		return; /* a vfork child: its dup2 acts on its own table only */
	pthread_mutex_lock(&tmpl_lock);
	if (fd == ds__g.tmpl_fd) {
		int hi = DS__REAL(fcntl)(fd, F_DUPFD_CLOEXEC, fd + 1);
		ds__fd_private(fd, 0);
		ds__g.tmpl_fd = -1;
		if (hi >= 0 && ds__fd_is_reservation(hi)) {
			ds__g.tmpl_fd = hi;
			ds__fd_private(hi, 1);
		} else if (hi >= 0) {
			DS__REAL(close)(hi);
		}
	} else {
		ds__fd_private(fd, 0); /* a socket: its thread sees and reconnects */
	}
	pthread_mutex_unlock(&tmpl_lock);
}

void ds__fdtab_init(void)
{
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	rlim_t n = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		n = rl.rlim_max == RLIM_INFINITY ? FDTAB_MAX : rl.rlim_max;
		if (n < rl.rlim_cur)
			n = rl.rlim_cur;
	}
	if (n > FDTAB_MAX)
		n = FDTAB_MAX;
	if (n < 1024)
		n = 1024;
	void *m = DS__REAL(mmap)(NULL, n * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
	                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		ds_info("cannot reserve the descriptor table: %s", strerror(errno));
		return;
	}
	ds__fdtab_len = (unsigned)n;
	ds__fdtab = m;
	if (tmpl_make() < 0) {
		ds__fdtab = NULL;
		ds__fdtab_len = 0;
		munmap(m, n * sizeof(uintptr_t));
	}
}

struct ds__file *ds__file_new(void)
{
	pthread_mutex_lock(&pool_lock);
	if (!pool_free) {
		struct ds__file *slab = DS__REAL(mmap)(NULL, POOL_SLAB * sizeof(*slab),
		                                     PROT_READ | PROT_WRITE,
		                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (slab == MAP_FAILED) {
			pthread_mutex_unlock(&pool_lock);
			return NULL;
		}
		for (int i = 0; i < POOL_SLAB; i++) {
			slab[i].next = pool_free;
			pool_free = &slab[i];
		}
	}
	struct ds__file *f = pool_free;
	pool_free = f->next;
	pthread_mutex_unlock(&pool_lock);

	/* ref stays 0 (not live) until everything else is set */
	f->kind = 0;
	f->remote = 0;
	f->id = -1;
	memset(&f->v, 0, sizeof(f->v));
	atomic_store(&f->flags, 0);
	atomic_store(&f->off, 0);
	f->offp = &f->off;
	f->cell = -1;
	f->forkgen = 0;
	atomic_store(&f->sread, 0);
	f->size = 0;
	atomic_store(&f->data, NULL);
	f->own = NULL;
	f->cref = NULL;
	pthread_mutex_init(&f->lock, NULL);
	f->next = NULL;
	atomic_store_explicit(&f->ref, 1, memory_order_release);
	return f;
}

void ds__file_put(struct ds__file *f)
{
	if (atomic_fetch_sub_explicit(&f->ref, 1, memory_order_acq_rel) != 1)
		return;
	free(f->own);
	f->own = NULL;
	if (f->cell >= 0)
		ds__offcell_put(f);
	if (f->cref)
		ds__cache_release(f);
	atomic_store(&f->data, NULL);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_lock(&pool_lock);
	f->next = pool_free;
	pool_free = f;
	pthread_mutex_unlock(&pool_lock);
}

struct ds__file *ds__fd_get_slow(int fd, uintptr_t v)
{
	for (;;) {
		struct ds__file *f = (struct ds__file *)DS__FD_FILE(v);
		if (!f)
			return NULL;
		uint32_t r = atomic_load_explicit(&f->ref, memory_order_acquire);
		while (r) {
			if (atomic_compare_exchange_weak_explicit(&f->ref, &r, r + 1,
			                                          memory_order_acq_rel,
			                                          memory_order_acquire)) {
				/* still the object bound to fd? (it may have been
				 * closed and reused meanwhile) */
				uintptr_t now = atomic_load_explicit(&ds__fdtab[fd], memory_order_acquire);
				if (DS__FD_FILE(now) == (uintptr_t)f)
					return f;
				ds__file_put(f);
				break;
			}
		}
		v = atomic_load_explicit(&ds__fdtab[fd], memory_order_acquire);
		if (!DS__FD_FILE(v))
			return NULL;
	}
}

static void note_hwm(int fd)
{
	unsigned h = atomic_load(&ds__fd_hwm);
	while ((unsigned)fd + 1 > h && !atomic_compare_exchange_weak(&ds__fd_hwm, &h, (unsigned)fd + 1))
		;
}

/* A new duplicate of the reservation >= minfd: checked by identity (the
 * template's number may be a program's file now, after a raw close_range);
 * on a mismatch only the new descriptor is closed, the old template number
 * forgotten, a new template made. */
static int dup_reservation(int minfd, int cloexec)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		int t = ds__g.tmpl_fd, fd = -1;
		if (t >= 0) {
			fd = DS__REAL(fcntl)(t, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, minfd);
			if (fd >= 0 && ds__fd_is_reservation(fd))
				return fd;
			if (fd < 0 && errno != EBADF)
				return -errno;
			if (fd >= 0)
				DS__REAL(close)(fd); /* ours: just made */
		}
		pthread_mutex_lock(&tmpl_lock);
		if (ds__g.tmpl_fd == t) {
			if (t >= 0)
				ds__fd_private(t, 0); /* forget, never close: not ours now */
			ds__g.tmpl_fd = -1;
			tmpl_make();
		}
		pthread_mutex_unlock(&tmpl_lock);
	}
	return -EBADF;
}

static void vfork_reclaim(void);

int ds__fd_install(struct ds__file *f, int minfd, int cloexec)
{
	vfork_reclaim();
	int fd = dup_reservation(minfd, cloexec);
	if (fd < 0)
		return fd;
	if ((unsigned)fd >= ds__fdtab_len) {
		DS__REAL(close)(fd);
		return -EMFILE;
	}
	note_hwm(fd);
	uintptr_t old = atomic_exchange_explicit(&ds__fdtab[fd],
	                                         (uintptr_t)f | (cloexec ? DS__FD_CLOEXEC : 0),
	                                         memory_order_acq_rel);
	if (DS__FD_FILE(old)) /* a stale slot: its descriptor was closed behind our back */
		ds__file_put((struct ds__file *)DS__FD_FILE(old));
	return fd;
}

struct ds__file *ds__fd_bind(int fd, struct ds__file *f, int cloexec)
{
	if ((unsigned)fd >= ds__fdtab_len)
		return NULL;
	atomic_fetch_add(&f->ref, 1);
	note_hwm(fd);
	uintptr_t old = atomic_exchange_explicit(&ds__fdtab[fd],
	                                         (uintptr_t)f | (cloexec ? DS__FD_CLOEXEC : 0),
	                                         memory_order_acq_rel);
	return (struct ds__file *)DS__FD_FILE(old);
}

struct ds__file *ds__fd_unbind(int fd)
{
	if ((unsigned)fd >= ds__fdtab_len)
		return NULL;
	uintptr_t old = atomic_load(&ds__fdtab[fd]);
	if (!DS__FD_FILE(old))
		return NULL; /* never drop a private mark here */
	old = atomic_exchange_explicit(&ds__fdtab[fd], 0, memory_order_acq_rel);
	return (struct ds__file *)DS__FD_FILE(old);
}

int ds__fd_cloexec(int fd)
{
	return (atomic_load(&ds__fdtab[fd]) & DS__FD_CLOEXEC) != 0;
}

void ds__fd_set_cloexec(int fd, int on)
{
	if (on)
		atomic_fetch_or(&ds__fdtab[fd], DS__FD_CLOEXEC);
	else
		atomic_fetch_and(&ds__fdtab[fd], ~DS__FD_CLOEXEC);
}

/* After fork the child has one thread: locks held by the parent's other
 * threads at fork time would never be released. */
void ds__fdtab_atfork_child(void)
{
	pthread_mutex_init(&pool_lock, NULL);
	pthread_mutex_init(&tmpl_lock, NULL);
	pthread_mutex_init(&priv_lock, NULL);
	unsigned h = atomic_load(&ds__fd_hwm);
	for (unsigned fd = 0; fd < h; fd++) {
		uintptr_t v = atomic_load(&ds__fdtab[fd]);
		if (DS__FD_FILE(v))
			pthread_mutex_init(&((struct ds__file *)DS__FD_FILE(v))->lock, NULL);
	}
}

/* ---- what a vfork child did ------------------------------------------------ */
/* A vfork child shares the table with its suspended parent: its dup2 of a
 * staged descriptor is noted here, tagged with its pid, for its exec to
 * describe (an exec that fails, e.g. execvp trying each PATH entry, must
 * still find them, so the child never clears them).  The owner reclaims
 * notes of other pids at its next staged open: those children have exec'd
 * or exited.  (A vfork child of another thread that is between its dup2 and
 * its exec at that moment loses its notes: its exec then describes the
 * parent's table.)  A child that overflows the notes passes nothing (its
 * next image then reads EBADF). */
#define VF_MAX 32
static struct vnote {
	_Atomic pid_t pid;
	int fd;
	uintptr_t v;
} vnotes[VF_MAX];
static _Atomic pid_t vnote_full;
static _Atomic int vnote_used;

static void vfork_reclaim(void)
{
	if (DS__LIKELY(!atomic_load_explicit(&vnote_used, memory_order_relaxed)))
		return;
	atomic_store(&vnote_used, 0);
	for (int i = 0; i < VF_MAX; i++) {
		pid_t p = atomic_load(&vnotes[i].pid);
		if (p > 0 && p != ds__g.pid)
			atomic_compare_exchange_strong(&vnotes[i].pid, &p, 0);
	}
	atomic_store(&vnote_full, 0);
}

void ds__vfork_note(int fd, uintptr_t v)
{
	pid_t me = getpid();
	atomic_store(&vnote_used, 1);
	for (int i = 0; i < VF_MAX; i++)
		if (atomic_load(&vnotes[i].pid) == me && vnotes[i].fd == fd) {
			vnotes[i].v = v;
			return;
		}
	for (int i = 0; i < VF_MAX; i++) {
		pid_t z = 0;
		if (atomic_compare_exchange_strong(&vnotes[i].pid, &z, -1)) {
			vnotes[i].fd = fd;
			vnotes[i].v = v;
			atomic_store(&vnotes[i].pid, me);
			return;
		}
	}
	atomic_store(&vnote_full, me);
}

int ds__vfork_lookup(int fd, uintptr_t *v)
{
	pid_t me = getpid();
	if (atomic_load(&vnote_full) == me)
		return -1;
	for (int i = 0; i < VF_MAX; i++)
		if (atomic_load(&vnotes[i].pid) == me && vnotes[i].fd == fd) {
			*v = vnotes[i].v;
			return 1;
		}
	return 0;
}


void ds__fd_fresh_slow(int fd)
{
	if (!ds__owner())
		return;
	uintptr_t v = atomic_load(&ds__fdtab[fd]);
	if (v == DS__FD_PRIVATE) {
		pthread_mutex_lock(&tmpl_lock);
		if (fd == ds__g.tmpl_fd)
			ds__g.tmpl_fd = -1;
		ds__fd_private(fd, 0);
		pthread_mutex_unlock(&tmpl_lock);
	} else {
		struct ds__file *f = ds__fd_unbind(fd);
		if (f)
			ds__file_put(f);
	}
}
