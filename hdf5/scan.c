/* SPDX-License-Identifier: BSD-3-Clause */
/* scan.c: turn SRC (or a --files-from list) into the sorted list of what a
 * pack will hold.  Runs on rank 0 only: the shared file system sees one walk,
 * and every rank packs from the same list, which is what makes the output
 * independent of the number of ranks.
 *
 * The walk goes through directory descriptors (openat/fstatat), one open
 * descriptor per level, so deep trees need no long paths and a directory
 * swapped for a symlink during the walk is not followed (O_NOFOLLOW). */
#include "pack_int.h"
#include "tar.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ancestor {
	dev_t dev;
	ino_t ino;
};

struct scan {
	const struct ds__scan_opts *o;
	struct ds__tree *t;
	char path[PATH_MAX + NAME_MAX + 2]; /* relative path of the current entry */
	size_t len;
	int follow;                        /* inside a dereferenced directory */
	struct ancestor *anc;              /* directories being walked (loops) */
	size_t nanc, capanc;
	double next_progress;
};

/* The current path, under SRC, quoted for a message. */
static const char *quoted(const struct scan *s, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s%s", s->o->src, s->len ? "/" : "");
	if (n > 0 && (size_t)n < cap)
		ds__quote(s->path, s->len, buf + n, cap - (size_t)n);
	return buf;
}

/* Log "'SRC/PATH': reason" about the current path; returns rc. */
static int fail(const struct scan *s, int rc, const char *why)
{
	char q[2 * PATH_MAX];
	ds_error("'%s': %s", quoted(s, q, sizeof(q)), why);
	return rc;
}

static void warn_skip(const struct scan *s, const char *why)
{
	char q[2 * PATH_MAX];
	ds_warn("'%s': %s, skipped", quoted(s, q, sizeof(q)), why);
}

static uint64_t add_string(struct ds__tree *t, const char *p, size_t n)
{
	uint64_t off = t->names.len;
	ds_buf_add(&t->names, p, n);
	ds_buf_add(&t->names, "", 1);
	return off;
}

static struct ds__pentry *add_entry(struct scan *s, const struct stat *st)
{
	struct ds__tree *t = s->t;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 1024;
		t->e = ds_xrealloc(t->e, t->cap * sizeof(*t->e));
	}
	struct ds__pentry *e = &t->e[t->n++];
	memset(e, 0, sizeof(*e));
	e->path = add_string(t, s->path, s->len);
	e->path_len = (uint32_t)s->len;
	e->mode = st->st_mode & (S_IFMT | 07777);
	e->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	e->size = (uint64_t)st->st_size;
	e->ino = (uint64_t)st->st_ino;
	e->part = UINT32_MAX;
	e->follow = (uint8_t)s->follow;
	if (s->o->ctime)
		ds__pentry_xnew(t, e)->ctime_ns =
			(int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	return e;
}

struct ds__pextra *ds__pentry_xnew(struct ds__tree *t, struct ds__pentry *e)
{
	if (!e->x) {
		if (t->nx == t->xcap) {
			t->xcap = t->xcap ? 2 * t->xcap : 64;
			t->x = ds_xrealloc(t->x, t->xcap * sizeof(*t->x));
		}
		memset(&t->x[t->nx], 0, sizeof(*t->x));
		e->x = (uint32_t)++t->nx;
	}
	return &t->x[e->x - 1];
}

static int excluded(const struct scan *s, const char *base)
{
	for (size_t i = 0; i < s->o->nexclude; i++)
		if (!fnmatch(s->o->exclude[i], s->path, 0) || !fnmatch(s->o->exclude[i], base, 0))
			return 1;
	return 0;
}

static void progress(struct scan *s)
{
	if (!s->o->progress)
		return;
	double now = ds_now();
	if (now < s->next_progress)
		return;
	s->next_progress = now + s->o->progress;
	fprintf(stderr, "dstage: pack: scanning: %zu entries\n", s->t->n);
}

/* Append "/name" (or "name" at the top) to s->path; 0 or -ENAMETOOLONG. */
static int push_name(struct scan *s, const char *name)
{
	size_t nl = strlen(name), add = nl + (s->len ? 1 : 0);
	if (s->len + add >= PATH_MAX) {
		s->path[s->len] = '\0';
		return fail(s, -DS_ENAME, "name longer than PATH_MAX below this directory");
	}
	if (s->len)
		s->path[s->len++] = '/';
	memcpy(s->path + s->len, name, nl + 1);
	s->len += nl;
	return 0;
}

static void pop_name(struct scan *s, size_t len)
{
	s->len = len;
	s->path[len] = '\0';
}

/* The names in a directory, NUL-separated; the stream is closed before we
 * descend, so the walk holds one descriptor per level. */
static int read_names(const struct scan *s, int dfd, struct ds_buf *names)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return fail(s, -err, strerror(err));
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ds_buf_add(names, de->d_name, strlen(de->d_name) + 1);
	}
	int err = errno;
	closedir(d);
	return err ? fail(s, -err, strerror(err)) : 0;
}

static int walk_dir(struct scan *s, int dfd, const struct stat *st);

static int visit_dir(struct scan *s, int dfd, const char *name, const struct stat *st, int recurse)
{
	add_entry(s, st);
	s->t->ndirs++;
	if (!recurse)
		return 0;
	int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (s->follow ? 0 : O_NOFOLLOW);
	int fd = openat(dfd, name, flags);
	if (fd < 0)
		return fail(s, -errno, strerror(errno));
	int rc = walk_dir(s, fd, st);
	close(fd);
	return rc;
}

/* A symlink that leaves SRC, under --dereference: pack what it points to. */
static int visit_dereferenced(struct scan *s, int dfd, const char *name, int recurse)
{
	struct stat st;
	if (fstatat(dfd, name, &st, 0) < 0) {
		warn_skip(s, "symlink points outside the source tree to nothing");
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		add_entry(s, &st)->follow = 1;
		s->t->nfiles++;
		s->t->bytes += (uint64_t)st.st_size;
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		warn_skip(s, "symlink points outside the source tree to a special file");
		return 0;
	}
	int was = s->follow;
	s->follow = 1;
	int rc = visit_dir(s, dfd, name, &st, recurse);
	s->follow = was;
	return rc;
}

static int visit_symlink(struct scan *s, int dfd, const char *name, const struct stat *st, int recurse)
{
	char target[PATH_MAX];
	const char *why;
	ssize_t n = readlinkat(dfd, name, target, sizeof(target));
	if (n < 0)
		return fail(s, -errno, strerror(errno));
	if ((size_t)n >= sizeof(target)) {
		warn_skip(s, "symlink target longer than PATH_MAX");
		return 0;
	}
	int rc = ds__target_check(s->path, strlen(s->path), target, (size_t)n, &why);
	if (rc == -DS_ENAME)
		return fail(s, rc, why); /* refused like a bad name */
	if (rc) {
		/* only leaves the tree: skipped, or its target packed */
		if (s->o->dereference)
			return visit_dereferenced(s, dfd, name, recurse);
		warn_skip(s, "symlink points outside the source tree (--dereference packs its target)");
		return 0;
	}
	struct ds__pentry *e = add_entry(s, st);
	e->size = (uint64_t)n;
	e->target = add_string(s->t, target, (size_t)n);
	e->target_len = (uint32_t)n;
	s->t->nlinks++;
	return 0;
}

static const char *special_kind(mode_t m)
{
	return S_ISFIFO(m) ? "FIFO" : S_ISSOCK(m) ? "socket" : S_ISCHR(m) ? "character device"
	       : S_ISBLK(m) ? "block device" : "special file";
}

/* --expand-tar: is this file name a tar shard's ("X.tar")? */
static int tar_name(const char *base)
{
	size_t n = strlen(base);
	return n > 4 && !strcmp(base + n - 4, ".tar");
}

/* --expand-tar: is the member s->path ("X.tar/a/b", the tar's path
 * tarlen bytes long) or a directory of the tar above it excluded?  The
 * member's path under SRC and its name are matched as a file's are; an
 * excluded directory of the tar takes its members along, whatever order
 * the tar lists them in. */
static int member_excluded(struct scan *s, size_t tarlen)
{
	int x = 0;
	for (size_t end = s->len; !x && end > tarlen;) {
		char save = s->path[end];
		s->path[end] = '\0';
		const char *slash = strrchr(s->path + tarlen, '/');
		x = excluded(s, slash + 1);
		s->path[end] = save;
		end = (size_t)(slash - s->path);
	}
	return x;
}

/* --expand-tar: the tar X.tar (s->path) becomes the directory X.tar of its
 * members, each file's bytes read from the tar where they lie (src = the
 * tar, src_off = the member's data).  The directory keeps the tar's size
 * and mtime: what stage checks the tar against (docs/formats.md, "Tar
 * shards"). */
static int visit_tar(struct scan *s, int dfd, const char *name, const struct stat *st)
{
	char q[2 * PATH_MAX];
	struct stat at;
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (s->follow ? 0 : O_NOFOLLOW);
	int fd = openat(dfd, name, flags);
	if (fd < 0)
		return fail(s, -errno,
		            errno == ENOENT ? "vanished while packing" : strerror(errno));
	if (fstat(fd, &at) < 0 || !S_ISREG(at.st_mode) || at.st_dev != st->st_dev ||
	    at.st_ino != st->st_ino) {
		close(fd);
		return fail(s, -ESTALE, "changed while it was scanned");
	}
	struct ds__tar_member *v;
	size_t n;
	int rc = ds__tar_scan(fd, quoted(s, q, sizeof(q)), &v, &n);
	close(fd);
	if (rc)
		return rc;
	struct ds__pentry *d = add_entry(s, &at);
	uint32_t perm = d->mode & 0777;
	d->mode = S_IFDIR | perm | ((perm & 0444) >> 2); /* readable: searchable */
	uint64_t tar_path = d->path, ino = d->ino;
	s->t->ndirs++;
	size_t len = s->len;
	for (size_t i = 0; !rc && i < n; i++) {
		const struct ds__tar_member *m = &v[i];
		size_t ml = strlen(m->name);
		if (len + 1 + ml >= PATH_MAX) {
			rc = fail(s, -DS_ENAME,
			          "a member's name makes a path longer than PATH_MAX");
			break;
		}
		s->path[len] = '/';
		memcpy(s->path + len + 1, m->name, ml + 1);
		s->len = len + 1 + ml;
		if (s->o->nexclude && member_excluded(s, len)) {
			pop_name(s, len);
			continue;
		}
		struct ds__pentry *e = add_entry(s, &at);
		e->mode = m->mode;
		e->mtime_ns = m->mtime_ns;
		e->size = m->size;
		e->ino = ino;
		if (S_ISREG(m->mode)) {
			struct ds__pextra *x = ds__pentry_xnew(s->t, e);
			x->src = tar_path;
			x->src_len = (uint32_t)len;
			x->src_off = m->data_off;
			s->t->nfiles++;
			s->t->bytes += m->size;
		} else if (S_ISLNK(m->mode)) {
			e->target_len = (uint32_t)strlen(m->target);
			e->target = add_string(s->t, m->target, e->target_len);
			s->t->nlinks++;
		} else {
			s->t->ndirs++;
		}
		pop_name(s, len);
	}
	ds__tar_free(v, n);
	return rc;
}

/* One entry: s->path already names it; dfd/name reach it. */
static int visit(struct scan *s, int dfd, const char *name, const char *base, int recurse)
{
	const char *why;
	struct stat st;
	progress(s);
	if (excluded(s, base))
		return 0;
	if (ds_name_check(s->path, s->len, &why) || ds_name_reserved(s->path, s->len, &why))
		return fail(s, -DS_ENAME, why);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(s, -errno, errno == ENOENT ? "vanished while packing" : strerror(errno));
	if (S_ISDIR(st.st_mode))
		return visit_dir(s, dfd, name, &st, recurse);
	if (S_ISLNK(st.st_mode))
		return visit_symlink(s, dfd, name, &st, recurse);
	if (!S_ISREG(st.st_mode)) {
		warn_skip(s, special_kind(st.st_mode));
		return 0;
	}
	if (s->o->expand_tar && tar_name(base)) {
		if (!s->o->tars)
			return visit_tar(s, dfd, name, &st);
		ds_buf_add(s->o->tars, s->path, s->len + 1); /* scanned later, by some rank */
		return 0;
	}
	add_entry(s, &st);
	s->t->nfiles++;
	s->t->bytes += (uint64_t)st.st_size;
	return 0;
}

static int walk_dir(struct scan *s, int dfd, const struct stat *st)
{
	/* a dereferenced directory may contain a way back up: stop at a loop */
	for (size_t i = 0; i < s->nanc; i++)
		if (s->anc[i].dev == st->st_dev && s->anc[i].ino == st->st_ino)
			return fail(s, -ELOOP, "directory loop through a dereferenced symlink");
	if (s->nanc == s->capanc) {
		s->capanc = s->capanc ? 2 * s->capanc : 64;
		s->anc = ds_xrealloc(s->anc, s->capanc * sizeof(*s->anc));
	}
	s->anc[s->nanc++] = (struct ancestor){st->st_dev, st->st_ino};

	struct ds_buf names = {0};
	int rc = read_names(s, dfd, &names);
	size_t len = s->len;
	if (!rc && ds_stop_signal())
		rc = fail(s, -EINTR, ds_stop_why()); /* a walk of millions of names stops too */
	for (size_t off = 0; !rc && off < names.len; off += strlen(names.data + off) + 1) {
		const char *name = names.data + off;
		if (!(rc = push_name(s, name)))
			rc = visit(s, dfd, name, name, 1);
		pop_name(s, len);
	}
	ds_buf_release(&names);
	s->nanc--;
	return rc;
}

/* ---- --files-from ------------------------------------------------------- */
/* Strip "./" prefixes, trailing '/' and a final '\n'. */
static size_t tidy_line(char *line, size_t n)
{
	if (n && line[n - 1] == '\n')
		line[--n] = '\0';
	size_t skip = 0;
	while (n - skip >= 2 && line[skip] == '.' && line[skip + 1] == '/') {
		skip += 2;
		while (skip < n && line[skip] == '/')
			skip++;
	}
	memmove(line, line + skip, n - skip + 1);
	n -= skip;
	while (n && line[n - 1] == '/')
		line[--n] = '\0';
	return n;
}

/* Add the directories leading to s->path (each once when the list is
 * sorted: those shared with the previous line are already there).  Returns
 * 1 when one of them is excluded: the listed path goes with it. */
static int add_parents(struct scan *s, const char *prev, size_t prevlen)
{
	size_t len = s->len;
	int rc = 0;
	for (size_t i = 0; !rc && i < len; i++) {
		if (s->path[i] != '/')
			continue;
		struct stat st;
		int known = i < prevlen && prev[i] == '/' && !memcmp(prev, s->path, i);
		const char *slash;
		s->path[i] = '\0';
		s->len = i;
		slash = strrchr(s->path, '/');
		if (excluded(s, slash ? slash + 1 : s->path))
			rc = 1;
		else if (known)
			; /* added for the previous line */
		else if (fstatat(s->o->srcfd, s->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = fail(s, -errno, strerror(errno));
		else if (!S_ISDIR(st.st_mode))
			rc = fail(s, -ENOTDIR, "not a directory (a parent in --files-from)");
		else {
			add_entry(s, &st);
			s->t->ndirs++;
		}
		s->path[i] = '/';
		s->len = len;
	}
	return rc;
}

static int scan_list(struct scan *s)
{
	const char *file = s->o->files_from;
	FILE *f = strcmp(file, "-") ? fopen(file, "r") : stdin;
	if (!f) {
		ds_error("'%s': %s", file, strerror(errno));
		return -errno;
	}
	char *line = NULL, prev[PATH_MAX];
	size_t cap = 0, prevlen = 0;
	ssize_t n;
	int rc = 0;
	for (unsigned long lineno = 1; !rc && (n = getline(&line, &cap, f)) >= 0; lineno++) {
		size_t len = tidy_line(line, (size_t)n);
		const char *why;
		if (ds_stop_signal()) {
			ds_error("'%s': %s", file, ds_stop_why());
			rc = -EINTR;
			break;
		}
		if (!len)
			continue;
		if (len >= PATH_MAX || ds_name_check(line, len, &why) ||
		    ds_name_reserved(line, len, &why)) {
			char q[PATH_MAX + 64];
			ds_error("'%s': line %lu ('%s'): %s", file, lineno, ds__quote(line, len, q, sizeof(q)),
			         len >= PATH_MAX ? "name longer than PATH_MAX" : why);
			rc = -DS_ENAME;
			break;
		}
		memcpy(s->path, line, len + 1);
		s->len = len;
		const char *slash = strrchr(line, '/');
		if (excluded(s, slash ? slash + 1 : line))
			continue; /* and its parents do not come along for it */
		if (!(rc = add_parents(s, prev, prevlen)))
			rc = visit(s, s->o->srcfd, s->path, slash ? slash + 1 : line, 0);
		else if (rc == 1)
			rc = 0; /* under an excluded directory */
		memcpy(prev, line, len + 1);
		prevlen = len;
	}
	if (!rc && ferror(f)) {
		ds_error("'%s': %s", file, strerror(errno));
		rc = -EIO;
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* ---- sorting, replicated subtrees --------------------------------------- */
static int entry_cmp(const void *a, const void *b, void *names)
{
	const char *n = names;
	return ds_path_cmp(n + ((const struct ds__pentry *)a)->path,
	                   n + ((const struct ds__pentry *)b)->path);
}

/* Sort by path; drop repeats (--files-from may list a path twice). */
static void sort_unique(struct ds__tree *t)
{
	if (t->n > 1) /* qsort_r(NULL, 0, ...) is undefined */
		qsort_r(t->e, t->n, sizeof(*t->e), entry_cmp, t->names.data);
	size_t w = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (w && !strcmp(ds__tree_path(t, &t->e[w - 1]), ds__tree_path(t, &t->e[i]))) {
			/* a repeat counted twice in the totals */
			if (S_ISREG(t->e[i].mode))
				t->nfiles--, t->bytes -= t->e[i].size;
			else if (S_ISDIR(t->e[i].mode))
				t->ndirs--;
			else
				t->nlinks--;
			continue;
		}
		t->e[w++] = t->e[i];
	}
	t->n = w;
}

static const char *pentry_path(const void *t, size_t i)
{
	return ds__tree_path(t, &((const struct ds__tree *)t)->e[i]);
}

int64_t ds__tree_find(const struct ds__tree *t, const char *path)
{
	return ds__path_find(t->n, pentry_path, t, path);
}

/* Flag a --replicate subpath and its subtree (contiguous after it). */
static int mark_replicated(struct ds__tree *t, const char *sub, const char *verb)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", sub);
	size_t len = tidy_line(path, strlen(path));
	int64_t i = len ? ds__tree_find(t, path) : -1;
	if (i < 0) {
		ds_error("'%s': --replicate path not in the %s tree", sub,
		         verb ? "staged" : "packed");
		return -ENOENT;
	}
	for (size_t k = (size_t)i; k < t->n; k++) {
		const char *p = ds__tree_path(t, &t->e[k]);
		if (k > (size_t)i && (strncmp(p, path, len) || p[len] != '/'))
			break;
		t->e[k].flags |= DS_EF_REPLICATED;
	}
	return 0;
}

/* What every walk ends with: an empty selection refused, the entries
 * sorted, replicated subtrees flagged, the count bounded. */
int ds__scan_finish(const struct ds__scan_opts *o, struct ds__tree *t)
{
	int rc;
	/* An empty selection is an error, not an empty pack: a training set
	 * that silently came out empty is what dstage is here to prevent. */
	if (!t->nfiles) {
		ds_error("'%s': nothing to %s (no regular files%s)", o->src,
		         o->verb ? o->verb : "pack",
		         o->files_from ? " listed in --files-from"
		         : o->nexclude ? " left after --exclude"
		                       : "");
		return -ENOENT;
	}
	sort_unique(t);
	for (size_t i = 0; i < o->nreplicate; i++)
		if ((rc = mark_replicated(t, o->replicate[i], o->verb)))
			return rc;
	if (t->n > DS__MAX_ENTRIES) {
		ds_error("'%s': %zu entries, more than dstage supports", o->src, t->n);
		return -E2BIG;
	}
	return 0;
}

int ds__scan_walk(const struct ds__scan_opts *o, struct ds__tree *t)
{
	struct scan s = {.o = o, .t = t};
	struct stat st;
	int rc;
	memset(t, 0, sizeof(*t));
	if (fstat(o->srcfd, &st) < 0)
		return fail(&s, -errno, strerror(errno));
	s.next_progress = ds_now() + o->progress;
	rc = o->files_from ? scan_list(&s) : walk_dir(&s, o->srcfd, &st);
	free(s.anc);
	return rc;
}

int ds__scan(const struct ds__scan_opts *o, struct ds__tree *t)
{
	int rc = ds__scan_walk(o, t);
	return rc ? rc : ds__scan_finish(o, t);
}

/* ---- a walk shared by the ranks of a job (a plain tree staged) ----------- */
/* Directory dir ("" for SRC) open below SRC, no symlink followed on the way:
 * its parents were walked by another rank, and may have been swapped since. */
static int open_dir(struct scan *s, const char *dir, int *fd, struct stat *st)
{
	int rc = 0;
	if (!*dir)
		*fd = s->o->srcfd;
	else
		rc = ds__open_beneath(s->o->srcfd, dir, O_DIRECTORY, fd);
	if (rc)
		return fail(s, rc, rc == -ELOOP || rc == -EXDEV
		                       ? "now reached through a symlink: refused"
		                       : rc == -ENOENT ? "vanished while scanning" : ds_strerror(rc));
	if (fstat(*fd, st) < 0) {
		rc = -errno;
		if (*dir)
			close(*fd);
		return fail(s, rc, ds_strerror(rc));
	}
	return 0;
}

static int set_path(struct scan *s, const char *dir)
{
	size_t n = strlen(dir);
	if (n >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(s->path, dir, n + 1);
	s->len = n;
	return 0;
}

int ds__scan_tar(const struct ds__scan_opts *o, const char *path, struct ds__tree *t)
{
	struct scan s = {.o = o, .t = t};
	struct stat st;
	int rc = set_path(&s, path);
	if (rc)
		return rc;
	if (fstatat(o->srcfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(&s, -errno,
		            errno == ENOENT ? "vanished while it was scanned" : strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fail(&s, -ESTALE, "changed while it was scanned");
	return visit_tar(&s, o->srcfd, path, &st);
}

int ds__scan_list_dir(const struct ds__scan_opts *o, const char *dir, struct ds__tree *t,
                      struct ds_buf *subdirs)
{
	struct scan s = {.o = o, .t = t};
	struct stat st;
	int fd, rc = set_path(&s, dir);
	if (rc || (rc = open_dir(&s, dir, &fd, &st)))
		return rc;
	struct ds_buf names = {0};
	rc = read_names(&s, fd, &names);
	size_t len = s.len;
	for (size_t off = 0; !rc && off < names.len; off += strlen(names.data + off) + 1) {
		const char *name = names.data + off;
		size_t before = t->n;
		if (ds_stop_signal()) {
			rc = fail(&s, -EINTR, ds_stop_why());
			break;
		}
		if (!(rc = push_name(&s, name)))
			rc = visit(&s, fd, name, name, 0);
		if (!rc && t->n > before && S_ISDIR(t->e[t->n - 1].mode))
			ds_buf_add(subdirs, s.path, s.len + 1);
		pop_name(&s, len);
	}
	ds_buf_release(&names);
	if (*dir)
		close(fd);
	return rc;
}

int ds__scan_walk_dir(const struct ds__scan_opts *o, const char *dir, struct ds__tree *t)
{
	struct scan s = {.o = o, .t = t};
	struct stat st;
	int fd, rc = set_path(&s, dir);
	if (rc || (rc = open_dir(&s, dir, &fd, &st)))
		return rc;
	rc = walk_dir(&s, fd, &st);
	free(s.anc);
	if (*dir)
		close(fd);
	return rc;
}

void ds__tree_merge(struct ds__tree *dst, const struct ds__tree *src)
{
	uint64_t base = dst->names.len;
	ds_buf_add(&dst->names, src->names.data, src->names.len);
	if (dst->n + src->n > dst->cap) {
		dst->cap = dst->n + src->n + 1;
		dst->e = ds_xrealloc(dst->e, dst->cap * sizeof(*dst->e));
	}
	uint32_t xbase = (uint32_t)dst->nx;
	if (dst->nx + src->nx > dst->xcap) {
		dst->xcap = dst->nx + src->nx + 1;
		dst->x = ds_xrealloc(dst->x, dst->xcap * sizeof(*dst->x));
	}
	for (size_t i = 0; i < src->nx; i++) {
		struct ds__pextra *x = &dst->x[dst->nx++];
		*x = src->x[i];
		if (x->src_len)
			x->src += base;
	}
	for (size_t i = 0; i < src->n; i++) {
		struct ds__pentry *e = &dst->e[dst->n++];
		*e = src->e[i];
		e->path += base;
		if (e->target_len)
			e->target += base;
		if (e->x)
			e->x += xbase;
	}
	dst->nfiles += src->nfiles;
	dst->ndirs += src->ndirs;
	dst->nlinks += src->nlinks;
	dst->bytes += src->bytes;
}

void ds__tree_release(struct ds__tree *t)
{
	ds_free(&t->e);
	ds_free(&t->x);
	ds_buf_release(&t->names);
	t->n = t->cap = t->nx = t->xcap = 0;
}
