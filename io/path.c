/* SPDX-License-Identifier: BSD-3-Clause */
/* path.c: the one place that decides whether a path is ours, and resolves
 * it to an entry of the mapped index.
 *
 * A path is ours when, made absolute and normalised, it is the mount prefix
 * or starts with the prefix followed by '/'.  Relative paths are ours when
 * they start from an emulated directory inside the mount (the emulated cwd,
 * or a staged directory descriptor given to an *at() call).
 *
 * Resolution walks component by component the way the kernel does: "." and
 * ".." (".." of the mount root leaves the mount: the rest of the walk is a
 * real path handed to libc), symlinks (up to 40, ELOOP after), ENOTDIR for a
 * component that is not a directory, ENAMETOOLONG for long names.  The
 * common case, an absolute path with nothing unusual in it, is one hash
 * lookup. */
#include "shim.h"

#include <fcntl.h>

_Atomic int64_t ds__cwd = -1;

#define MAXSYMLINKS 40

int ds__maybe_ours(const char *path)
{
	ds__ensure_init();
	if (!ds__live() || ds__busy || !path)
		return 0;
	/* each "maybe" below maps the store first if that has not happened */
	if (path[0] != '/')
		return (atomic_load_explicit(&ds__cwd, memory_order_relaxed) >= 0 ||
		        DS__UNLIKELY(atomic_load_explicit(&ds__out_cwd, memory_order_relaxed)) ||
		        ds__rel_maybe(AT_FDCWD, path)) &&
		       ds__activate();
	/* two byte compares reject almost every other absolute path */
	if (DS__LIKELY(path[1] == ds__g.mount[1])) {
		if (!strncmp(path, ds__g.mount, ds__g.mlen) &&
		    (path[ds__g.mlen] == '/' || path[ds__g.mlen] == 0))
			return ds__activate();
		return 0;
	}
	/* "//dstage", "/./dstage", "/../dstage" name the mount too */
	return (path[1] == '/' || path[1] == '.') && ds__activate();
}

/* A name with nothing to normalise: no "//", no "." or ".." component, no
 * trailing '/'.  Names starting with '.' take the slow path, which is still
 * right. */
static int plain(const char *p, size_t len)
{
	if (len == 0)
		return 1;
	if (p[0] == '/' || p[0] == '.' || p[len - 1] == '/')
		return 0;
	for (const char *s = p; (s = memchr(s, '/', len - (s - p))); s++)
		if (s[1] == '/' || s[1] == '.')
			return 0;
	return 1;
}

static int is_dir(int64_t id) { return S_ISDIR(ds_ix_mode(&ds__g.ix, (uint32_t)id)); }

/* Child of directory id named (name, nlen), or -1 (ds_index_child; tmp,
 * PATH_MAX bytes, is no longer needed). */
static int64_t child(int64_t id, const char *name, size_t nlen, char *tmp)
{
	(void)tmp;
	return ds_index_child(&ds__g.ix, (uint32_t)id, name, nlen);
}

/* Not ours after all: hand libc an absolute path.  "prefix" is the real
 * directory we left the mount for, "rest" the remaining components. */
static int outside(struct ds__res *r, const char *prefix, size_t plen, const char *rest)
{
	size_t rlen = strlen(rest);
	if (plen + 1 + rlen >= sizeof(r->buf))
		return -ENAMETOOLONG;
	memmove(r->buf + plen + 1, rest, rlen + 1);
	memmove(r->buf, prefix, plen);
	r->buf[plen] = '/';
	r->ours = 0;
	r->rdirfd = AT_FDCWD;
	r->rpath = r->buf;
	return 0;
}

/* The component walk's state (walk). */
struct walk {
	int64_t cur;    /* the entry reached; -1: outside, on the way to the mount */
	char *work, *p; /* the path (symlinks expanded in place); its next component */
	int flags, links, trail, last;
	size_t alen;        /* acc without trailing '/': "" is the root */
	char acc[PATH_MAX]; /* the real directory reached so far (cur == -1) */
	char tmp[PATH_MAX]; /* child's lookup key */
};

/* A walk step's return besides 0 (resolved) and a negative errno. */
enum { WALK_ON = 1 /* go on with the next component */ };

/* Outside, on the way to the mount: component (c, cl) keeps the walk on
 * the mount's path, enters the mount, or strays (the rest is libc's). */
static int walk_above(struct walk *w, const char *c, size_t cl, struct ds__res *r)
{
	if (cl == 1 && c[0] == '.')
		return WALK_ON;
	if (cl == 2 && c[0] == '.' && c[1] == '.') {
		while (w->alen && w->acc[w->alen - 1] != '/')
			w->alen--;
		if (w->alen)
			w->alen--;
		return WALK_ON;
	}
	size_t alen = w->alen, nl = alen + 1 + cl;
	if (nl > ds__g.mlen || ds__g.mount[alen] != '/' || memcmp(ds__g.mount + alen + 1, c, cl) ||
	    (ds__g.mount[nl] != '/' && ds__g.mount[nl] != 0)) {
		w->acc[alen] = 0;
		return outside(r, w->acc, alen, c);
	}
	w->acc[alen] = '/';
	memcpy(w->acc + alen + 1, c, cl);
	w->alen = nl;
	if (nl == ds__g.mlen)
		w->cur = 0; /* entered the mount */
	return WALK_ON;
}

/* ".." in the mount: the parent entry, or out of the mount's root. */
static int walk_dotdot(struct walk *w)
{
	if (w->cur == 0) { /* leave the mount for its real parent */
		memcpy(w->acc, ds__g.mount, ds__g.mlen);
		w->alen = ds__g.mlen;
		while (w->acc[w->alen - 1] != '/')
			w->alen--;
		w->alen--;
		w->cur = -1;
	} else {
		/* an id read from the index: checked before use */
		w->cur = ds_ix_parent(&ds__g.ix, (uint32_t)w->cur);
		if (!ds_index_entry_ok(&ds__g.ix, w->cur))
			return -EIO;
	}
	return WALK_ON;
}

/* Follow symlink entry nx: its target replaces it in the path. */
static int walk_link(struct walk *w, int64_t nx)
{
	if (++w->links > MAXSYMLINKS)
		return -ELOOP;
	/* target + the rest; a relative target resolves from
	 * the directory holding the link (cur) */
	const char *target = ds_ix_target(&ds__g.ix, (uint32_t)nx);
	size_t tl = ds_ix_size(&ds__g.ix, (uint32_t)nx), rl = strlen(w->p);
	/* stage only stores targets that stay in the tree; one that
	 * leaves it comes from a damaged index: never follow it out */
	int ll = ds_ix_path(&ds__g.ix, (uint32_t)nx, w->tmp, PATH_MAX);
	if (ll < 0 || ds_target_check(w->tmp, (size_t)ll, target, tl, NULL))
		return -EIO;
	if (tl + rl + 1 >= PATH_MAX)
		return -ENAMETOOLONG;
	memmove(w->work + tl, w->p, rl + 1);
	memcpy(w->work, target, tl);
	w->p = w->work;
	if (*w->p == '/') {
		w->cur = -1;
		w->alen = 0;
	}
	return WALK_ON;
}

/* In the mount: component (c, cl) of directory cur. */
static int walk_in(struct walk *w, const char *c, size_t cl, struct ds__res *r)
{
	if (!is_dir(w->cur))
		return -ENOTDIR;
	if (cl == 1 && c[0] == '.')
		return WALK_ON;
	if (cl == 2 && c[0] == '.' && c[1] == '.')
		return walk_dotdot(w);
	if (w->cur == 0 && cl == 7 && !memcmp(c, ".dstage", 7)) {
		size_t used;
		int rc = ds__virt_lookup(w->p, strlen(w->p), &r->v, &used);
		if (rc == 1) { /* ".dstage/.." and the like: back at the root */
			r->v.kind = DS__V_NONE;
			w->p += used;
			return WALK_ON;
		}
		if (rc)
			return rc;
		r->ours = 1;
		r->id = -1;
		return 0;
	}
	if (w->cur == 0 && ds__out_match(c, cl)) { /* the outputs (write.c) */
		int rc = ds__out_walk(&w->p, r);
		if (rc == 1)
			return WALK_ON; /* climbed back to the mount root */
		return rc;
	}
	int64_t nx = child(w->cur, c, cl, w->tmp);
	if (nx < 0) {
		if (w->last && (w->flags & DS__RES_PARENT)) {
			r->ours = 1;
			r->id = w->cur;
		}
		return -ENOENT;
	}
	if (S_ISLNK(ds_ix_mode(&ds__g.ix, (uint32_t)nx)) &&
	    (!w->last || w->trail || (w->flags & DS__RES_FOLLOW)))
		return walk_link(w, nx);
	w->cur = nx;
	return WALK_ON;
}

/* The component walk, from entry `cur` (relative paths) or from "/"
 * (cur == -1: absolute).  Outside the mount the walk only keeps the real
 * directory reached so far, lexically (acc), for as long as it is a prefix
 * of the mount; once it strays, the rest is libc's.  work is PATH_MAX bytes
 * and gets modified (symlink expansion). */
static int walk(int64_t cur, char *work, int flags, struct ds__res *r)
{
	struct walk w;
	w.cur = cur;
	w.work = w.p = work;
	w.flags = flags;
	w.links = w.trail = 0;
	w.alen = 0;

	for (;;) {
		while (*w.p == '/')
			w.p++;
		if (!*w.p)
			break;
		char *c = w.p;
		while (*w.p && *w.p != '/')
			w.p++;
		size_t cl = w.p - c;
		const char *q = w.p;
		while (*q == '/')
			q++;
		w.last = !*q;
		w.trail = w.last && *w.p == '/';
		if (cl > NAME_MAX)
			return -ENAMETOOLONG;
		int rc = w.cur < 0 ? walk_above(&w, c, cl, r) : walk_in(&w, c, cl, r);
		if (rc != WALK_ON)
			return rc;
	}
	if (w.cur < 0) { /* ended on a real directory above the mount */
		w.acc[w.alen] = 0;
		return outside(r, w.acc, w.alen, ".");
	}
	if (w.trail && !is_dir(w.cur))
		return -ENOTDIR;
	r->ours = 1;
	r->id = w.cur;
	r->v.kind = DS__V_NONE;
	return 0;
}

/* ---- relative paths from real directories -------------------------------
 * `cd / && tar cf - dstage/x`, `wc -c ../dstage/x` from /tmp, rsync's
 * fstatat(fd_of_root, "dstage/...") reach the mount from a real directory.
 * The kernel cannot resolve them, so the shim makes the name absolute and
 * walks it; the cost stays off the common case:
 *   - a relative path without ".." can only reach the mount from one of the
 *     mount's real ancestors, and its first component must then be the
 *     mount's next one: for the cwd, a cached "how far along the mount is the
 *     real cwd" (one getcwd after each chdir) and a compare; for a real dirfd,
 *     the first component must be one of the mount's (a scan of the prefix),
 *     and only then one fstat, compared with the ancestors' dev/ino;
 *   - a path with ".." must name the mount's last component (a string
 *     search), then takes the slow way: the directory's physical name
 *     (getcwd, or /proc/self/fd/N), then the components one by one; a name
 *     followed later by ".." is lstat'ed and must be a real directory (a
 *     symlink there is the kernel's business: the name stays libc's). */

/* The real cwd's place on the mount's path, cached with a generation so a
 * chdir racing with the computation is never lost: low 32 bits value + 2
 * (0 unknown, 1 not an ancestor, 2 + len: an ancestor of that length, 2 for
 * "/"), high 32 bits the generation. */
static _Atomic uint64_t rcwd_anc;

void ds__rcwd_invalidate(void)
{
	uint64_t v = atomic_load(&rcwd_anc);
	while (!atomic_compare_exchange_weak(&rcwd_anc, &v, ((v >> 32) + 1) << 32))
		;
}

/* Length of p (len bytes) if it names a proper ancestor of the mount ("" and
 * "/" are the root: 0), else -1. */
static int anc_len(const char *p, size_t len)
{
	if (len == 1 && p[0] == '/')
		return 0;
	if (len < ds__g.mlen && !memcmp(p, ds__g.mount, len) && ds__g.mount[len] == '/')
		return (int)len;
	return -1;
}

static int rcwd_get(void)
{
	uint64_t v = atomic_load_explicit(&rcwd_anc, memory_order_acquire);
	if (DS__LIKELY((uint32_t)v))
		return (int)(uint32_t)v - 2;
	char buf[PATH_MAX];
	int a = DS__REAL(getcwd)(buf, sizeof(buf)) ? anc_len(buf, strlen(buf)) : -1;
	uint64_t nv = (v & ~(uint64_t)UINT32_MAX) | (uint32_t)(a + 2);
	atomic_compare_exchange_strong(&rcwd_anc, &v, nv); /* lost to a chdir: recompute next time */
	return a;
}

/* The first component of a relative path, past "./" and extra '/'. */
static const char *first_comp(const char *p, size_t *cl)
{
	for (;;) {
		while (*p == '/')
			p++;
		if (p[0] == '.' && p[1] == '/')
			p += 2;
		else
			break;
	}
	*cl = strcspn(p, "/");
	return p;
}

/* Is (c, cl) a component of the mount path (after ancestor length a, or any
 * when a < 0)? */
static int mount_comp(const char *c, size_t cl, int a)
{
	const char *m = ds__g.mount, *end = m + ds__g.mlen;
	if (a >= 0)
		m += a;
	while (m < end) {
		m++; /* the '/' */
		size_t ml = strcspn(m, "/");
		if (ml == cl && !memcmp(m, c, cl))
			return 1;
		if (a >= 0)
			return 0;
		m += ml;
	}
	return 0;
}

int ds__rel_maybe(int dirfd, const char *path)
{
	if (!path[0])
		return 0;
	if (strstr(path, "..")) {
		/* may climb anywhere, but to land in the mount it must name
		 * the mount's last component on the way down */
		const char *base = ds__g.mount + ds__g.mlen;
		while (base[-1] != '/')
			base--;
		size_t bl = ds__g.mount + ds__g.mlen - base;
		for (const char *q = path; (q = strstr(q, base)); q++)
			if ((q == path || q[-1] == '/') && (q[bl] == '/' || q[bl] == 0))
				return 1; /* the slow way decides */
		return 0;
	}
	size_t cl;
	const char *c = first_comp(path, &cl);
	if (!cl)
		return 0; /* the directory itself: a real one */
	if (dirfd == AT_FDCWD) {
		int a = rcwd_get();
		return a >= 0 && mount_comp(c, cl, a);
	}
	return mount_comp(c, cl, -1);
}

/* The mount's real ancestors ("/", "/a", "/a/b" for "/a/b/dstage"), their
 * dev and ino, found once: a real dirfd is one of them when its fstat says so. */
#define MAXANC 64
static struct {
	pthread_once_t once;
	int n;
	dev_t dev[MAXANC];
	ino_t ino[MAXANC];
	int len[MAXANC];
} anc = {.once = PTHREAD_ONCE_INIT};

static void anc_init(void)
{
	char p[PATH_MAX];
	for (size_t i = 0; i < ds__g.mlen && anc.n < MAXANC; i++) {
		if (ds__g.mount[i] != '/')
			continue;
		memcpy(p, ds__g.mount, i);
		p[i] = 0;
		struct stat st;
		if (DS__REAL(stat)(i ? p : "/", &st) == 0 && S_ISDIR(st.st_mode)) {
			anc.dev[anc.n] = st.st_dev;
			anc.ino[anc.n] = st.st_ino;
			anc.len[anc.n++] = (int)i;
		}
	}
}

/* The physical name of the real directory a relative path starts from into
 * base (no trailing '/'; "" for the root): 1, or 0 when it cannot lead into
 * the mount or has no name. */
static int real_base(int dirfd, const char *path, char *base, size_t *blen)
{
	int dots = strstr(path, "..") != NULL;
	if (dirfd == AT_FDCWD && !dots) {
		int a = rcwd_get();
		if (a < 0)
			return 0;
		memcpy(base, ds__g.mount, a);
		*blen = a;
		return 1;
	}
	if (dirfd == AT_FDCWD) {
		if (!DS__REAL(getcwd)(base, PATH_MAX) || base[0] != '/')
			return 0;
		*blen = strlen(base);
	} else if (!dots) {
		struct stat st;
		pthread_once(&anc.once, anc_init);
		if (DS__REAL(fstat)(dirfd, &st) || !S_ISDIR(st.st_mode))
			return 0;
		int i = 0;
		while (i < anc.n && (anc.dev[i] != st.st_dev || anc.ino[i] != st.st_ino))
			i++;
		if (i == anc.n)
			return 0;
		memcpy(base, ds__g.mount, anc.len[i]);
		*blen = anc.len[i];
		return 1;
	} else {
		char link[40];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		ssize_t n = DS__REAL(readlink)(link, base, PATH_MAX - 1);
		if (n <= 0 || base[0] != '/')
			return 0;
		base[n] = 0;
		*blen = n;
	}
	if (*blen == 1)
		*blen = 0; /* the root */
	return 1;
}

/* base (blen bytes in out, PATH_MAX) + path, "." and ".." applied, into out
 * until the name reaches the mount; 1 when it does (the rest appended for
 * walk), 0 when it cannot. */
static int rel_join(char *out, size_t alen, const char *p)
{
	for (;;) {
		if (alen >= ds__g.mlen && !memcmp(out, ds__g.mount, ds__g.mlen) &&
		    (alen == ds__g.mlen || out[ds__g.mlen] == '/')) {
			size_t rl = strlen(p);
			if (alen + 1 + rl >= PATH_MAX)
				return 0;
			out[alen] = '/';
			memcpy(out + alen + 1, p, rl + 1);
			return 1;
		}
		while (*p == '/')
			p++;
		if (!*p)
			return 0;
		const char *c = p;
		size_t cl = strcspn(p, "/");
		p += cl;
		if (cl == 1 && c[0] == '.')
			continue;
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			while (alen && out[alen - 1] != '/')
				alen--;
			if (alen)
				alen--;
			continue;
		}
		if (alen + 1 + cl >= PATH_MAX)
			return 0;
		out[alen] = '/';
		memcpy(out + alen + 1, c, cl);
		alen += 1 + cl;
		out[alen] = 0;
		if (anc_len(out, alen) < 0 && alen != ds__g.mlen) {
			/* strayed from the mount's path: only a ".." can come back,
			 * and only through a real directory */
			struct stat st;
			if (!strstr(p, "..") || DS__REAL(lstat)(out, &st) || !S_ISDIR(st.st_mode))
				return 0;
		}
	}
}

static int resolve_real_rel(int dirfd, const char *path, int flags, struct ds__res *r, char *work)
{
	size_t blen;
	if (ds__busy || !ds__activate() || !real_base(dirfd, path, work, &blen) ||
	    !rel_join(work, blen, path))
		return 0;
	int rc = walk(-1, work, flags, r);
	if (!r->ours) { /* not ours after all: the caller's own name to libc */
		r->rdirfd = dirfd;
		r->rpath = path;
		return rc == -ENAMETOOLONG ? 0 : rc;
	}
	return rc;
}

int ds__resolve(int dirfd, const char *path, int flags, struct ds__res *r)
{
	char work[PATH_MAX];
	size_t len = strnlen(path, PATH_MAX);
	r->ours = 0;
	r->out = 0;
	r->id = -1;
	r->v.kind = DS__V_NONE;
	r->rdirfd = dirfd;
	r->rpath = path;
	if (len >= PATH_MAX)
		return ds__maybe_ours(path) ? -ENAMETOOLONG : 0;
	if (len == 0)
		return -ENOENT;

	int64_t start = -1;
	if (path[0] != '/') {
		if (dirfd == AT_FDCWD) {
			start = atomic_load(&ds__cwd);
			if (start < 0 && atomic_load(&ds__out_cwd) && ds__out_rel(AT_FDCWD, path, work))
				return walk(-1, work, flags, r); /* the cwd is in the outputs */
			if (start < 0) /* relative to the real cwd */
				return resolve_real_rel(dirfd, path, flags, r, work);
		} else {
			struct ds__file *f = ds__fd_get(dirfd);
			if (!f && ds__out_dirfd(dirfd) && ds__out_rel(dirfd, path, work))
				return walk(-1, work, flags, r); /* a directory of the outputs */
			if (!f) /* a real directory */
				return resolve_real_rel(dirfd, path, flags, r, work);
			int kind = f->kind;
			start = f->id;
			struct ds__vent v = f->v;
			ds__file_put(f);
			if (kind == DS__F_VDIR) {
				/* inside the virtual tree: go by name */
				char abs[PATH_MAX];
				int n = ds__abs_name(-1, &v, abs, sizeof(abs));
				if (n < 0 || n + 1 + len >= PATH_MAX)
					return -ENAMETOOLONG;
				abs[n] = '/';
				memcpy(abs + n + 1, path, len + 1);
				memcpy(work, abs, n + 1 + len + 1);
				return walk(-1, work, flags, r);
			}
			if (kind != DS__F_DIR)
				return -ENOTDIR;
		}
	} else if (!ds__maybe_ours(path)) {
		return 0;
	} else if (path[1] != '/' && path[1] != '.') {
		/* fast path: "/mount/a/b/c" with nothing to normalise */
		const char *rel = path + ds__g.mlen;
		size_t rl = len - ds__g.mlen;
		if (rl && *rel == '/') {
			rel++;
			rl--;
		}
		if (rl < len && plain(rel, rl)) {
			int64_t id = ds_index_lookup(&ds__g.ix, rel, rl);
			if (id >= 0 && (!S_ISLNK(ds_ix_mode(&ds__g.ix, (uint32_t)id)) ||
			                !(flags & DS__RES_FOLLOW))) {
				r->ours = 1;
				r->id = id;
				return 0;
			}
		}
	}
	memcpy(work, path, len + 1);
	return walk(start, work, flags, r);
}

int ds__abs_name(int64_t id, const struct ds__vent *v, char *buf, size_t size)
{
	char rel[PATH_MAX];
	size_t rl;
	if (v && v->kind != DS__V_NONE) {
		int n;
		switch (v->kind) {
		case DS__V_ROOT: n = snprintf(rel, sizeof(rel), ".dstage"); break;
		case DS__V_EPOCHS: n = snprintf(rel, sizeof(rel), ".dstage/epochs"); break;
		case DS__V_EPOCH:
			n = snprintf(rel, sizeof(rel), ".dstage/epochs/%llu", (unsigned long long)v->epoch);
			break;
		default:
			if (v->n)
				n = snprintf(rel, sizeof(rel), ".dstage/epochs/%llu/%u-of-%u",
				             (unsigned long long)v->epoch, v->l, v->n);
			else
				n = snprintf(rel, sizeof(rel), ".dstage/epochs/%llu/all",
				             (unsigned long long)v->epoch);
		}
		rl = (size_t)n;
	} else {
		int n = ds_ix_path(&ds__g.ix, (uint32_t)id, rel, sizeof(rel));
		if (n < 0)
			return n;
		rl = (size_t)n;
	}
	size_t need = ds__g.mlen + (rl ? 1 + rl : 0);
	if (need + 1 > size)
		return -ERANGE;
	memcpy(buf, ds__g.mount, ds__g.mlen);
	if (rl) {
		buf[ds__g.mlen] = '/';
		memcpy(buf + ds__g.mlen + 1, rel, rl);
	}
	buf[need] = 0;
	return (int)need;
}
