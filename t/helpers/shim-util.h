/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-util.h: what the shim's family test programs (t/helpers/shim-*.c)
 * share.  Each program runs the same calls on ROOT, once natively on the
 * source tree and once through the shim on the mount, and prints one line
 * per call (return value, errno name, data); t/2NNN tests diff the two.
 * Nothing printed may depend on where the tree is: no paths above ROOT, no
 * descriptor numbers, no st_dev/st_ino/st_blocks/atime/ctime. */
#ifndef SHIM_UTIL_H
#define SHIM_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static inline const char *errname(int e)
{
	switch (e) {
	case 0: return "0";
	case ENOENT: return "ENOENT";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case ELOOP: return "ELOOP";
	case EROFS: return "EROFS";
	case EBADF: return "EBADF";
	case EINVAL: return "EINVAL";
	case EEXIST: return "EEXIST";
	case EACCES: return "EACCES";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENODATA: return "ENODATA";
	case ENXIO: return "ENXIO";
	case ESPIPE: return "ESPIPE";
	case EFAULT: return "EFAULT";
	case ERANGE: return "ERANGE";
	case ENODEV: return "ENODEV";
	case EXDEV: return "EXDEV";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EIO: return "EIO";
	case EPERM: return "EPERM";
	case ENOTSUP: return "ENOTSUP";
	default: {
		static char buf[32];
		snprintf(buf, sizeof(buf), "E%d", e);
		return buf;
	}
	}
}

/* One path a line from stdin (the list the test makes from the tree plus
 * its tricky names); "." is ROOT itself. */
static inline char **read_paths(size_t *n)
{
	char **v = NULL, *line = NULL;
	size_t cap = 0, len = 0;
	ssize_t k;
	*n = 0;
	while ((k = getline(&line, &len, stdin)) >= 0) {
		if (k && line[k - 1] == '\n')
			line[--k] = 0;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			v = realloc(v, cap * sizeof(*v));
		}
		v[(*n)++] = strdup(line);
	}
	free(line);
	return v;
}

/* "ROOT/p" (p "." -> ROOT) into buf. */
static inline const char *join(char *buf, size_t len, const char *root, const char *p)
{
	if (!strcmp(p, "."))
		snprintf(buf, len, "%s", root);
	else
		snprintf(buf, len, "%s/%s", root, p);
	return buf;
}

/* Whether to print the mtime of p (tests make the source root's 0, as the
 * store has it). */
static inline int show_mtime(const char *p)
{
	(void)p;
	return 1;
}

static inline void print_stat(const char *p, const struct stat *st)
{
	printf(" mode=%o nlink=%lu uid=%u gid=%u size=%lld", st->st_mode,
	       (unsigned long)st->st_nlink, st->st_uid, st->st_gid, (long long)st->st_size);
	if (show_mtime(p))
		printf(" mtime=%lld.%09ld", (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

/* FNV-1a of bytes: short, stable lines for data. */
static inline unsigned long long fnv(const void *p, size_t n)
{
	const unsigned char *s = p;
	unsigned long long h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif
