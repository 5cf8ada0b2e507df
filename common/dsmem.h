/* SPDX-License-Identifier: BSD-3-Clause */
/* dsmem.h: the RAM budget of a node-local directory (common/membudget.c).
 *
 * Bytes written to a RAM file system (tmpfs such as /dev/shm, ramfs) are the
 * writer's memory: the kernel charges every page to the memory cgroup of the
 * process that wrote it, for as long as the file exists.  Inside a Slurm job
 * with --mem (task/cgroup, ConstrainRAMSpace) that is the job's cgroup, and a
 * stage that fills /dev/shm past the job's limit gets the job OOM-killed even
 * though statvfs says the file system has room.  ds_ram_room answers "how
 * many bytes may still land in DIR without taking the training processes'
 * memory": the least of the file system's free space and, for every memory
 * cgroup the process is in up to the root it can see (cgroup v1 and v2 both,
 * found from /proc/self/cgroup and /proc/self/mountinfo), that cgroup's
 * limit minus its usage minus a headroom kept for training.  The guide
 * (docs/guide.md, "The RAM budget") explains the default headroom.
 * libc only: used by stage, the service and (for a spill decision) their
 * callers. */
#ifndef DSMEM_H
#define DSMEM_H

#include <stddef.h>
#include <stdint.h>

/* The memory kept free for training under each cgroup limit: the largest of
 * bytes, per_rank * ranks and pct % of that cgroup's limit. */
struct ds_headroom {
	uint64_t bytes;    /* a fixed amount */
	uint64_t per_rank; /* an amount per rank of the job step on this node */
	unsigned ranks;    /* ranks of the step on this node (0 counts as 1) */
	unsigned pct;      /* a share of the limit, 0..99 */
};

/* The default (--ram-headroom not given): 25 % of the limit, and at least
 * 8 GiB per rank on the node: what a ResNet-50 data-parallel rank (PyTorch,
 * CUDA context, 8 DataLoader workers, pinned batches) takes on the host,
 * with a margin (docs/guide.md, "The RAM budget"). */
#define DS_HEADROOM_DEFAULT_PCT 25u
#define DS_HEADROOM_DEFAULT_PER_RANK (8ull << 30)

/* The default headroom for a step with `ranks` ranks on this node. */
void ds_headroom_default(struct ds_headroom *h, unsigned ranks);
/* --ram-headroom: "SIZE" (ds_parse_size: "2GiB", "0"), "N%" (0..99), or
 * both, "SIZE,N%" (the larger of the two under each limit).
 * Replaces *h wholly (the default's per-rank part no longer applies).
 * 0 or -EINVAL / -ERANGE. */
int ds_headroom_parse(const char *s, struct ds_headroom *h);
/* The option --ram-headroom of stage, serve and run (one check, one
 * message for all): 1 with *h set, or 0 with the reason logged and *bad set. */
int ds_headroom_opt(const char *arg, struct ds_headroom *h, int *bad);
/* The headroom kept under a limit of `limit` bytes. */
uint64_t ds_headroom_bytes(const struct ds_headroom *h, uint64_t limit);

#define DS_ROOM_NONE UINT64_MAX /* no limit */

struct ds_room {
	uint64_t room;     /* bytes that may still land in the directory */
	uint64_t free;     /* the file system's free bytes (f_bavail; ramfs: MemAvailable) */
	int is_ram;        /* tmpfs or ramfs: its bytes are the writer's memory */
	int cgroup_v;      /* 1 or 2: the version of the cgroup that bounds room; 0: none does */
	uint64_t limit;    /* that cgroup's limit, or DS_ROOM_NONE */
	uint64_t usage;    /* its usage, reclaimable file cache (inactive_file) left out */
	uint64_t headroom; /* the headroom kept under its limit */
	char cgroup[512];  /* its directory (/sys/fs/cgroup/memory/slurm/uid_1/job_7), or "" */
	const char *why;   /* what bounds room: "free space", "available memory" (the
	                    * host's MemAvailable), "cgroup v1 memory limit",
	                    * "cgroup v2 memory.max", "cgroup v2 memory.high" */
};

/* Fill *out for directory dir (which must exist) and headroom h (NULL: the
 * default for one rank).  On a file system that is not RAM, room is the
 * free space and no cgroup is looked at.  A cgroup file that cannot be read
 * is skipped (logged at debug): the budget is then the tightest of those
 * that could.  0, or -errno when dir cannot be examined (statfs). */
int ds_ram_room(const char *dir, const struct ds_headroom *h, struct ds_room *out);

/* "cgroup v1 memory limit 32.0 MiB ('/sys/fs/cgroup/memory/x'): usage 1.2 MiB,
 * headroom 0 B", "free space 2.0 GiB" or "available memory 3.1 GiB" into
 * buf.  Returns buf. */
char *ds_room_describe(const struct ds_room *r, char *buf, size_t len);

#endif
