/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_read.c: `dstage ls [-l] OUT [PATH]` and `dstage cat OUT PATH`. */
#include "pack_int.h"

#include <getopt.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Files up to this size are checked before the first byte reaches stdout;
 * larger ones are streamed, and a mismatch is reported at the end. */
#define CAT_BUFFERED (64u << 20)
#define MAX_LINK_HOPS 40

static const char ls_usage[] =
	"usage: dstage ls [-l] OUT [PATH]\n"
	"\n"
	"List what the pack in OUT holds (all of it, or PATH and what is under it),\n"
	"in path order; directories end with '/'.  OUT may be s3://BUCKET/PREFIX.\n"
	"\n"
	"  -l, --long   mode, size, modification time, path (symlinks: -> target),\n"
	"               like tar tv\n"
	"  -h, --help   this text\n";

static const char cat_usage[] =
	"usage: dstage cat OUT PATH\n"
	"\n"
	"Write file PATH of the pack in OUT to standard output, decompressed, after\n"
	"checking its CRC-32C (files over 64 MiB: streamed, checked at the end).\n"
	"Symlinks inside the pack are followed.  OUT may be s3://BUCKET/PREFIX.\n"
	"\n"
	"  -h, --help   this text\n";

/* getopt over a command's own options; 1: help printed, -1: usage error. */
static int parse(int argc, char **argv, const char *usage, int *lflag)
{
	static const struct option longs[] = {{"long", no_argument, NULL, 'l'},
	                                      {"help", no_argument, NULL, 'h'},
	                                      {NULL, 0, NULL, 0}};
	int ch;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, lflag ? "lh" : "h", longs, NULL)) != -1) {
		if (ch == 'h') {
			fputs(usage, stdout);
			return 1;
		}
		if (ch == 'l' && lflag) {
			*lflag = 1;
			continue;
		}
		ds_error("'%s': unknown option (see 'dstage %s --help')", argv[optind - 1], argv[0]);
		return -1;
	}
	return 0;
}

/* ---- paths ---------------------------------------------------------------- */
/* Resolve PATH in the pack the way the shim resolves MOUNT/PATH (io/path.c),
 * and the kernel a real path: component by component, "//" and "." dropped,
 * ".." to the parent, symlinks in inner components followed (in the last
 * one too when follow_last, or when a '/' follows it), 40 at most, a
 * component under a file is ENOTDIR.  Where the shim leaves the mount (".."
 * above its root) this refuses: a pack has nothing above its root.  Returns
 * the entry's index, -1 for the root itself, or a negative errno - 1
 * (reported). */
#define RES_ROOT (-1)
static int64_t walk(const struct ds_manifest *m, const char *arg, int follow_last)
{
	char work[PATH_MAX], cur[PATH_MAX], cand[PATH_MAX];
	size_t clen = 0; /* cur: the directory reached, "" is the root */
	int64_t id = RES_ROOT;
	int links = 0;
	if (strlen(arg) >= sizeof(work)) {
		ds_error("'%s': %s", arg, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG - 1;
	}
	snprintf(work, sizeof(work), "%s", arg);
	cur[0] = '\0';
	char *p = work;
	int err = 0;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *c = p;
		while (*p && *p != '/')
			p++;
		size_t cl = (size_t)(p - c);
		const char *q = p;
		while (*q == '/')
			q++;
		int last = !*q, trail = last && *p == '/';
		if (id != RES_ROOT && !S_ISDIR(m->e[id].mode)) {
			err = ENOTDIR;
			break;
		}
		if (cl == 1 && c[0] == '.')
			continue;
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			if (!clen) {
				ds_error("'%s': leaves the pack (\"..\" above its root)", arg);
				return -EXDEV - 1;
			}
			while (clen && cur[clen - 1] != '/')
				clen--;
			if (clen)
				clen--;
			cur[clen] = '\0';
			id = clen ? ds__manifest_find(m, cur) : RES_ROOT;
			continue;
		}
		if (cl > NAME_MAX || clen + 1 + cl >= sizeof(cand)) {
			err = ENAMETOOLONG;
			break;
		}
		int n = snprintf(cand, sizeof(cand), "%s%s%.*s", cur, clen ? "/" : "", (int)cl, c);
		int64_t nx = ds__manifest_find(m, cand);
		if (nx < 0) {
			err = ENOENT;
			break;
		}
		const struct ds_mentry *e = &m->e[nx];
		if (S_ISLNK(e->mode) && (!last || trail || follow_last)) {
			if (++links > MAX_LINK_HOPS) {
				err = ELOOP;
				break;
			}
			/* the target, then the rest of the path; a relative target
			 * starts from the directory holding the link (cur).  The
			 * manifest reader let only targets that stay inside through */
			size_t tl = strlen(e->target), rl = strlen(p);
			if (!e->target[0] || e->target[0] == '/') {
				ds_error("'%s': symlink '%s' leaves the pack", arg, e->path);
				return -EXDEV - 1;
			}
			if (tl + rl + 1 >= sizeof(work)) {
				err = ENAMETOOLONG;
				break;
			}
			memmove(work + tl, p, rl + 1);
			memcpy(work, e->target, tl);
			p = work;
			continue;
		}
		memcpy(cur, cand, (size_t)n + 1);
		clen = (size_t)n;
		id = nx;
		if (trail && !S_ISDIR(e->mode) && !S_ISLNK(e->mode)) {
			err = ENOTDIR;
			break;
		}
	}
	if (err) {
		ds_error("'%s': %s", arg, err == ENOENT ? "not in the pack" : strerror(err));
		return -err - 1;
	}
	return id;
}

/* ---- ls ----------------------------------------------------------------- */
static void print_long(const struct ds_mentry *e)
{
	char mode[11], when[32];
	ds__mode_string(e->mode, mode);
	time_t t = (time_t)(e->mtime_ns / 1000000000);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm))
		snprintf(when, sizeof(when), "?");
	printf("%s %12llu %s %s%s", mode, (unsigned long long)e->size, when, e->path,
	       S_ISDIR(e->mode) ? "/" : "");
	if (e->target)
		printf(" -> %s", e->target);
	putchar('\n');
}

int ds_cmd_ls(int argc, char **argv)
{
	int lflag = 0, rc = parse(argc, argv, ls_usage, &lflag);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (argc - optind < 1 || argc - optind > 2) {
		ds_error("wants OUT and at most one PATH (see 'dstage ls --help')");
		return 2;
	}
	struct ds_manifest m;
	if (ds__manifest_any(argv[optind], &m))
		return 1;
	/* PATH resolves as through the shim: inner symlinks followed, the last
	 * one listed as itself (as ls -l does), "a//b" and "./a" accepted */
	char path[PATH_MAX] = "";
	size_t first = 0, len = 0;
	if (argc - optind == 2) {
		int64_t i = walk(&m, argv[optind + 1], 0);
		if (i < -1) {
			ds_manifest_release(&m);
			return 1;
		}
		if (i >= 0) {
			first = (size_t)i;
			snprintf(path, sizeof(path), "%s", m.e[i].path);
			len = strlen(path);
		}
	}
	for (size_t i = first; i < m.n; i++) {
		const struct ds_mentry *e = &m.e[i];
		/* a subtree is contiguous after its directory */
		if (len && i > first && (strncmp(e->path, path, len) || e->path[len] != '/'))
			break;
		if (lflag)
			print_long(e);
		else
			printf("%s%s\n", e->path, S_ISDIR(e->mode) ? "/" : "");
	}
	ds_manifest_release(&m);
	if (fflush(stdout) || ferror(stdout)) {
		ds_error("standard output: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* ---- cat ---------------------------------------------------------------- */
static int64_t find_file(const struct ds_manifest *m, const char *arg)
{
	int64_t i = walk(m, arg, 1);
	if (i < -1)
		return -1;
	if (i == RES_ROOT || S_ISDIR(m->e[i].mode)) {
		ds_error("'%s': is a directory", arg);
		return -1;
	}
	return i;
}

static int to_buf(void *ctx, const void *p, size_t n)
{
	ds_buf_add(ctx, p ? p : ds__zeros, n);
	return 0;
}

static int to_stdout(void *ctx, const void *p, size_t n)
{
	(void)ctx;
	return ds_write_full(1, p ? p : ds__zeros, n);
}

static int cat_one(const char *packdir, const struct ds_manifest *m, const struct ds_mentry *e)
{
	struct ds__part p;
	struct ds_buf buf = {0};
	int buffered = e->size <= CAT_BUFFERED, rootfd = -1;
	if (m->root) {
		/* in place: read where it lies, checked; ds_src_* name what fails
		 * with the source, only a write to stdout is said here */
		int rc = ds_src_root_open(m, &rootfd);
		if (!rc)
			rc = ds_src_read_entry(rootfd, m, e, buffered ? to_buf : to_stdout, &buf);
		if (!rc && buffered && (rc = ds_write_full(1, buf.data, buf.len)))
			ds_error("standard output: %s", ds_strerror(rc));
		if (rootfd >= 0)
			close(rootfd);
		ds_buf_release(&buf);
		return rc;
	}
	int rc = ds__part_open(packdir, e->part, m, &p, NULL);
	if (rc)
		return rc;
	rc = ds__entry_read(&p, e, buffered ? to_buf : to_stdout, &buf);
	if (!rc && buffered)
		rc = ds_write_full(1, buf.data, buf.len);
	if (rc == -DS_ECHECKSUM || rc == -DS_ECORRUPT)
		ds_error("'%s': %s (%s)", e->path,
		         rc == -DS_ECHECKSUM ? "checksum mismatch" : "corrupt stored data", p.path);
	else if (rc)
		ds_error("'%s': %s", e->path, ds_strerror(rc));
	ds_buf_release(&buf);
	ds__part_close(&p);
	return rc;
}

int ds_cmd_cat(int argc, char **argv)
{
	int rc = parse(argc, argv, cat_usage, NULL);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (argc - optind != 2) {
		ds_error("wants OUT and PATH (see 'dstage cat --help')");
		return 2;
	}
	struct ds_manifest m;
	if (ds__manifest_any(argv[optind], &m))
		return 1;
	int64_t i = find_file(&m, argv[optind + 1]);
	rc = i < 0 ? -ENOENT : cat_one(argv[optind], &m, &m.e[i]);
	ds_manifest_release(&m);
	return rc ? 1 : 0;
}
