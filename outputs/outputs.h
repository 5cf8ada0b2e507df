/* SPDX-License-Identifier: BSD-3-Clause */
/* outputs.h: the inside of outputs/, shared by its files and private to
 * them (t/0001-modules.t); the face is dsoutputs.h. */
#ifndef DS_OUTPUTS_OUTPUTS_H
#define DS_OUTPUTS_OUTPUTS_H

#include "dscommon.h"
#include "dsoutputs.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

struct ds__drain;

/* the host's services (dsoutputs.h) */
static inline int ds__out_rank_of(const struct ds_out_host *h, uint32_t node)
{
	return h->rank_of(h->ctx, node);
}
static inline void ds__out_poke(const struct ds_out_host *h, int rank)
{
	if (h->poke)
		h->poke(h->ctx, rank);
}
#define DS__OUT_COUNT(h, field, n) \
	__atomic_fetch_add(&(h)->stats->field, (uint64_t)(n), __ATOMIC_RELAXED)

enum ds__dstate { DS_D_NONE = 0, DS_D_QUEUED, DS_D_DRAINING, DS_D_DRAINED, DS_D_FAILED };

/* A closed output this node knows (every node knows every one). */
struct ds__orec {
	struct ds__orec *next;
	char *path;        /* current name, relative to the outputs root */
	uint64_t size, seq;
	int64_t mtime_ns;
	uint32_t crc, mode, holder;
	int summed;        /* crc is known (the holder sums a file after its
	                    * close, off the writer's path: sum.c) */
	int sum_err;       /* its sum failed: no fetch, no drain */
	double t_closed;   /* the holder: when it was published */
	int local;         /* its bytes are in this node's AREA/ns */
	int fetching, fetch_err;
	int gone;          /* unlinked or replaced */
	/* the holder's drain */
	int dstate;        /* enum ds__dstate */
	char *dpath;       /* name in the drain directory once drained */
	/* --outputs-replicas (outrepl.c): the other nodes holding its bytes */
	uint32_t nrepl, repl[DS_OUT_MAX_REPL];
	int repl_drained; /* a replica: the holder reported it drained */
};

/* snprintf whose truncation the callers check where it matters (names are
 * bounded by PATH_MAX on the way in) */
int ds__out_pfmt(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* outputs.c, for drain.c (the state's mutex is held where it says so) */
pthread_mutex_t *ds__out_mutex(struct ds_out *o);
int ds__out_nsfd(struct ds_out *o); /* AREA/ns, by descriptor */
uint32_t ds__out_node(struct ds_out *o);
const struct ds_out_host *ds__out_host(struct ds_out *o);
const struct ds_out_opts *ds__out_opts(struct ds_out *o);
struct ds__orec *ds__out_find(struct ds_out *o, const char *path);
/* the output published by change seq, whatever its name now (outrepl.c) */
struct ds__orec *ds__out_find_seq(struct ds_out *o, uint64_t seq);
int ds__out_fetch_locked(struct ds_out *o, const char *path);
/* wake the service's main loop (it checks the drain waits) */
void ds__out_wake(struct ds_out *o);
/* wait (mutex held, at most a tenth of a second) for a sum to end */
void ds__out_wait_summed(struct ds_out *o);
/* the CRC-32C of r as outputs.status shows it: 8 hex digits, or "--------"
 * while the holder has not summed it yet */
const char *ds__out_crc_str(const struct ds__orec *r, char buf[9]);
/* rewrite NODEDIR/outputs.status (mutex NOT held) */
void ds__out_status_write(struct ds_out *o);
/* the same, mutex held (outrepl.c: a replica's status before its ack) */
void ds__out_status_write_held(struct ds_out *o);
/* outrepl.c's state, and the area's directory of files in flight */
struct ds__orepl *ds__out_repl(struct ds_out *o);
int ds__out_wfd(struct ds_out *o); /* AREA/w, by descriptor */

/* drain.c: copies of the held outputs to --drain-to, oldest first, each
 * durable (temporary name, fsync, rename, fsync of the directory) before it
 * counts as drained.  All but new/end/free with the outputs mutex held. */
int ds__drain_new(struct ds_out *o, const struct ds_out_opts *so, struct ds__drain **out);
/* the drain directory (its real path) */
const char *ds__drain_dir(const struct ds__drain *d);
void ds__drain_add(struct ds__drain *d, struct ds__orec *r);
/* r was replaced (unlink_copy 0: its drained copy stays until the new one
 * replaces it) or unlinked (1: its drained copy goes too). */
void ds__drain_forget(struct ds__drain *d, struct ds__orec *r, int unlink_copy);
void ds__drain_rename(struct ds__drain *d, struct ds__orec *r, const char *newpath);
/* A mark of everything queued so far; has the drain passed it (*status
 * -EIO when some file failed)? */
uint64_t ds__drain_mark(struct ds__drain *d);
int ds__drain_reached(struct ds__drain *d, uint64_t mark, int *status);
int ds__drain_pending(struct ds__drain *d);
void ds__drain_status(struct ds__drain *d, struct ds_buf *b);
/* Stop the thread (mutex not held); report and count what is not drained. */
int ds__drain_end(struct ds__drain *d);
void ds__drain_free(struct ds__drain *d);
/* The directory of rel (relative to the drain directory dfd) by descriptor,
 * component by component with O_NOFOLLOW, made (and made durable) when
 * missing with create; the descriptor or -errno, *base rel's last name. */
int ds__drain_dirat(int dfd, const char *rel, int create, const char **base);
/* Read a whole store file (outputs.status: one line per output, any
 * number of them): its length with *text (malloc'd, NUL-terminated), or
 * -errno (-ENOENT: none). */
ssize_t ds__out_read_text(const char *path, char **text);

#endif
