/* SPDX-License-Identifier: BSD-3-Clause */
/* sread.c: large reads of local files with pread from a kept descriptor of
 * the node store, instead of memcpy out of the mapping.
 *
 * A process that reads a file once faults the mapped store in as it copies:
 * one minor fault per 64 KiB (the kernel's fault-around), each one setting
 * up 16 page-table entries the process never uses again.  pread copies the
 * same page-cache pages with no page table at all, the way a read of the
 * file on tmpfs does.  Reads of at least PREAD_MIN bytes take this path
 * (DSTAGE_PREAD_MIN overrides it, 0 turns it off: for measurements);
 * smaller ones stay with memcpy, where one fault serves 16 neighbouring
 * small files, when the reader goes through the files in store order.  A
 * shuffled reader (a DataLoader's sampler) of a big store does not: each
 * small file is a fault of its own (~4 us here, 16 page-table entries of
 * which it uses one or two, torn down again at exit), 0.99 faults a file
 * reading 3,000 random 4 KiB files of a 300k-file store, 0.083 with the
 * rule below (docs/performance.md "The node index in 2 MiB pages", t/2110).
 * So the read of a file from its start decides for all the small reads of
 * that open file (ds__store_small): they
 * take pread too unless it is the process's first file (a process that
 * reads one file opens no descriptor: cat costs what it did), or it starts
 * in the 64 KiB window where the last read of the store ended or the next
 * one (the store-order reader, whose fault maps what it reads next), or it
 * lies in a window this process read a file of before (a reader of much of
 * the store in random order: the fault serves the window's other files;
 * reading each 4 KiB file of a region once in random order, pread for all
 * took 4.6-4.9 us a file where copies took 3.5-3.7).  Reads of a file not
 * read from its start (HDF5 at its offsets) copy, as before.
 * With DSTAGE_PREAD_MIN set, the size alone decides (measurements).
 *
 * The descriptor is the shim's own (private, fdtab.c): opened at the first
 * large read, O_RDONLY|O_CLOEXEC, parked high like the reservation, checked
 * to be the very file mapped (dev and ino, recorded when it was mapped).
 * The program cannot close it (EBADF) or lose a dup2 onto it (the shim
 * moves out of the way).  A raw close_range behind the shim's back may hand
 * its number to a file of the program: every read first checks the number
 * is still the store (one fstat) and, when it is not, forgets it (never
 * closes it: it is the program's) and copies out of the mapping.  Any
 * failure of pread (but EFAULT, reported as the kernel's read would) falls
 * back to the mapping as well: this path can only be faster, never
 * different. */
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>

/* Below this, memcpy from the mapping (one fault per 64 KiB, shared with
 * neighbours) beats two system calls; chosen by bench/rab.sh. */
#define PREAD_MIN (64u << 10)

/* Per tier of the store (0: NODEDIR/store, 1: the spill tier's file,
 * dsindex.h): a file read lies whole in one tier. */
static _Atomic int sfd[2] = {-1, -1};  /* the store file, private; -1: not open */
static _Atomic int sfd_off[2];         /* could not open it: use the mapping */
static _Atomic int sfd_opening[2];     /* a thread is opening it */
static _Atomic long pmin = -1; /* the threshold, once read */
static _Atomic int pmin_set;   /* DSTAGE_PREAD_MIN was given: no guess */
/* The 64 KiB window (the kernel's fault-around) where the last read of the
 * store ended, + 1 (0: none yet): a hint, shared by threads, racy by design
 * (a wrong guess costs a fault or a system call, never a byte). */
#define WIN_SHIFT 16
static _Atomic uint64_t last_win;
/* One bit per window of the store where a file was read from its start out
 * of store order (seen_map): a reader that comes back to a window (it reads
 * a large part of the store, every file once in random order: bench/rab.sh)
 * copies from then on, and its one fault serves the window's other files. */
static unsigned char *_Atomic seen;
static _Atomic int seen_state; /* 0 not made, 1 being made, 2 made, 3 cannot be */

static size_t threshold(void)
{
	long v = atomic_load_explicit(&pmin, memory_order_relaxed);
	if (DS__LIKELY(v >= 0))
		return v ? (size_t)v : SIZE_MAX;
	const char *e = getenv("DSTAGE_PREAD_MIN");
	char *end;
	long n = e && *e ? strtol(e, &end, 10) : -1;
	if (!e || !*e || *end || n < 0)
		n = PREAD_MIN;
	else
		atomic_store_explicit(&pmin_set, 1, memory_order_relaxed);
	atomic_store_explicit(&pmin, n, memory_order_relaxed);
	return n ? (size_t)n : SIZE_MAX;
}

static int is_store(int fd, int t)
{
	struct stat st;
	return DS__REAL(fstat)(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       st.st_dev == (t ? ds__g.spill_dev : ds__g.store_dev) &&
	       st.st_ino == (t ? ds__g.spill_ino : ds__g.store_ino) &&
	       (uint64_t)st.st_size >= (t ? ds__g.store_len - ds__g.ram_len : ds__g.ram_len);
}

/* The descriptor, opened now if need be; -1: use the mapping.  Only the
 * owner opens it (a vfork child shares the shim's memory, not its
 * descriptors); nobody waits (read is async-signal-safe): while one thread
 * opens it, the others copy from the mapping.  (A fork in that moment
 * leaves the child on the mapping for good: slower, never wrong.) */
static int sfd_get(int t)
{
	int fd = atomic_load_explicit(&sfd[t], memory_order_acquire), z = 0;
	if (DS__LIKELY(fd >= 0) || atomic_load_explicit(&sfd_off[t], memory_order_relaxed) ||
	    ds__busy || !ds__owner() || !atomic_compare_exchange_strong(&sfd_opening[t], &z, 1))
		return fd;
	fd = atomic_load(&sfd[t]);
	if (fd < 0) {
		char path[PATH_MAX + 16];
		ds__busy++;
		if (t)
			snprintf(path, sizeof(path), "%s", ds__spill_store);
		else
			ds_store_path(path, sizeof(path), ds__g.nodedir, DS_STORE_NAME);
		fd = DS__REAL(open)(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && !is_store(fd, t)) {
			DS__REAL(close)(fd);
			fd = -1;
		}
		if (fd < 0) {
			atomic_store(&sfd_off[t], 1); /* replaced or gone: the mapping it is */
		} else {
			fd = ds__fd_high(fd, 80 + t);
			if ((unsigned)fd < ds__fdtab_len) {
				ds__fd_private(fd, 1);
				atomic_store_explicit(&sfd[t], fd, memory_order_release);
			} else {
				DS__REAL(close)(fd);
				fd = -1;
				atomic_store(&sfd_off[t], 1);
			}
		}
		ds__busy--;
	}
	atomic_store(&sfd_opening[t], 0);
	return fd;
}

/* fd is not the store any more (the program's file took the number after a
 * raw close): forget it, never close it; the next large read opens anew. */
static void sfd_forget(int fd, int t)
{
	int cur = fd;
	if (atomic_compare_exchange_strong(&sfd[t], &cur, -1) && ds__owner())
		ds__fd_private(fd, 0);
}

/* The bitmap of windows, made at the first file read out of store order:
 * store_len / 512 KiB bytes of anonymous memory (40 KB for a 20 GB store),
 * touched only where files are read.  NULL while another thread makes it,
 * or when it cannot be had (then small reads copy, as before). */
static unsigned char *seen_map(void)
{
	int st = atomic_load_explicit(&seen_state, memory_order_acquire), z = 0;
	if (DS__LIKELY(st == 2))
		return atomic_load_explicit(&seen, memory_order_relaxed);
	if (st || !atomic_compare_exchange_strong(&seen_state, &z, 1))
		return NULL;
	size_t bytes = (ds__g.store_len >> WIN_SHIFT) / 8 + 1;
	unsigned char *m = DS__REAL(mmap)(NULL, bytes, PROT_READ | PROT_WRITE,
	                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		atomic_store_explicit(&seen_state, 3, memory_order_release);
		return NULL;
	}
	atomic_store_explicit(&seen, m, memory_order_relaxed);
	atomic_store_explicit(&seen_state, 2, memory_order_release);
	return m;
}

static int seen_test_set(unsigned char *m, uint64_t w)
{
	unsigned char bit = (unsigned char)(1u << (w & 7));
	if (!ds__owner()) /* a vfork child changes nothing of the parent's */
		return __atomic_load_n(&m[w >> 3], __ATOMIC_RELAXED) & bit;
	return __atomic_fetch_or(&m[w >> 3], bit, __ATOMIC_RELAXED) & bit;
}

int ds__store_small(uint64_t so, uint64_t size)
{
	threshold(); /* reads DSTAGE_PREAD_MIN once */
	if (atomic_load_explicit(&pmin_set, memory_order_relaxed))
		return 0;
	uint64_t w0 = so >> WIN_SHIFT, w1 = (so + (size ? size : 1) - 1) >> WIN_SHIFT;
	uint64_t last = atomic_load_explicit(&last_win, memory_order_relaxed);
	if (!last || w0 + 1 == last || w0 == last)
		return 0; /* the process's first file, or store order */
	unsigned char *m = seen_map();
	if (!m)
		return 0;
	int was = seen_test_set(m, w0);
	if (w1 != w0)
		was |= seen_test_set(m, w1);
	return !was; /* a window read before: map it (its fault serves what follows) */
}

void ds__store_note(uint64_t end)
{
	if (ds__owner()) /* a vfork child changes nothing of the parent's */
		atomic_store_explicit(&last_win, ((end - 1) >> WIN_SHIFT) + 1, memory_order_relaxed);
}

ssize_t ds__store_read(void *buf, size_t k, uint64_t so, int small)
{
	if (k < threshold() && !small)
		return 0;
	/* the tier: the spill file holds the store from ram_len on */
	int t = so >= ds__g.ram_len;
	if (!t && so + k > ds__g.ram_len)
		return 0; /* across the tiers (no file is): the mapping */
	uint64_t fo = t ? so - ds__g.ram_len : so;
	int fd = sfd_get(t);
	if (fd < 0)
		return 0;
	if (!is_store(fd, t)) {
		sfd_forget(fd, t);
		return 0;
	}
	int saved = errno;
	size_t done = 0;
	while (done < k) {
		ssize_t r = DS__REAL(pread)(fd, (char *)buf + done, k - done, (off_t)(fo + done));
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EFAULT) { /* the caller's buffer: as read(2) says */
			errno = saved;
			return done ? (ssize_t)done : -EFAULT;
		}
		/* anything else (EOF included): the rest from the mapping */
		memcpy((char *)buf + done, ds__g.store + so + done, k - done);
		done = k;
	}
	errno = saved;
	return (ssize_t)k;
}
