/* SPDX-License-Identifier: BSD-3-Clause */
/* dsproto.h: what readers (the shim) and the node service say to each other,
 * and the counters they share.  libc only.
 *
 * The service listens on NODEDIR/sock (AF_UNIX, SOCK_STREAM, mode 0600 in the
 * 0700 node directory) and checks every peer's uid with SO_PEERCRED.  A
 * reader keeps one connection per thread and sends requests one at a time;
 * the service serves many connections in parallel.
 *
 * Request:  struct ds_req (32 bytes).
 * Response: struct ds_resp, then resp.len bytes of data when status == 0.
 *
 *   DS_OP_READ  id, off, len: `len` STORED bytes of entry `id` from offset
 *               `off` of its stored bytes (zlib files are inflated by the
 *               reader), fetched from a node that holds them.  len may be
 *               short only at the end of the stored bytes.
 *   DS_OP_PING  no data; status 0 when the service is up.
 *   DS_OP_EPOCH off = epoch a reader on this node has started (it opened
 *               the epoch's list); lets the service keep prefetching ahead.
 *
 * A reader that gets no answer within its timeout (DSTAGE_TIMEOUT seconds,
 * default 30) fails the read with EIO: it never hangs. */
#ifndef DSPROTO_H
#define DSPROTO_H

#include "dsstore.h" /* DS_SOCK_NAME, DS_STATS_NAME */

#include <stdint.h>

#define DS_PROTO_MAGIC 0x44535131u /* "DSQ1" */
#define DS_MAX_READ (64u << 20) /* largest len of one DS_OP_READ */

enum ds_op { DS_OP_READ = 1, DS_OP_PING = 2, DS_OP_EPOCH = 3 };

struct ds_req {
	uint32_t magic;
	uint32_t op;
	uint32_t id;
	uint32_t pad;
	uint64_t off;
	uint64_t len;
};

struct ds_resp {
	uint32_t magic;
	int32_t status; /* 0 or -errno */
	uint64_t len;   /* bytes of data that follow */
};

/* NODEDIR/stats: counters shared by every reader process on the node and the
 * service (MAP_SHARED, updated with __atomic_fetch_add, relaxed).  Created
 * zeroed by stage; readers that cannot map it count nothing. */
#define DS_STATS_MAGIC 0x5354415453445331ull /* "1SDSTATS" */
/* of struct ds_stats; readers check the magic only */
#define DS_STATS_VERSION 1u
struct ds_stats {
	uint64_t magic;
	uint64_t version;
	/* readers (the shim) */
	uint64_t opens;          /* staged files opened */
	uint64_t local_reads;    /* opens served from this node's store */
	uint64_t local_bytes;
	uint64_t cache_reads;    /* opens served from the epoch cache */
	uint64_t cache_bytes;
	uint64_t remote_reads;   /* opens that needed the service */
	uint64_t remote_bytes;
	uint64_t stalls;         /* reads that waited for a fetch in flight */
	uint64_t read_errors;    /* EIO returned to a reader */
	/* the service */
	uint64_t served_reads;   /* DS_OP_READ answered */
	uint64_t served_bytes;
	uint64_t epoch;          /* epoch readers are in */
	uint64_t prefetch_epoch; /* epoch being prefetched */
	uint64_t prefetch_done;  /* samples of prefetch_epoch fetched */
	uint64_t prefetch_total; /* samples of prefetch_epoch to fetch */
	uint64_t fetched_bytes;  /* bytes moved in by the shuffle, all epochs */
	uint64_t reserved[14];
};

#endif
