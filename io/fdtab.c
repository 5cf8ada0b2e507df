/* fdtab.c: the descriptor table and the open-file objects.
 *
 * Every staged descriptor is a real kernel descriptor, so numbers never
 * collide with the program's own files: an O_PATH descriptor of "/"
 * duplicated from a template (one cheap fcntl, no path walk).  O_PATH makes
 * every operation the shim does not emulate fail loudly with EBADF (read,
 * write, mmap, sendfile, ioctl straight to the kernel) instead of returning
 * wrong bytes.  The kernel copy is always close-on-exec (DESIGN 5: staged
 * descriptors are closed on exec; the exec'd program could not read them);
 * what F_GETFD reports is kept separately, in bit 0 of the table slot.
 *
 * The table is an array indexed by fd, sized by RLIMIT_NOFILE, reserved
 * with mmap (pages appear as descriptors are used).  A slot holds a pointer
 * to a shared open-file object, refcounted like the kernel's struct file:
 * dup'ed descriptors share the object, hence the offset.
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
static struct ds_file *pool_free;

#define DS_FDTAB_MAX (1u << 20)
#define POOL_SLAB 256


void ds__fdtab_init(void)
{
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	rlim_t n = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		n = rl.rlim_max == RLIM_INFINITY ? DS_FDTAB_MAX : rl.rlim_max;
		if (n < rl.rlim_cur)
			n = rl.rlim_cur;
	}
	if (n > DS_FDTAB_MAX)
		n = DS_FDTAB_MAX;
	if (n < 1024)
		n = 1024;
	void *m = DS_REAL(mmap)(NULL, n * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
	                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		ds_info("cannot reserve the descriptor table: %s", strerror(errno));
		return;
	}
	ds__g.tmpl_fd = DS_REAL(open)("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
	if (ds__g.tmpl_fd < 0) {
		munmap(m, n * sizeof(uintptr_t));
		return;
	}
	/* keep the template out of the way of the low numbers programs expect
	 * (and of numbers a test compares with a native run) */
	int hi = -1;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 256)
		hi = DS_REAL(fcntl)(ds__g.tmpl_fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur - 64));
	if (hi >= 0) {
		DS_REAL(close)(ds__g.tmpl_fd);
		ds__g.tmpl_fd = hi;
	}
	ds__fdtab_len = (unsigned)n;
	ds__fdtab = m;
}

struct ds_file *ds__file_new(void)
{
	pthread_mutex_lock(&pool_lock);
	if (!pool_free) {
		struct ds_file *slab = DS_REAL(mmap)(NULL, POOL_SLAB * sizeof(*slab),
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
	struct ds_file *f = pool_free;
	pool_free = f->next;
	pthread_mutex_unlock(&pool_lock);

	/* ref stays 0 (not live) until everything else is set */
	f->kind = 0;
	f->remote = 0;
	f->id = -1;
	memset(&f->v, 0, sizeof(f->v));
	atomic_store(&f->flags, 0);
	atomic_store(&f->off, 0);
	f->size = 0;
	atomic_store(&f->data, NULL);
	f->own = NULL;
	f->cref = NULL;
	pthread_mutex_init(&f->lock, NULL);
	f->next = NULL;
	atomic_store_explicit(&f->ref, 1, memory_order_release);
	return f;
}

void ds__file_put(struct ds_file *f)
{
	if (atomic_fetch_sub_explicit(&f->ref, 1, memory_order_acq_rel) != 1)
		return;
	free(f->own);
	f->own = NULL;
	if (f->cref)
		ds__cache_release(f);
	atomic_store(&f->data, NULL);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_lock(&pool_lock);
	f->next = pool_free;
	pool_free = f;
	pthread_mutex_unlock(&pool_lock);
}

struct ds_file *ds__fd_get_slow(int fd, uintptr_t v)
{
	for (;;) {
		struct ds_file *f = (struct ds_file *)(v & ~DS_FD_CLOEXEC);
		uint32_t r = atomic_load_explicit(&f->ref, memory_order_acquire);
		while (r) {
			if (atomic_compare_exchange_weak_explicit(&f->ref, &r, r + 1,
			                                          memory_order_acq_rel,
			                                          memory_order_acquire)) {
				/* still the object bound to fd? (it may have been
				 * closed and reused meanwhile) */
				uintptr_t now = atomic_load_explicit(&ds__fdtab[fd], memory_order_acquire);
				if ((now & ~DS_FD_CLOEXEC) == (uintptr_t)f)
					return f;
				ds__file_put(f);
				break;
			}
		}
		v = atomic_load_explicit(&ds__fdtab[fd], memory_order_acquire);
		if (!v)
			return NULL;
	}
}

static void note_hwm(int fd)
{
	unsigned h = atomic_load(&ds__fd_hwm);
	while ((unsigned)fd + 1 > h && !atomic_compare_exchange_weak(&ds__fd_hwm, &h, (unsigned)fd + 1))
		;
}

int ds__fd_install(struct ds_file *f, int minfd, int cloexec)
{
	int fd = DS_REAL(fcntl)(ds__g.tmpl_fd, F_DUPFD_CLOEXEC, minfd);
	if (fd < 0 && errno == EBADF) {
		/* the program closed our template behind our back (closefrom
		 * in a library, say): make a new one */
		int t = DS_REAL(open)("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
		if (t >= 0) {
			ds__g.tmpl_fd = t;
			fd = DS_REAL(fcntl)(t, F_DUPFD_CLOEXEC, minfd);
		}
	}
	if (fd < 0)
		return -errno;
	if ((unsigned)fd >= ds__fdtab_len) {
		DS_REAL(close)(fd);
		return -EMFILE;
	}
	note_hwm(fd);
	uintptr_t old = atomic_exchange_explicit(&ds__fdtab[fd],
	                                         (uintptr_t)f | (cloexec ? DS_FD_CLOEXEC : 0),
	                                         memory_order_acq_rel);
	if (old) /* a stale slot: its descriptor was closed behind our back */
		ds__file_put((struct ds_file *)(old & ~DS_FD_CLOEXEC));
	return fd;
}

struct ds_file *ds__fd_bind(int fd, struct ds_file *f, int cloexec)
{
	if ((unsigned)fd >= ds__fdtab_len)
		return NULL;
	atomic_fetch_add(&f->ref, 1);
	note_hwm(fd);
	uintptr_t old = atomic_exchange_explicit(&ds__fdtab[fd],
	                                         (uintptr_t)f | (cloexec ? DS_FD_CLOEXEC : 0),
	                                         memory_order_acq_rel);
	return (struct ds_file *)(old & ~DS_FD_CLOEXEC);
}

struct ds_file *ds__fd_unbind(int fd)
{
	if ((unsigned)fd >= ds__fdtab_len)
		return NULL;
	uintptr_t old = atomic_exchange_explicit(&ds__fdtab[fd], 0, memory_order_acq_rel);
	return (struct ds_file *)(old & ~DS_FD_CLOEXEC);
}

int ds__fd_cloexec(int fd)
{
	return (atomic_load(&ds__fdtab[fd]) & DS_FD_CLOEXEC) != 0;
}

void ds__fd_set_cloexec(int fd, int on)
{
	if (on)
		atomic_fetch_or(&ds__fdtab[fd], DS_FD_CLOEXEC);
	else
		atomic_fetch_and(&ds__fdtab[fd], ~DS_FD_CLOEXEC);
}

/* After fork the child has one thread: locks held by the parent's other
 * threads at fork time would never be released. */
void ds__fdtab_atfork_child(void)
{
	pthread_mutex_init(&pool_lock, NULL);
	unsigned h = atomic_load(&ds__fd_hwm);
	for (unsigned fd = 0; fd < h; fd++) {
		uintptr_t v = atomic_load(&ds__fdtab[fd]);
		if (v)
			pthread_mutex_init(&((struct ds_file *)(v & ~DS_FD_CLOEXEC))->lock, NULL);
	}
}
