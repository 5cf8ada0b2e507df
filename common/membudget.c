/* SPDX-License-Identifier: BSD-3-Clause */
/* membudget.c: the RAM budget of a node-local directory (dsmem.h).
 *
 * Pages of a tmpfs or ramfs file are charged to the memory cgroup of the
 * process that wrote them, and every ancestor of that cgroup counts them in
 * its usage too; so the room under each limit is limit - usage, and the room
 * in the directory is the least of those and the free space.  Usage leaves
 * out inactive file cache (the pack just read from the shared file system,
 * say): the kernel drops it before it kills anybody.  tmpfs pages are
 * swap-backed and sit on the anon LRU, never in inactive_file, so they are
 * always counted.  Both hierarchies are read when both are mounted (a
 * hybrid host: v1 memory controller, v2 beside it without it, or the other
 * way round); a level whose files are missing (v2 without the memory
 * controller, the root) is skipped. */
#include "dscommon.h"
#include "dsmem.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

/* v1 reports "no limit" as PAGE_COUNTER_MAX pages, about 2^63 bytes. */
#define V1_UNLIMITED (1ull << 62)

void ds_headroom_default(struct ds_headroom *h, unsigned ranks)
{
	memset(h, 0, sizeof(*h));
	h->per_rank = DS_HEADROOM_DEFAULT_PER_RANK;
	h->ranks = ranks;
	h->pct = DS_HEADROOM_DEFAULT_PCT;
}

/* One item of --ram-headroom: "N%" into v->pct, or a size into v->bytes. */
static int headroom_item(const char *s, size_t n, struct ds_headroom *v)
{
	char item[64];
	if (!n || n >= sizeof(item))
		return -EINVAL;
	memcpy(item, s, n);
	item[n] = 0;
	if (item[n - 1] == '%') {
		uint64_t p;
		item[n - 1] = 0;
		if (!item[0] || ds_parse_u64(item, &p) < 0)
			return -EINVAL;
		if (p > 99)
			return -ERANGE;
		v->pct = (unsigned)p;
		return 0;
	}
	return ds_parse_size(item, &v->bytes);
}

int ds_headroom_parse(const char *s, struct ds_headroom *h)
{
	if (!s || !*s)
		return -EINVAL;
	struct ds_headroom v;
	memset(&v, 0, sizeof(v));
	const char *comma = strchr(s, ',');
	size_t n1 = comma ? (size_t)(comma - s) : strlen(s);
	int rc = headroom_item(s, n1, &v);
	if (!rc && comma) {
		/* "SIZE,N%" or "N%,SIZE": the larger of the two, under each limit */
		size_t n2 = strlen(comma + 1);
		int pct1 = n1 && s[n1 - 1] == '%', pct2 = n2 && comma[n2] == '%';
		rc = pct1 == pct2 ? -EINVAL : headroom_item(comma + 1, n2, &v);
	}
	if (rc)
		return rc;
	*h = v;
	return 0;
}

int ds_headroom_opt(const char *arg, struct ds_headroom *h, int *bad)
{
	if (ds_headroom_parse(arg, h) == 0)
		return 1;
	ds_error("--ram-headroom '%s': not a size (2GiB), a share of the limit (0%%..99%%) or both "
	         "(8GiB,25%%)", arg);
	*bad = 1;
	return 0;
}

uint64_t ds_headroom_bytes(const struct ds_headroom *h, uint64_t limit)
{
	uint64_t r = h->bytes;
	unsigned ranks = h->ranks ? h->ranks : 1;
	if (h->per_rank) {
		uint64_t pr = h->per_rank > UINT64_MAX / ranks ? UINT64_MAX : h->per_rank * ranks;
		if (pr > r)
			r = pr;
	}
	if (h->pct && limit != DS_ROOM_NONE) {
		uint64_t pc = limit / 100 * h->pct + limit % 100 * h->pct / 100;
		if (pc > r)
			r = pc;
	}
	return r;
}

/* ---- reading cgroup files ----------------------------------------------- */

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	return (int)got;
}

/* A file holding one number, or "max" (*v = DS_ROOM_NONE).  0 or -errno. */
static int read_u64_file(const char *dir, const char *name, uint64_t *v)
{
	char path[PATH_MAX + 64], buf[64];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	int rc = read_small(path, buf, sizeof(buf));
	if (rc < 0)
		return rc;
	buf[strcspn(buf, "\n")] = 0;
	if (!strcmp(buf, "max")) {
		*v = DS_ROOM_NONE;
		return 0;
	}
	return ds_parse_u64(buf, v) < 0 ? -EINVAL : 0;
}

/* The value of key in DIR/memory.stat, 0 when absent. */
static uint64_t stat_key(const char *dir, const char *key)
{
	char path[PATH_MAX + 64];
	if ((size_t)snprintf(path, sizeof(path), "%s/memory.stat", dir) >= sizeof(path))
		return 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[256];
	size_t kl = strlen(key);
	uint64_t v = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, kl) && line[kl] == ' ') {
			line[strcspn(line, "\n")] = 0;
			if (ds_parse_u64(line + kl + 1, &v) < 0)
				v = 0;
			break;
		}
	}
	fclose(f);
	return v;
}

/* One limit of one cgroup directory: tighten *out if it binds harder. */
static void consider(struct ds_room *out, const struct ds_headroom *h, int ver,
                     const char *dir, const char *why, uint64_t limit, uint64_t usage)
{
	if (limit == DS_ROOM_NONE)
		return;
	uint64_t hr = ds_headroom_bytes(h, limit);
	uint64_t room = usage >= limit ? 0 : limit - usage;
	room = room > hr ? room - hr : 0;
	ds_debug("'%s': %s %llu, usage %llu, headroom %llu: room %llu", dir, why,
	         (unsigned long long)limit, (unsigned long long)usage, (unsigned long long)hr,
	         (unsigned long long)room);
	if (room >= out->room)
		return;
	out->room = room;
	out->cgroup_v = ver;
	out->limit = limit;
	out->usage = usage;
	out->headroom = hr;
	out->why = why;
	snprintf(out->cgroup, sizeof(out->cgroup), "%s", dir);
}

static void level_v1(struct ds_room *out, const struct ds_headroom *h, const char *dir)
{
	uint64_t limit, usage;
	if (read_u64_file(dir, "memory.limit_in_bytes", &limit) < 0 ||
	    read_u64_file(dir, "memory.usage_in_bytes", &usage) < 0) {
		ds_debug("'%s': no v1 memory limit readable", dir);
		return;
	}
	if (limit >= V1_UNLIMITED)
		return;
	uint64_t cache = stat_key(dir, "total_inactive_file");
	usage = usage > cache ? usage - cache : 0;
	consider(out, h, 1, dir, "cgroup v1 memory limit", limit, usage);
}

static void level_v2(struct ds_room *out, const struct ds_headroom *h, const char *dir)
{
	uint64_t max, high, cur;
	if (read_u64_file(dir, "memory.current", &cur) < 0)
		return; /* the root, or no memory controller on this hierarchy */
	uint64_t cache = stat_key(dir, "inactive_file");
	cur = cur > cache ? cur - cache : 0;
	if (read_u64_file(dir, "memory.max", &max) == 0)
		consider(out, h, 2, dir, "cgroup v2 memory.max", max, cur);
	/* Above memory.high the kernel throttles and reclaims hard: a stage
	 * that fills it stalls the job it serves. */
	if (read_u64_file(dir, "memory.high", &high) == 0)
		consider(out, h, 2, dir, "cgroup v2 memory.high", high, cur);
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = 0;
}

/* Does the comma-separated list have token tok? */
static int has_token(const char *list, const char *tok)
{
	size_t tl = strlen(tok);
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l == tl && !strncmp(p, tok, tl))
			return 1;
		p = c ? c + 1 : NULL;
	}
	return 0;
}

/* The directory of cgroup `path` (from /proc/self/cgroup) of the hierarchy
 * (v2, or v1's memory controller) in mountinfo: MOUNTPOINT plus the path
 * below the mount's root; *top the mount point (no walk above it: what is
 * above is not visible here).  0 or -ENOENT. */
static int find_dir(int v2, const char *path, char *dir, size_t dlen, char *top, size_t tlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;
	while (rc && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = 0;
		char *fstype = sep + 3, *src, *sopt, *save = NULL;
		fstype = strtok_r(fstype, " ", &save);
		src = strtok_r(NULL, " ", &save);
		sopt = strtok_r(NULL, " ", &save);
		if (!fstype || !src)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") : (strcmp(fstype, "cgroup") || !has_token(sopt, "memory")))
			continue;
		char *root, *mnt, *s2 = NULL;
		strtok_r(line, " ", &s2); /* id */
		strtok_r(NULL, " ", &s2); /* parent */
		strtok_r(NULL, " ", &s2); /* major:minor */
		root = strtok_r(NULL, " ", &s2);
		mnt = strtok_r(NULL, " ", &s2);
		if (!root || !mnt)
			continue;
		unescape(root);
		unescape(mnt);
		const char *rel = path;
		size_t rl = strlen(root);
		if (strcmp(root, "/")) {
			/* a bind of a sub-tree (a container): the path must be under it */
			if (strncmp(path, root, rl) || (path[rl] && path[rl] != '/'))
				continue;
			rel = path + rl;
		}
		while (*rel == '/')
			rel++;
		if ((size_t)snprintf(dir, dlen, "%s%s%s", mnt, *rel ? "/" : "", rel) >= dlen ||
		    (size_t)snprintf(top, tlen, "%s", mnt) >= tlen)
			continue;
		if (access(dir, F_OK) == 0)
			rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

/* Every level from the process's cgroup up to the top of the mount. */
static void walk(struct ds_room *out, const struct ds_headroom *h, int v2, const char *path)
{
	char dir[PATH_MAX], top[PATH_MAX];
	if (find_dir(v2, path, dir, sizeof(dir), top, sizeof(top)) < 0) {
		ds_debug("cgroup %s '%s': not mounted here", v2 ? "v2" : "v1 memory", path);
		return;
	}
	size_t tl = strlen(top);
	for (;;) {
		if (v2)
			level_v2(out, h, dir);
		else
			level_v1(out, h, dir);
		size_t l = strlen(dir);
		if (l <= tl)
			break;
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < tl)
			break;
		*slash = 0;
		if (strlen(dir) < tl)
			break;
	}
}

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return DS_ROOM_NONE;
	char line[128];
	unsigned long long kb;
	uint64_t v = DS_ROOM_NONE;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			v = (uint64_t)kb << 10;
			break;
		}
	fclose(f);
	return v;
}

int ds_ram_room(const char *dir, const struct ds_headroom *h, struct ds_room *out)
{
	struct ds_headroom def;
	if (!h) {
		ds_headroom_default(&def, 1);
		h = &def;
	}
	memset(out, 0, sizeof(*out));
	out->limit = DS_ROOM_NONE;
	out->why = "free space";
	struct statfs sf;
	struct statvfs sv;
	if (statfs(dir, &sf) < 0 || statvfs(dir, &sv) < 0)
		return -errno;
	out->is_ram = (unsigned long)sf.f_type == TMPFS_MAGIC ||
	              (unsigned long)sf.f_type == RAMFS_MAGIC;
	if ((unsigned long)sf.f_type == RAMFS_MAGIC) /* no size, no free count */
		out->free = mem_available();
	else
		out->free = (uint64_t)sv.f_bavail * sv.f_frsize;
	out->room = out->free;
	if (!out->is_ram)
		return 0;
	/* tmpfs pages beyond what the host can give are swapped or killed for,
	 * cgroup or not */
	uint64_t mem = mem_available();
	if (mem < out->room) {
		out->room = mem;
		out->why = "available memory";
	}

	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f) {
		ds_debug("/proc/self/cgroup: %s", strerror(errno));
		return 0;
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = 0;
		const char *ctrls = c1 + 1, *path = c2 + 1;
		if (!strcmp(line, "0") && !*ctrls)
			walk(out, h, 1, path);
		else if (has_token(ctrls, "memory"))
			walk(out, h, 0, path);
	}
	free(line);
	fclose(f);
	return 0;
}

char *ds_room_describe(const struct ds_room *r, char *buf, size_t len)
{
	char a[32], b[32], c[32];
	if (!r->cgroup_v)
		snprintf(buf, len, "%s %s", r->why, ds_fmt_size(r->room, a, sizeof(a)));
	else
		snprintf(buf, len, "%s %s ('%s'): usage %s, headroom %s", r->why,
		         ds_fmt_size(r->limit, a, sizeof(a)), r->cgroup,
		         ds_fmt_size(r->usage, b, sizeof(b)), ds_fmt_size(r->headroom, c, sizeof(c)));
	return buf;
}
