/* SPDX-License-Identifier: BSD-3-Clause */
/* fetch.c: the bytes of an output another node holds, moved on demand (an
 * OPEN of its placeholder): FETCH to the holder, which answers, once its
 * sum is known, with a header (size, CRC-32C) and the bytes in chunks on
 * a second communicator; the copy is checked against the CRC, then renamed
 * over the placeholder.  Main only (mu held). */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define pfmt ds__out_pfmt
#define CHUNK (16u << 20)

static int nchunks(uint64_t size) { return (int)((size + CHUNK - 1) / CHUNK); }

static void xfer_free(struct ds__oxfer *x)
{
	if (x->map && x->map != MAP_FAILED)
		munmap(x->map, x->size);
	if (x->fd >= 0)
		close(x->fd);
	free(x->reqs);
	free(x->path);
	free(x);
}

/* the holder: send path's bytes to node peer under transfer id xfer */
void ds__fetch_serve(struct ds_out *o, const struct ds__omsg *m, int peer)
{
	struct ds__omsg h;
	memset(&h, 0, sizeof(h));
	h.xfer = m->xfer;
	pfmt(h.path, sizeof(h.path), "%s", m->path);
	struct ds__orec *r = ds__out_find(o, m->path);
	if (r && r->local && r->holder == o->h.node && !r->summed) {
		/* closed a moment ago, not summed yet: answered when it is
		 * (ds_out_poll), so that the copy is checked against it */
		struct ds__odefer *f = ds_xcalloc(1, sizeof(*f));
		f->m = *m;
		f->peer = peer;
		f->next = o->fdefer;
		o->fdefer = f;
		return;
	}
	char p[PATH_MAX];
	struct ds__oxfer *x = ds_xcalloc(1, sizeof(*x));
	x->fd = -1;
	if (!r || !r->local || r->holder != o->h.node || ds__out_nspath(o, m->path, p)) {
		h.status = -ENOENT;
	} else if (r->sum_err) {
		h.status = r->sum_err;
	} else {
		x->fd = openat(o->nsfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (x->fd < 0 || fstat(x->fd, &st) < 0 || (uint64_t)st.st_size != r->size)
			h.status = -EIO;
		else if (r->size && (x->map = mmap(NULL, r->size, PROT_READ, MAP_SHARED, x->fd,
		                                   0)) == MAP_FAILED)
			h.status = -errno;
		h.size = r->size;
		h.crc = r->crc;
		h.seq = r->seq;
		h.mode = r->mode;
		h.mtime_ns = r->mtime_ns;
	}
	ds__out_send(o, peer, DS__OUT_T_FHDR, &h);
	if (h.status || !h.size) {
		if (x->map == MAP_FAILED)
			x->map = NULL;
		xfer_free(x);
		return;
	}
	x->size = h.size;
	x->nreq = nchunks(h.size);
	x->reqs = ds_xcalloc((size_t)x->nreq, sizeof(MPI_Request));
	for (int i = 0; i < x->nreq; i++) {
		uint64_t off = (uint64_t)i * CHUNK,
			 len = h.size - off < CHUNK ? h.size - off : CHUNK;
		MPI_Isend((char *)x->map + off, (int)len, MPI_BYTE, peer, m->xfer, o->dc,
		          &x->reqs[i]);
	}
	x->xfer = m->xfer;
	x->peer = peer;
	x->next = o->xfers;
	o->xfers = x;
	DS__OUT_COUNT(&o->h, served_bytes, h.size);
}

void ds__fetch_end(struct ds_out *o, struct ds__orec *r, int rc)
{
	if (r) {
		r->fetching = 0;
		r->fetch_err = rc;
	}
	pthread_cond_broadcast(&o->fetched);
}

/* the fetcher: the holder's header arrived */
void ds__fetch_header(struct ds_out *o, const struct ds__omsg *h, int peer)
{
	struct ds__orec *r = ds__out_find(o, h->path);
	if (h->status) {
		ds__fetch_end(o, r, h->status);
		return;
	}
	struct ds__oxfer *x = ds_xcalloc(1, sizeof(*x));
	x->in = 1;
	x->xfer = h->xfer;
	x->peer = peer;
	x->path = ds_xstrdup(h->path);
	x->size = h->size;
	x->crc = h->crc;
	x->seq = h->seq;
	x->mode = h->mode;
	x->mtime_ns = h->mtime_ns;
	pfmt(x->tmp, sizeof(x->tmp), "f.%d", h->xfer);
	x->fd = openat(o->wfd, x->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = x->fd < 0 ? -errno : 0;
	if (!rc && h->size && (rc = -posix_fallocate(x->fd, 0, (off_t)h->size)) == 0 &&
	    (x->map = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0)) ==
	            MAP_FAILED) {
		x->map = NULL;
		rc = -errno;
	}
	x->nreq = h->size ? nchunks(h->size) : 0;
	x->reqs = ds_xcalloc((size_t)x->nreq + 1, sizeof(MPI_Request));
	if (rc) {
		ds_error("node %u: '%s': cannot fetch from node %d: %s", o->h.node, h->path, peer,
		         ds_strerror(rc));
		/* the holder sends anyway: take its bytes and drop them */
		void *junk = ds_xmalloc(CHUNK);
		for (int i = 0; i < x->nreq; i++) {
			uint64_t off = (uint64_t)i * CHUNK,
				 len = h->size - off < CHUNK ? h->size - off : CHUNK;
			MPI_Recv(junk, (int)len, MPI_BYTE, peer, h->xfer, o->dc, MPI_STATUS_IGNORE);
		}
		free(junk);
		unlinkat(o->wfd, x->tmp, 0);
		xfer_free(x);
		ds__fetch_end(o, r, rc);
		return;
	}
	for (int i = 0; i < x->nreq; i++) {
		uint64_t off = (uint64_t)i * CHUNK,
			 len = h->size - off < CHUNK ? h->size - off : CHUNK;
		MPI_Irecv((char *)x->map + off, (int)len, MPI_BYTE, peer, h->xfer, o->dc,
		          &x->reqs[i]);
	}
	x->next = o->xfers;
	o->xfers = x;
}

static void fetch_complete(struct ds_out *o, struct ds__oxfer *x)
{
	struct ds__orec *r = ds__out_find(o, x->path);
	int rc = 0;
	uint32_t crc = x->size ? ds_crc32c(0, x->map, x->size) : 0;
	if (crc != x->crc)
		rc = -DS_ECHECKSUM;
	struct timespec ts[2] = {{x->mtime_ns / 1000000000ll, x->mtime_ns % 1000000000ll},
	                         {x->mtime_ns / 1000000000ll, x->mtime_ns % 1000000000ll}};
	char p[PATH_MAX];
	if (!rc && (fchmod(x->fd, x->mode & 07777) < 0 || futimens(x->fd, ts) < 0))
		rc = -errno;
	if (!rc && (!r || r->seq != x->seq))
		rc = -ESTALE; /* replaced or removed meanwhile */
	if (!rc && (ds__out_nspath(o, x->path, p) || renameat(o->wfd, x->tmp, o->nsfd, p) < 0))
		rc = -EIO;
	if (rc) {
		unlinkat(o->wfd, x->tmp, 0);
		if (rc != -ESTALE)
			ds_error("node %u: '%s' from node %d: %s", o->h.node, x->path, x->peer,
			         ds_strerror(rc));
	} else {
		r->local = 1;
		r->crc = x->crc;
		r->summed = 1;
		DS__OUT_COUNT(&o->h, fetched_bytes, x->size);
	}
	ds__fetch_end(o, r, rc == -ESTALE ? -EAGAIN : rc);
}

void ds__fetch_poll(struct ds_out *o)
{
	for (struct ds__oxfer **pp = &o->xfers; *pp;) {
		struct ds__oxfer *x = *pp;
		int done = 1;
		for (int i = 0; i < x->nreq && done; i++) {
			int d1 = 0;
			MPI_Test(&x->reqs[i], &d1, MPI_STATUS_IGNORE);
			done = d1;
		}
		if (!done) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		if (x->in)
			fetch_complete(o, x);
		xfer_free(x);
	}
}
