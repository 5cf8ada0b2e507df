/* SPDX-License-Identifier: BSD-3-Clause */
/* ixhuge.c: the node index in 2 MiB pages (issue 27; docs/shim.md "The
 * index in 2 MiB pages", the measurements in docs/performance.md).
 *
 * A process that maps the index afresh pays a page fault for every 64 KiB
 * of it that it touches first (the kernel maps 16 pages around each fault),
 * ~4 us each here; a lookup touches a random row and a random name block,
 * so in a big index nearly every lookup of a fresh reader is one or two new
 * faults, and a reader that looks up enough names maps the whole index
 * page by page (0.25 us per 4 KiB: ~6 ms at 2M names, ~40 ms at 14M, in
 * every process).  Mapping it in advance (MADV_POPULATE_READ) costs the
 * same per page: it only moves the cost.  What makes it flat is a mapping
 * in 2 MiB pages: one fault maps 512 pages, and the TLB covers the index.
 *
 * Two halves, no copy and no memory of our own:
 *  - the writer (ds_index_write: stage, mkstore) asks the kernel to collapse
 *    the file's page cache into 2 MiB folios (MADV_COLLAPSE, Linux 6.1),
 *    once per node: the page cache is shared by every process that maps
 *    the file, and MADV_COLLAPSE works on tmpfs mounted without huge= and
 *    whatever the THP sysfs settings (but "deny");
 *  - every reader maps the index at a 2 MiB-aligned address
 *    (ds__map_ro_aligned, from ds_index_open), which the kernel needs to map
 *    a 2 MiB folio with one page-table entry; tmpfs without huge= does not
 *    align a mapping by itself.
 * With the page cache in 4 KiB folios the alignment alone changes nothing;
 * where it holds 2 MiB folios already (tmpfs mounted huge=within_size,
 * ext4 on 6.18 with its large folios: docs/performance.md) it is enough.
 * Both fail soft: an older kernel, THP off, or no 2 MiB of contiguous
 * memory at stage time leave the index in 4 KiB pages, as before.
 * DSTAGE_INDEX_HUGE=0 turns the collapse off (for measurements). */
#include "dscommon.h"
#include "dsindex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

#define HUGE_SZ ((size_t)2 << 20) /* a PMD on x86-64 and arm64 with 4 KiB pages */

void *ds__map_ro_aligned(int fd, size_t len)
{
	if (len < HUGE_SZ)
		return mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	/* reserve room for an aligned start, map the file over it, give the
	 * slack back: three calls more than a plain mmap, only for an index
	 * of 2 MiB and more (~40k names) */
	size_t room = len + HUGE_SZ;
	char *r = mmap(NULL, room, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	char *a = (char *)(((uintptr_t)r + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
	if (mmap(a, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
		int e = errno;
		munmap(r, room);
		errno = e;
		return MAP_FAILED;
	}
	if (a > r)
		munmap(r, (size_t)(a - r));
	size_t pg = (size_t)getpagesize();
	size_t end = (size_t)(a - r) + (len + pg - 1) / pg * pg;
	if (end < room)
		munmap(r + end, room - end);
	return a;
}

int ds_index_hugify(const char *path)
{
	const char *e = getenv("DSTAGE_INDEX_HUGE");
	if (e && !strcmp(e, "0"))
		return 0;
	struct ds_index ix;
	int rc = ds_index_open(&ix, path, 0);
	if (rc)
		return rc;
	size_t whole = ix.map_len & ~(HUGE_SZ - 1); /* the tail stays in 4 KiB pages */
	rc = 0;
	if (whole && madvise((void *)ix.h, whole, MADV_COLLAPSE) < 0) {
		rc = -errno;
		/* EINVAL: a kernel before 6.1, THP off, or a file system whose
		 * page cache the call does not collapse (ext4: its own large
		 * folios may be 2 MiB already); EAGAIN/ENOMEM: no 2 MiB of
		 * contiguous memory now.  The index works in 4 KiB pages. */
		ds_info("'%s': not collapsed into 2 MiB pages (MADV_COLLAPSE: %s)", path,
		        strerror(-rc));
	}
	ds_index_close(&ix);
	return rc;
}
