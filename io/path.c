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

#define DS_MAXSYMLINKS 40

int ds__maybe_ours(const char *path)
{
	ds__ensure_init();
	if (!ds__g.active || ds__busy || !path)
		return 0;
	if (path[0] != '/')
		return atomic_load_explicit(&ds__cwd, memory_order_relaxed) >= 0;
	/* two byte compares reject almost every other absolute path */
	if (DS_LIKELY(path[1] == ds__g.mount[1])) {
		if (!strncmp(path, ds__g.mount, ds__g.mlen) &&
		    (path[ds__g.mlen] == '/' || path[ds__g.mlen] == 0))
			return 1;
		return 0;
	}
	/* "//dstage", "/./dstage", "/../dstage" name the mount too */
	return path[1] == '/' || path[1] == '.';
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

static int is_dir(int64_t id) { return S_ISDIR(ds__g.ix.e[id].mode); }

/* Child of directory id named (name, nlen), or -1: a hash lookup of the
 * joined path. */
static int64_t child(int64_t id, const char *name, size_t nlen, char *tmp)
{
	const struct ds_entry *e = &ds__g.ix.e[id];
	size_t plen = e->name_len;
	if (plen + 1 + nlen >= PATH_MAX)
		return -1;
	size_t n = 0;
	if (plen) {
		memcpy(tmp, ds__ename(id), plen);
		tmp[plen] = '/';
		n = plen + 1;
	}
	memcpy(tmp + n, name, nlen);
	return ds_index_lookup(&ds__g.ix, tmp, n + nlen);
}

/* Not ours after all: hand libc an absolute path.  "prefix" is the real
 * directory we left the mount for, "rest" the remaining components. */
static int outside(struct ds_res *r, const char *prefix, size_t plen, const char *rest)
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

/* The component walk, from entry `cur` (relative paths) or from "/"
 * (cur == -1: absolute).  Outside the mount the walk only keeps the real
 * directory reached so far, lexically (acc), for as long as it is a prefix
 * of the mount; once it strays, the rest is libc's.  work is PATH_MAX bytes
 * and gets modified (symlink expansion). */
static int walk(int64_t cur, char *work, int flags, struct ds_res *r)
{
	char tmp[PATH_MAX], acc[PATH_MAX];
	size_t alen = 0; /* acc without trailing '/': "" is the root */
	int links = 0, trail = 0;
	char *p = work;

	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *c = p;
		while (*p && *p != '/')
			p++;
		size_t cl = p - c;
		const char *q = p;
		while (*q == '/')
			q++;
		int last = !*q;
		trail = last && *p == '/';
		if (cl > NAME_MAX)
			return -ENAMETOOLONG;

		if (cur < 0) { /* outside, on the way to the mount */
			if (cl == 1 && c[0] == '.')
				continue;
			if (cl == 2 && c[0] == '.' && c[1] == '.') {
				while (alen && acc[alen - 1] != '/')
					alen--;
				if (alen)
					alen--;
				continue;
			}
			size_t nl = alen + 1 + cl;
			if (nl > ds__g.mlen || ds__g.mount[alen] != '/' ||
			    memcmp(ds__g.mount + alen + 1, c, cl) ||
			    (ds__g.mount[nl] != '/' && ds__g.mount[nl] != 0)) {
				acc[alen] = 0;
				return outside(r, acc, alen, c);
			}
			acc[alen] = '/';
			memcpy(acc + alen + 1, c, cl);
			alen = nl;
			if (nl == ds__g.mlen)
				cur = 0; /* entered the mount */
			continue;
		}

		if (!is_dir(cur))
			return -ENOTDIR;
		if (cl == 1 && c[0] == '.')
			continue;
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			if (cur == 0) { /* leave the mount for its real parent */
				memcpy(acc, ds__g.mount, ds__g.mlen);
				alen = ds__g.mlen;
				while (acc[alen - 1] != '/')
					alen--;
				alen--;
				cur = -1;
			} else {
				/* an id read from the index: checked before use */
				cur = ds__g.ix.e[cur].parent;
				if (!ds_index_entry_ok(&ds__g.ix, cur))
					return -EIO;
			}
			continue;
		}
		if (cur == 0 && cl == 7 && !memcmp(c, ".dstage", 7)) {
			int rc = ds__virt_lookup(p, strlen(p), &r->v);
			if (rc)
				return rc;
			r->ours = 1;
			r->id = -1;
			return 0;
		}
		int64_t nx = child(cur, c, cl, tmp);
		if (nx < 0) {
			if (last && (flags & DS_RES_PARENT)) {
				r->ours = 1;
				r->id = cur;
			}
			return -ENOENT;
		}
		const struct ds_entry *e = &ds__g.ix.e[nx];
		if (S_ISLNK(e->mode) && (!last || trail || (flags & DS_RES_FOLLOW))) {
			if (++links > DS_MAXSYMLINKS)
				return -ELOOP;
			/* target + the rest; a relative target resolves from
			 * the directory holding the link (cur) */
			const char *target = ds__g.ix.strings + e->poff;
			size_t tl = e->size, rl = strlen(p);
			/* stage only stores targets that stay in the tree; one that
			 * leaves it comes from a damaged index: never follow it out */
			if (ds_target_check(ds__ename(nx), e->name_len, target, tl, NULL))
				return -EIO;
			if (tl + rl + 1 >= PATH_MAX)
				return -ENAMETOOLONG;
			memmove(work + tl, p, rl + 1);
			memcpy(work, target, tl);
			p = work;
			if (*p == '/') {
				cur = -1;
				alen = 0;
			}
			continue;
		}
		cur = nx;
	}
	if (cur < 0) { /* ended on a real directory above the mount */
		acc[alen] = 0;
		return outside(r, acc, alen, ".");
	}
	if (trail && !is_dir(cur))
		return -ENOTDIR;
	r->ours = 1;
	r->id = cur;
	r->v.kind = DS_V_NONE;
	return 0;
}

int ds__resolve(int dirfd, const char *path, int flags, struct ds_res *r)
{
	char work[PATH_MAX];
	size_t len = strnlen(path, PATH_MAX);
	r->ours = 0;
	r->id = -1;
	r->v.kind = DS_V_NONE;
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
			if (start < 0)
				return 0; /* relative to the real cwd: libc's */
		} else {
			struct ds_file *f = ds__fd_get(dirfd);
			if (!f)
				return 0; /* a real directory: libc's */
			int kind = f->kind;
			start = f->id;
			struct ds_vent v = f->v;
			ds__file_put(f);
			if (kind == DS_F_VDIR) {
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
			if (kind != DS_F_DIR)
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
			if (id >= 0 && (!S_ISLNK(ds__g.ix.e[id].mode) || !(flags & DS_RES_FOLLOW))) {
				r->ours = 1;
				r->id = id;
				return 0;
			}
		}
	}
	memcpy(work, path, len + 1);
	return walk(start, work, flags, r);
}

int ds__abs_name(int64_t id, const struct ds_vent *v, char *buf, size_t size)
{
	char rel[PATH_MAX];
	size_t rl;
	if (v && v->kind != DS_V_NONE) {
		int n;
		switch (v->kind) {
		case DS_V_ROOT: n = snprintf(rel, sizeof(rel), ".dstage"); break;
		case DS_V_EPOCHS: n = snprintf(rel, sizeof(rel), ".dstage/epochs"); break;
		case DS_V_EPOCH:
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
		rl = ds__g.ix.e[id].name_len;
		memcpy(rel, ds__ename(id), rl);
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
