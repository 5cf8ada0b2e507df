/* SPDX-License-Identifier: BSD-3-Clause */
/* offset.c: file offsets shared across fork and exec, like the kernel's.
 *
 * The kernel shares one offset between every descriptor of one open file,
 * in every process that inherited it: `{ head -n1 >/dev/null; cat; } < f`
 * has cat start after the line head consumed.  The offset of a staged
 * regular file lives in a cell of a region shared by every process of the
 * family: a memfd mapped MAP_SHARED, made at the first staged open, kept by
 * fork (the mapping is inherited) and passed across exec by descriptor
 * number in DSTAGE_FDS (exec.c).
 *
 * A cell is counted by the open files (struct ds__file) that use it, in every
 * process: +1 when a fork child inherits a file, +1 when a new image adopts
 * a file of a vfork child's exec; -1 at a file's last close.  A process that
 * is killed, or leaves with _exit (multiprocessing's workers do) without
 * closing, leaks its counts: the cell is never reused, never corrupted
 * (a normal exit gives them back, see the destructor below).  2^20 cells,
 * taken lowest first, so the memfd's pages appear only as many are in use.
 * Without the region (memfd refused, all cells taken) a file keeps an
 * offset of its own in the process, as before. */
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>

/* Sparse: the memfd's pages appear as cells are first used (lowest first). */
#define CELLS (1u << 20)
#define REGION_MAGIC 0x6473746167656f66ull /* "dstageof" */

struct cell {
	_Atomic int64_t off;
	_Atomic int32_t ref;
	int32_t pad;
};
struct region {
	uint64_t magic;
	uint64_t ncells;
	_Atomic uint32_t hint;
	uint32_t pad;
	struct cell c[CELLS];
};

static struct region *reg DS__HOT; /* read at every exit */
static int reg_fd = -1;
static int reg_failed;
static uint32_t forkgen = 1;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

/* Keep the region's descriptor high and private, like the template. */
static int park(int fd)
{
	fd = ds__fd_high(fd, 72);
	ds__fd_private(fd, 1);
	return fd;
}

static struct region *region(void)
{
	struct region *r0 = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	if (DS__LIKELY(r0 != NULL) || __atomic_load_n(&reg_failed, __ATOMIC_RELAXED))
		return r0;
	pthread_mutex_lock(&reg_lock);
	if (!reg && !reg_failed) {
		int fd = DS__REAL(memfd_create)("dstage-offsets", MFD_CLOEXEC);
		void *m = MAP_FAILED;
		if (fd >= 0 && ftruncate(fd, sizeof(struct region)) == 0)
			m = DS__REAL(mmap)(NULL, sizeof(struct region), PROT_READ | PROT_WRITE,
			                   MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			if (fd >= 0)
				DS__REAL(close)(fd);
			__atomic_store_n(&reg_failed, 1, __ATOMIC_RELAXED);
		} else {
			struct region *r = m;
			r->magic = REGION_MAGIC;
			r->ncells = CELLS;
			reg_fd = park(fd);
			__atomic_store_n(&reg, r, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
}

void ds__offcell_attach(struct ds__file *f)
{
	struct region *r = region();
	if (!r)
		return;
	/* lowest free first: live and leaked cells are few, pages stay few */
	for (uint32_t i = 0; i < CELLS; i++) {
		int32_t z = 0;
		if (atomic_load_explicit(&r->c[i].ref, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&r->c[i].ref, &z, 1)) {
			atomic_store(&r->c[i].off, 0);
			f->cell = (int32_t)i;
			f->forkgen = forkgen;
			f->offp = &r->c[i].off;
			return;
		}
	}
}

void ds__offcell_put(struct ds__file *f)
{
	struct region *r = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	if (f->cell >= 0 && r)
		atomic_fetch_sub(&r->c[f->cell].ref, 1);
	f->cell = -1;
	f->offp = &f->off;
}

void ds__offcell_bind(struct ds__file *f, int32_t cell, int inc)
{
	if (f->cell >= 0)
		ds__offcell_put(f);
	if (!reg || cell < 0 || (uint32_t)cell >= CELLS)
		return;
	if (inc)
		atomic_fetch_add(&reg->c[cell].ref, 1);
	f->cell = cell;
	f->forkgen = forkgen;
	f->offp = &reg->c[cell].off;
}

/* The child holds every open file of its table once more. */
void ds__offcell_atfork_child(void)
{
	pthread_mutex_init(&reg_lock, NULL);
	if (!reg)
		return;
	forkgen++;
	unsigned h = atomic_load(&ds__fd_hwm);
	for (unsigned fd = 0; fd < h; fd++) {
		struct ds__file *f = (struct ds__file *)DS__FD_FILE(atomic_load(&ds__fdtab[fd]));
		if (f && f->cell >= 0 && f->forkgen != forkgen) {
			f->forkgen = forkgen;
			atomic_fetch_add(&reg->c[f->cell].ref, 1);
		}
	}
}

int ds__offcell_exec_fd(void)
{
	if (!__atomic_load_n(&reg, __ATOMIC_ACQUIRE) || reg_fd < 0 ||
	    DS__REAL(fcntl)(reg_fd, F_SETFD, 0) < 0)
		return -1;
	return reg_fd;
}

void ds__offcell_exec_failed(int fd)
{
	if (fd >= 0)
		DS__REAL(fcntl)(fd, F_SETFD, FD_CLOEXEC);
}

int ds__offcell_adopt(int fd)
{
	struct stat st;
	if (reg || DS__REAL(fstat)(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size != sizeof(struct region))
		return -1;
	void *m = DS__REAL(mmap)(NULL, sizeof(struct region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	struct region *r = m;
	if (r->magic != REGION_MAGIC || r->ncells != CELLS) {
		munmap(m, sizeof(struct region));
		return -1;
	}
	DS__REAL(fcntl)(fd, F_SETFD, FD_CLOEXEC);
	reg_fd = fd;
	ds__fd_private(fd, 1);
	__atomic_store_n(&reg, r, __ATOMIC_RELEASE);
	return 0;
}

/* A normal exit (exit(), return from main) gives back this process's holds,
 * so short programs run from a shell (head, cat) leak nothing. */
__attribute__((destructor)) static void offcell_exit(void)
{
	struct region *r = __atomic_load_n(&reg, __ATOMIC_ACQUIRE);
	if (!r || !ds__fdtab || !ds__owner())
		return;
	forkgen++;
	unsigned h = atomic_load(&ds__fd_hwm);
	for (unsigned fd = 0; fd < h; fd++) {
		struct ds__file *f = (struct ds__file *)DS__FD_FILE(atomic_load(&ds__fdtab[fd]));
		if (f && f->cell >= 0 && f->forkgen != forkgen) {
			/* whatever still runs after us reads at an offset of
			 * its own, never in a cell another process may take */
			f->forkgen = forkgen;
			atomic_store(&f->off, atomic_load(f->offp));
			f->offp = &f->off;
			atomic_fetch_sub(&r->c[f->cell].ref, 1);
			f->cell = -1;
		}
	}
}
