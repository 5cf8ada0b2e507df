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
	"in path order; directories end with '/'.\n"
	"\n"
	"  -l, --long   mode, size, modification time, path (symlinks: -> target),\n"
	"               like tar tv\n"
	"  -h, --help   this text\n";

static const char cat_usage[] =
	"usage: dstage cat OUT PATH\n"
	"\n"
	"Write file PATH of the pack in OUT to standard output, decompressed, after\n"
	"checking its CRC-32C (files over 64 MiB: streamed, checked at the end).\n"
	"Symlinks inside the pack are followed.\n"
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

/* "./a/b/" -> "a/b"; "." and "/" -> "". */
static void tidy(char *p)
{
	size_t n = strlen(p), skip = 0;
	while (skip < n && p[skip] == '/')
		skip++;
	while (n - skip >= 2 && p[skip] == '.' && p[skip + 1] == '/')
		for (skip += 2; skip < n && p[skip] == '/'; skip++)
			;
	if (n - skip == 1 && p[skip] == '.')
		skip = n;
	memmove(p, p + skip, n - skip + 1);
	n -= skip;
	while (n && p[n - 1] == '/')
		p[--n] = '\0';
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
	if (ds_manifest_read(argv[optind], &m))
		return 1;
	char path[PATH_MAX] = "";
	if (argc - optind == 2)
		snprintf(path, sizeof(path), "%s", argv[optind + 1]);
	tidy(path);
	size_t first = 0, len = strlen(path);
	if (len) {
		int64_t i = ds__manifest_find(&m, path);
		if (i < 0) {
			ds_error("'%s': not in the pack", argv[optind + 1]);
			ds_manifest_release(&m);
			return 1;
		}
		first = (size_t)i;
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
/* Resolve a symlink's target inside the pack: lexically, from the link's
 * directory (the manifest guarantees it stays inside). */
static void resolve(const char *link, const char *target, char *out, size_t cap)
{
	char buf[2 * PATH_MAX + 2];
	const char *slash = strrchr(link, '/');
	snprintf(buf, sizeof(buf), "%.*s%s%s", slash ? (int)(slash - link) : 0, link, slash ? "/" : "",
	         target);
	size_t w = 0;
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			while (w && out[w - 1] != '/')
				w--;
			if (w)
				w--;
			continue;
		}
		w += (size_t)snprintf(out + w, cap - w, "%s%s", w ? "/" : "", c);
		if (w >= cap)
			w = cap - 1;
	}
	out[w] = '\0';
}

static int64_t find_file(const struct ds_manifest *m, const char *arg)
{
	char path[PATH_MAX], next[PATH_MAX];
	snprintf(path, sizeof(path), "%s", arg);
	tidy(path);
	for (int hops = 0; hops <= MAX_LINK_HOPS; hops++) {
		int64_t i = ds__manifest_find(m, path);
		if (i < 0) {
			ds_error("'%s': not in the pack", arg);
			return -1;
		}
		const struct ds_mentry *e = &m->e[i];
		if (S_ISREG(e->mode))
			return i;
		if (S_ISDIR(e->mode)) {
			ds_error("'%s': is a directory", arg);
			return -1;
		}
		resolve(e->path, e->target, next, sizeof(next));
		memcpy(path, next, sizeof(path));
	}
	ds_error("'%s': too many levels of symbolic links", arg);
	return -1;
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
	int rc = ds__part_open(packdir, e->part, m, &p, NULL);
	if (rc)
		return rc;
	int buffered = e->size <= CAT_BUFFERED;
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
	if (ds_manifest_read(argv[optind], &m))
		return 1;
	int64_t i = find_file(&m, argv[optind + 1]);
	rc = i < 0 ? -ENOENT : cat_one(argv[optind], &m, &m.e[i]);
	ds_manifest_release(&m);
	return rc ? 1 : 0;
}
