/* SPDX-License-Identifier: BSD-3-Clause */
/* tar.c: the members of a tar shard, read in place (--expand-tar; the
 * format notes are in docs/formats.md, "Tar shards").
 *
 * A tar is a sequence of 512-byte headers, each followed by its member's
 * data padded to 512 bytes; two zero blocks end it.  The scanner reads the
 * headers only and records where each file's data lies: one 512-byte read
 * per header while members average more than 8 KiB apart (a typical shard
 * of images: the scan reads about 1% of the tar), a 64 KiB window when
 * they are closer (a tar of small files, where a read per header would
 * cost more in calls than the few bytes it saves).  The input is
 * hostile, and these are the rules (t/0013-tar-scan.t, t/9052-t/9054):
 *
 *  - every header's checksum is verified (the unsigned sum, or the signed
 *    one old tars wrote); numbers are octal or GNU base-256; a size, an
 *    extended header or data that runs past the end of the file, and a file
 *    that ends without a zero block where the next header should be, are a
 *    truncated archive (a copy cut at a member boundary is caught too);
 *  - names: GNU 'L'/'K' long names and links, ustar's prefix, and pax 'x'
 *    headers (path, linkpath, size, mtime; the pax value wins over 'L', 'L'
 *    over the header) give a member's name; "./" prefixes and a directory's
 *    trailing '/' are dropped ("./" itself is the root and not listed); the
 *    rest must pass ds_name_check, the rule pack applies to a tree
 *    ('..', absolute, empty, NUL, newline, invalid UTF-8 are refused);
 *  - a symlink's target must stay inside the tar (ds__target_check from the
 *    member's directory); a member whose parent is a file or a symlink is
 *    refused (the tar-slip through a link); pax 'g' headers are skipped;
 *  - a hard link ('1') is a second name for the bytes of the latest earlier
 *    member of that name (a regular file, or a symlink re-checked from its
 *    new place); to anything else or nothing, it is refused;
 *  - sparse members (GNU 'S', pax GNU.sparse.*), multi-volume pieces ('M',
 *    'N') and unknown types are refused: their bytes do not lie as one range
 *    in the tar; devices and FIFOs are skipped with a warning, as pack skips
 *    them; a directory, link or device that claims data is refused (readers
 *    disagree on whether that data is skipped);
 *  - the same name twice: the last wins, as GNU tar's extraction leaves the
 *    tree, unless one is a directory and the other not (tar would have to
 *    remove a directory; refused);
 *  - the end: the first zero block; a lone zero block followed by more
 *    headers ends the archive there with a warning, as GNU tar does
 *    without --ignore-zeros. */
#include "tar.h"

#include "pack_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BLK 512u
#define WIN (64u * 1024u)
#define XHDR_MAX (1u << 20)            /* bytes of one pax extended header */
#define LONG_MAX_BYTES (2u * PATH_MAX) /* bytes of one GNU long name or link */

/* A member in archive order (seq), before the last-wins pass. */
struct item {
	struct ds__tar_member m;
	uint64_t seq;
};

/* What extended headers ('x', 'L', 'K') say about the next member. */
struct pend {
	int any;
	uint64_t at;         /* offset of the first one, for messages */
	char *lname, *llink; /* GNU 'L', 'K' */
	size_t lname_len, llink_len;
	char *xpath, *xlink; /* pax path, linkpath */
	size_t xpath_len, xlink_len;
	int has_xsize, has_xmtime;
	int sparse; /* pax GNU.sparse.* records */
	uint64_t xsize;
	int64_t xmtime;
};

struct tscan {
	int fd;
	const char *tar;
	uint64_t fsize;
	int64_t tar_mtime_ns;
	unsigned char *win; /* the window: bytes [woff, woff + wlen) */
	uint64_t stride;    /* running mean of the distance between headers */
	uint64_t woff;
	size_t wlen;
	struct item *v;
	size_t n, cap;
	size_t *slot; /* name -> latest item + 1, for hard links */
	size_t nslot, used;
};

/* ---- messages ----------------------------------------------------------- */
static int bad_at(const struct tscan *t, int rc, uint64_t off, const char *why)
{
	ds_error("'%s': at byte %llu: %s", t->tar, (unsigned long long)off, why);
	return rc;
}

static int bad_member(const struct tscan *t, int rc, const char *name, size_t len, const char *why)
{
	char q[2 * PATH_MAX];
	ds_error("'%s': member '%s': %s", t->tar, ds__quote(name, len, q, sizeof(q)), why);
	return rc;
}

/* ---- reading ------------------------------------------------------------ */
/* The block at off (off + BLK <= fsize, checked by the caller). */
static int block(struct tscan *t, uint64_t off, const unsigned char **b)
{
	if (off < t->woff || off + BLK > t->woff + t->wlen) {
		uint64_t left = t->fsize - off;
		size_t want = t->stride > WIN / 8 ? BLK : WIN;
		size_t len = left < want ? (size_t)left : want;
		int rc = ds_pread_full(t->fd, t->win, len, (off_t)off);
		if (rc) {
			t->wlen = 0;
			return bad_at(t, rc == -EIO ? -DS_ECORRUPT : rc, off,
			              rc == -EIO ? "shorter than when opened (changed while read)"
			                         : strerror(-rc));
		}
		t->woff = off;
		t->wlen = len;
	}
	*b = t->win + (off - t->woff);
	return 0;
}

/* len bytes at off into a new NUL-terminated buffer. */
static int read_data(struct tscan *t, uint64_t off, size_t len, char **out)
{
	char *buf = ds_xmalloc(len + 1);
	int rc = ds_pread_full(t->fd, buf, len, (off_t)off);
	if (rc) {
		free(buf);
		return bad_at(t, rc == -EIO ? -DS_ECORRUPT : rc, off,
		              rc == -EIO ? "shorter than when opened (changed while read)"
		                         : strerror(-rc));
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

static int all_zero(const unsigned char *b)
{
	for (unsigned i = 0; i < BLK; i++)
		if (b[i])
			return 0;
	return 1;
}

/* ---- numbers ------------------------------------------------------------ */
/* A numeric header field: octal (leading spaces, ended by a space or NUL,
 * nothing but spaces and NULs after; all blank is 0), or GNU base-256 when
 * the first byte is 0x80 (positive) or 0xff (negative, when allowed).
 * 0 and *v, or -1. */
static int num_field(const unsigned char *f, size_t len, int allow_neg, int64_t *v)
{
	if (f[0] == 0x80 || f[0] == 0xff) {
		int neg = f[0] == 0xff;
		if (neg && !allow_neg)
			return -1;
		/* all but the last 8 bytes are sign extension */
		for (size_t i = 1; i + 8 < len; i++)
			if (f[i] != (neg ? 0xff : 0))
				return -1;
		uint64_t x = 0;
		for (size_t i = len > 8 ? len - 8 : 1; i < len; i++)
			x = x << 8 | f[i];
		if (len <= 8 && neg)
			return -1; /* no field this short is signed */
		if (!neg && x > INT64_MAX)
			return -1;
		if (neg && x <= INT64_MAX)
			return -1;
		*v = (int64_t)x;
		return 0;
	}
	size_t i = 0;
	uint64_t x = 0;
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (x >> 60)
			return -1;
		x = x << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	if (x > INT64_MAX)
		return -1;
	*v = (int64_t)x;
	return 0;
}

static int checksum_ok(const unsigned char *h)
{
	int64_t want;
	if (num_field(h + 148, 8, 0, &want))
		return 0;
	uint64_t u = 0;
	int64_t s = 0;
	for (unsigned i = 0; i < BLK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];
		u += c;
		s += (signed char)c;
	}
	return (int64_t)u == want || s == want;
}

/* A decimal pax number: digits, for mtime an optional '-' and fraction.
 * Returns 0 and *v (size: bytes; mtime: nanoseconds), or -1. */
static int pax_number(const char *s, size_t len, int is_time, int64_t *v)
{
	size_t i = 0;
	int neg = 0;
	if (is_time && i < len && s[i] == '-')
		neg = 1, i++;
	if (i == len || s[i] < '0' || s[i] > '9')
		return -1;
	uint64_t x = 0;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	uint64_t frac = 0;
	if (is_time && i < len && s[i] == '.') {
		unsigned digits = 0;
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			if (digits < 9)
				frac = frac * 10 + (uint64_t)(s[i] - '0'), digits++;
		for (; digits < 9; digits++)
			frac *= 10;
	}
	if (i != len)
		return -1;
	if (!is_time) {
		if (x > INT64_MAX)
			return -1;
		*v = (int64_t)x;
		return 0;
	}
	if (x > (uint64_t)INT64_MAX / 1000000000 - 1)
		return -1;
	int64_t ns = (int64_t)x * 1000000000 + (int64_t)frac;
	*v = neg ? -ns : ns;
	return 0;
}

/* ---- extended headers --------------------------------------------------- */
static void pend_clear(struct pend *p)
{
	free(p->lname);
	free(p->llink);
	free(p->xpath);
	free(p->xlink);
	memset(p, 0, sizeof(*p));
}

static void set_str(char **dst, size_t *dlen, const char *s, size_t len)
{
	free(*dst);
	*dst = NULL;
	*dlen = 0;
	if (!len)
		return; /* pax: an empty value removes the keyword */
	*dst = ds_xmalloc(len + 1);
	memcpy(*dst, s, len);
	(*dst)[len] = '\0';
	*dlen = len;
}

/* The records "LEN KEY=VALUE\n" of a pax 'x' header at off. */
static int pax_parse(struct tscan *t, const char *buf, size_t len, uint64_t off, struct pend *p)
{
	size_t pos = 0;
	while (pos < len) {
		size_t rl = 0, i = pos;
		for (; i < len && buf[i] >= '0' && buf[i] <= '9' && rl < len; i++)
			rl = rl * 10 + (size_t)(buf[i] - '0');
		if (i == pos || i >= len || buf[i] != ' ' || rl > len - pos || rl < i - pos + 3 ||
		    buf[pos + rl - 1] != '\n')
			return bad_at(t, -DS_ECORRUPT, off, "malformed pax extended header record");
		const char *key = buf + i + 1, *end = buf + pos + rl - 1;
		const char *eq = memchr(key, '=', (size_t)(end - key));
		if (!eq || eq == key)
			return bad_at(t, -DS_ECORRUPT, off, "pax record without a keyword");
		size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
		const char *val = eq + 1;
#define KEY(s) (klen == sizeof(s) - 1 && !memcmp(key, s, klen))
		int64_t x;
		if (KEY("path"))
			set_str(&p->xpath, &p->xpath_len, val, vlen);
		else if (KEY("linkpath"))
			set_str(&p->xlink, &p->xlink_len, val, vlen);
		else if (KEY("size")) {
			if (!vlen)
				p->has_xsize = 0;
			else if (pax_number(val, vlen, 0, &x))
				return bad_at(t, -DS_ECORRUPT, off, "pax size is not a number");
			else
				p->has_xsize = 1, p->xsize = (uint64_t)x;
		} else if (KEY("mtime")) {
			if (!vlen)
				p->has_xmtime = 0;
			else if (pax_number(val, vlen, 1, &x))
				return bad_at(t, -DS_ECORRUPT, off, "pax mtime is not a time");
			else
				p->has_xmtime = 1, p->xmtime = x;
		} else if (klen > 11 && !memcmp(key, "GNU.sparse.", 11))
			p->sparse = 1; /* refused with the member's name */
#undef KEY
		/* every other keyword (uid, atime, SCHILY.*, ...) changes nothing here */
		pos += rl;
	}
	return 0;
}

/* ---- names -------------------------------------------------------------- */
/* Drop leading "./" (and the slashes after it); 1 when a '/' ended it. */
static size_t tidy(char *s, size_t len, int *slash)
{
	size_t skip = 0;
	while (len - skip >= 2 && s[skip] == '.' && s[skip + 1] == '/') {
		skip += 2;
		while (skip < len && s[skip] == '/')
			skip++;
	}
	if (len - skip == 1 && s[skip] == '.')
		skip = len; /* "." and "./": the root */
	memmove(s, s + skip, len - skip);
	len -= skip;
	*slash = 0;
	while (len && s[len - 1] == '/')
		len--, *slash = 1;
	s[len] = '\0';
	return len;
}

/* A NUL-terminated header string field of at most cap bytes. */
static size_t field_len(const unsigned char *f, size_t cap)
{
	const void *z = memchr(f, '\0', cap);
	return z ? (size_t)((const unsigned char *)z - f) : cap;
}

/* ---- the name -> latest member map (hard links) ------------------------- */
static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static size_t *map_slot(struct tscan *t, const char *name)
{
	size_t mask = t->nslot - 1;
	for (size_t i = hash(name) & mask;; i = (i + 1) & mask)
		if (!t->slot[i] || !strcmp(t->v[t->slot[i] - 1].m.name, name))
			return &t->slot[i];
}

static void map_put(struct tscan *t, size_t idx)
{
	if (2 * (t->used + 1) > t->nslot) {
		size_t *old = t->slot, n = t->nslot;
		t->nslot = n ? 2 * n : 1024;
		t->slot = ds_xcalloc(t->nslot, sizeof(*t->slot));
		for (size_t i = 0; i < n; i++)
			if (old[i])
				*map_slot(t, t->v[old[i] - 1].m.name) = old[i];
		free(old);
	}
	size_t *s = map_slot(t, t->v[idx].m.name);
	if (!*s)
		t->used++;
	*s = idx + 1;
}

static const struct ds__tar_member *map_get(struct tscan *t, const char *name)
{
	if (!t->nslot)
		return NULL;
	size_t *s = map_slot(t, name);
	return *s ? &t->v[*s - 1].m : NULL;
}

/* ---- members ------------------------------------------------------------ */
static struct item *add_item(struct tscan *t)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 256;
		t->v = ds_xrealloc(t->v, t->cap * sizeof(*t->v));
	}
	struct item *it = &t->v[t->n];
	memset(it, 0, sizeof(*it));
	it->seq = t->n;
	return it;
}

/* One member's header h at off, with what extended headers said (p); its
 * data is [off + BLK, off + BLK + size).  Adds an item or skips it. */
static int member(struct tscan *t, const unsigned char *h, uint64_t off, uint64_t size,
                  const struct pend *p)
{
	char hname[256 + 2], hlink[101];
	const char *why;
	char type = (char)h[156];
	static const char ustar[8] = {'u', 's', 't', 'a', 'r', '\0', '0', '0'}; /* POSIX magic */
	int posix = !memcmp(h + 257, ustar, sizeof(ustar));

	/* the name: pax path, else GNU long name, else ustar prefix/name */
	char *name;
	size_t len;
	if (p->xpath || p->lname) {
		const char *s = p->xpath ? p->xpath : p->lname;
		len = p->xpath ? p->xpath_len : p->lname_len;
		name = ds_xmalloc(len + 1);
		memcpy(name, s, len);
	} else {
		size_t pl = posix ? field_len(h + 345, 155) : 0, nl = field_len(h, 100);
		len = 0;
		if (pl) {
			memcpy(hname, h + 345, pl);
			hname[pl] = '/';
			len = pl + 1;
		}
		memcpy(hname + len, h, nl);
		len += nl;
		name = ds_xmalloc(len + 1);
		memcpy(name, hname, len);
	}
	name[len] = '\0';
	int slash, rc = 0;
	size_t raw_len = len;
	len = tidy(name, len, &slash);

	int64_t mode, mtime;
	if (num_field(h + 100, 8, 0, &mode)) {
		rc = bad_member(t, -DS_ECORRUPT, name, len, "bad mode field");
		goto out;
	}
	if (p->has_xmtime)
		mtime = p->xmtime;
	else if (num_field(h + 136, 12, 1, &mtime) || mtime > INT64_MAX / 1000000000 ||
	         mtime < INT64_MIN / 1000000000) {
		rc = bad_member(t, -DS_ECORRUPT, name, len, "bad mtime field");
		goto out;
	} else
		mtime *= 1000000000;

	uint32_t kind;
	switch (type) {
	case '\0':
		kind = slash ? S_IFDIR : S_IFREG; /* pre-POSIX: a directory has a trailing '/' */
		break;
	case '0':
	case '7': kind = S_IFREG; break;
	case '1':
		kind = 0; /* resolved below */
		break;
	case '2': kind = S_IFLNK; break;
	case '5':
	case 'D': kind = S_IFDIR; break;
	case '3':
	case '4':
	case '6': {
		char q[2 * PATH_MAX];
		if (size) {
			rc = bad_member(t, -DS_ECORRUPT, name, len, "device or FIFO with data");
			goto out;
		}
		ds_warn("'%s': member '%s': %s, skipped", t->tar,
		        ds__quote(name, len, q, sizeof(q)),
		        type == '6'   ? "FIFO"
		        : type == '3' ? "character device"
		                      : "block device");
		goto out;
	}
	case 'S':
		rc = bad_member(
			t, -DS_EFORMAT, name, len,
			"sparse member (GNU 'S'): not supported in place, make the tar without "
			"--sparse");
		goto out;
	case 'M':
	case 'N':
		rc = bad_member(t, -DS_EFORMAT, name, len,
		                "GNU multi-volume or old long-name member: not supported");
		goto out;
	default: {
		char why2[64];
		snprintf(why2, sizeof(why2), "unknown member type 0x%02x", (unsigned char)type);
		rc = bad_member(t, -DS_EFORMAT, name, len, why2);
		goto out;
	}
	}
	if (p->sparse) {
		rc = bad_member(
			t, -DS_EFORMAT, name, len,
			"sparse member (pax GNU.sparse): not supported in place, make the tar "
			"without --sparse");
		goto out;
	}
	if (!len) {
		if (kind == S_IFDIR && raw_len)
			goto out; /* "./": the tar's root */
		rc = bad_member(t, -DS_ENAME, name, len, "empty name");
		goto out;
	}
	if (ds_name_check(name, len, &why)) {
		rc = bad_member(t, -DS_ENAME, name, len, why);
		goto out;
	}
	if (slash && kind != S_IFDIR) {
		rc = bad_member(t, -DS_ENAME, name, len,
		                "'/' at the end of a name that is not a directory");
		goto out;
	}
	if (size && kind != S_IFREG && type != 'D') {
		rc = bad_member(t, -DS_ECORRUPT, name, len, "a directory or link with data");
		goto out;
	}

	struct item *it = add_item(t);
	struct ds__tar_member *m = &it->m;
	m->mode = kind | ((uint32_t)mode & 0777);
	m->mtime_ns = mtime;
	if (kind == S_IFREG) {
		m->size = size;
		m->data_off = off + BLK;
	}
	if (kind == S_IFLNK || type == '1') {
		/* the link: pax linkpath, else GNU long link, else the header's */
		const char *s;
		size_t tl;
		if (p->xlink || p->llink) {
			s = p->xlink ? p->xlink : p->llink;
			tl = p->xlink ? p->xlink_len : p->llink_len;
		} else {
			memcpy(hlink, h + 157, 100);
			s = hlink;
			tl = field_len(h + 157, 100);
		}
		m->target = ds_xmalloc(tl + 1);
		memcpy(m->target, s, tl);
		m->target[tl] = '\0';
		if (type == '1') {
			int ts;
			tl = tidy(m->target, tl, &ts);
			const struct ds__tar_member *to = map_get(t, m->target);
			if (!to || !(S_ISREG(to->mode) || S_ISLNK(to->mode))) {
				rc = bad_member(t, -DS_EFORMAT, name, len,
				                to ? "hard link to a directory"
				                   : "hard link to no earlier member of the tar");
				goto drop;
			}
			free(m->target);
			m->target = to->target ? ds_xstrdup(to->target) : NULL;
			m->mode = to->mode;
			m->mtime_ns = to->mtime_ns;
			m->size = to->size;
			m->data_off = to->data_off;
			tl = m->target ? strlen(m->target) : 0;
		}
		if (S_ISLNK(m->mode)) {
			m->size = tl;
			int trc = ds__target_check(name, len, m->target, tl, &why);
			if (trc) {
				rc = bad_member(t, -DS_ENAME, name, len,
				                trc == -EXDEV ? "symlink points outside the tar"
				                              : why);
				goto drop;
			}
		}
	}
	m->name = name;
	name = NULL;
	t->n++;
	map_put(t, t->n - 1);
	goto out;
drop:
	free(m->target);
	m->target = NULL;
out:
	free(name);
	return rc;
}

/* A truncated member: named (what its headers say its name is) when known. */
static void truncated(const struct tscan *t, const unsigned char *h, const struct pend *p, int ext,
                      uint64_t off, const char *why)
{
	char q[2 * PATH_MAX], name[101];
	const char *s = p->xpath ? p->xpath : p->lname;
	size_t len = p->xpath ? p->xpath_len : p->lname_len;
	if (!s && !ext) {
		len = field_len(h, 100);
		memcpy(name, h, len);
		s = name;
	}
	if (s)
		ds_error("'%s': at byte %llu (member '%s'): truncated: %s", t->tar,
		         (unsigned long long)off, ds__quote(s, len, q, sizeof(q)), why);
	else
		ds_error("'%s': at byte %llu: truncated: %s", t->tar, (unsigned long long)off, why);
}

/* Walk the headers from the start; items in archive order. */
/* The compressor whose magic number starts b (len bytes), or NULL. */
static const char *compressed(const unsigned char *b, size_t len)
{
	static const struct {
		const char *magic;
		size_t n;
		const char *what;
	} z[] = {{"\x1f\x8b", 2, "gzip"},         {"BZh", 3, "bzip2"},
	         {"\xfd" "7zXZ\0", 6, "xz"},       {"\x28\xb5\x2f\xfd", 4, "zstd"},
	         {"\x04\x22\x4d\x18", 4, "lz4"}, {"\x1f\x9d", 2, "compress (.Z)"},
	         {"PK\x03\x04", 4, "zip"}};
	for (size_t i = 0; i < sizeof(z) / sizeof(z[0]); i++)
		if (len >= z[i].n && !memcmp(b, z[i].magic, z[i].n))
			return z[i].what;
	return NULL;
}

/* The first bytes of X.tar (len of them) are no tar header: say what the
 * file is, as far as its magic number tells (GNU tar: "This does not look
 * like a tar archive"), and what to do.  A tar that fails later, or whose
 * first header has tar's magic but a bad checksum, is a damaged tar and
 * named as such by the caller. */
static int not_a_tar(const struct tscan *t, const unsigned char *b, size_t len)
{
	const char *kind = compressed(b, len);
	if (kind)
		ds_error("'%s': %s data, not a tar archive: --expand-tar reads every *.tar as an "
		         "uncompressed tar shard (a compressed tar's members do not lie at an "
		         "offset): decompress it, or rename it",
		         t->tar, kind);
	else
		ds_error("'%s': at byte 0: does not look like a tar archive (no tar header): "
		         "--expand-tar reads every *.tar as a tar shard: rename it, or leave it out",
		         t->tar);
	return -DS_ECORRUPT;
}

/* Tar's magic at 257: POSIX ustar or GNU's "ustar  \0". */
static int tar_magic(const unsigned char *h)
{
	return !memcmp(h + 257, "ustar", 5);
}

static int walk(struct tscan *t)
{
	struct pend p = {0};
	uint64_t off = 0;
	int rc = 0;
	for (;;) {
		const unsigned char *h;
		if (off == 0 && t->fsize > 0 && t->fsize < BLK) {
			unsigned char b[8];
			size_t len = t->fsize < sizeof(b) ? (size_t)t->fsize : sizeof(b);
			if (!ds_pread_full(t->fd, b, len, 0) && compressed(b, len)) {
				rc = not_a_tar(t, b, len);
				break;
			}
			/* a copy cut inside its first header, or no tar at all */
			ds_error("'%s': at byte 0: truncated, or not a tar: %llu bytes, less than "
			         "one tar header",
			         t->tar, (unsigned long long)t->fsize);
			rc = -DS_ECORRUPT;
			break;
		}
		if (off == 0 && t->fsize == 0) {
			rc = bad_at(t, -DS_ECORRUPT, 0,
			            "truncated, or not a tar: an empty file (a tar holds at least "
			            "its end-of-archive block)");
			break;
		}
		if (t->fsize - off < BLK) {
			rc = bad_at(
				t, -DS_ECORRUPT, off,
				off == t->fsize
					? "truncated: the tar ends without its end-of-archive block"
					: "truncated: the tar ends inside a header");
			break;
		}
		if ((rc = block(t, off, &h)))
			break;
		if (all_zero(h)) {
			if (p.any) {
				rc = bad_at(t, -DS_ECORRUPT, p.at,
				            "extended header without a member");
				break;
			}
			if (t->fsize - off >= 2 * BLK) {
				if ((rc = block(t, off + BLK, &h)))
					break;
				if (!all_zero(h))
					ds_warn("'%s': at byte %llu: a lone zero block ends the archive; "
					        "what follows is ignored, as tar does",
					        t->tar, (unsigned long long)off);
			}
			break;
		}
		if (!checksum_ok(h) && off == 0 && !tar_magic(h)) {
			rc = not_a_tar(t, h, BLK);
			break;
		}
		if (!checksum_ok(h)) {
			rc = bad_at(t, -DS_ECORRUPT, off,
			            "bad header checksum (not a tar, or corrupt)");
			break;
		}
		char type = (char)h[156];
		int64_t hsize;
		if (num_field(h + 124, 12, 0, &hsize)) {
			rc = bad_at(t, -DS_ECORRUPT, off, "bad size field");
			break;
		}
		int ext = type == 'x' || type == 'g' || type == 'L' || type == 'K';
		uint64_t size = !ext && p.has_xsize ? p.xsize : (uint64_t)hsize;
		uint64_t data = off + BLK;
		uint64_t next = data + (size + BLK - 1) / BLK * BLK;
		if (size > t->fsize - data || next > t->fsize) {
			truncated(t, h, &p, ext, off,
			          size > t->fsize - data
			                  ? "member data runs past the end of the tar"
			                  : "the tar ends inside a member's padding");
			rc = -DS_ECORRUPT;
			break;
		}
		t->stride = (7 * t->stride + (next - off)) / 8;
		if (ext) {
			if (!p.any && type != 'g')
				p.at = off;
			p.any |= type != 'g';
			char *buf = NULL;
			if (type == 'g') {
				/* global pax records: nothing dstage keeps depends on them */
			} else if (size > ((type == 'x') ? XHDR_MAX : LONG_MAX_BYTES)) {
				rc = bad_at(t, -DS_ECORRUPT, off, "extended header too large");
				break;
			} else if ((rc = read_data(t, data, (size_t)size, &buf))) {
				break;
			} else if (type == 'x') {
				rc = pax_parse(t, buf, (size_t)size, off, &p);
			} else {
				size_t l = strlen(buf); /* GNU: the name and a NUL */
				if (type == 'L')
					set_str(&p.lname, &p.lname_len, buf, l);
				else
					set_str(&p.llink, &p.llink_len, buf, l);
				if (!l)
					rc = bad_at(t, -DS_ECORRUPT, off, "empty GNU long name");
			}
			free(buf);
			if (rc)
				break;
		} else if (type == 'V') {
			pend_clear(&p); /* a volume label: not a member */
		} else {
			if (t->n >= DS__MAX_ENTRIES) {
				rc = bad_at(t, -E2BIG, off, "more members than dstage supports");
				break;
			}
			rc = member(t, h, off, size, &p);
			pend_clear(&p);
			if (rc)
				break;
		}
		off = next;
	}
	pend_clear(&p);
	return rc;
}

/* ---- last wins, parents ------------------------------------------------- */
static int item_cmp(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	int c = ds_path_cmp(x->m.name, y->m.name);
	return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void member_release(struct ds__tar_member *m)
{
	free(m->name);
	free(m->target);
}

/* Sorted, one per name (the last); -DS_EFORMAT for a directory replaced by
 * a non-directory or the reverse. */
static int last_wins(struct tscan *t)
{
	if (t->n > 1)
		qsort(t->v, t->n, sizeof(*t->v), item_cmp);
	size_t w = 0;
	int rc = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (w && !strcmp(t->v[w - 1].m.name, t->v[i].m.name)) {
			struct item *prev = &t->v[w - 1];
			if (!rc && S_ISDIR(prev->m.mode) != S_ISDIR(t->v[i].m.mode))
				rc = bad_member(t, -DS_EFORMAT, t->v[i].m.name,
				                strlen(t->v[i].m.name),
				                "appears as a directory and as a non-directory");
			member_release(&prev->m);
			*prev = t->v[i];
			continue;
		}
		t->v[w++] = t->v[i];
	}
	t->n = w;
	return rc;
}

static const char *item_name(const void *v, size_t i) { return ((const struct item *)v)[i].m.name; }

/* Every parent directory a member's path implies, as an entry; a parent
 * that is a file or a symlink refuses the tar. */
static int add_parents(struct tscan *t)
{
	struct item *extra = NULL;
	size_t nx = 0, capx = 0, n = t->n;
	char buf[PATH_MAX];
	const char *prev_added = "";
	int rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		const char *name = t->v[i].m.name;
		size_t len = strlen(name);
		for (size_t k = 0; k < len; k++) {
			if (name[k] != '/')
				continue;
			memcpy(buf, name, k);
			buf[k] = '\0';
			int64_t j = ds__path_find(n, item_name, t->v, buf);
			if (j >= 0) {
				if (!S_ISDIR(t->v[j].m.mode)) {
					rc = bad_member(t, -DS_ENAME, name, len,
					                S_ISLNK(t->v[j].m.mode)
					                        ? "under a symlink of the tar"
					                        : "under a file of the tar");
					break;
				}
				continue;
			}
			if (!strcmp(buf, prev_added))
				continue; /* the common case: siblings share their parents */
			if (nx == capx) {
				capx = capx ? 2 * capx : 64;
				extra = ds_xrealloc(extra, capx * sizeof(*extra));
			}
			struct item *it = &extra[nx++];
			memset(it, 0, sizeof(*it));
			it->m.name = ds_xstrdup(buf);
			it->m.mode = S_IFDIR | 0755;
			it->m.mtime_ns = t->tar_mtime_ns;
			it->seq = 0;
			if (k + 1 < len && !strchr(name + k + 1, '/'))
				prev_added = it->m.name; /* the member's own directory */
		}
	}
	if (!rc && nx) {
		qsort(extra, nx, sizeof(*extra), item_cmp);
		size_t w = 0;
		for (size_t i = 0; i < nx; i++) {
			if (w && !strcmp(extra[w - 1].m.name, extra[i].m.name)) {
				member_release(&extra[i].m);
				continue;
			}
			extra[w++] = extra[i];
		}
		nx = w;
		if (t->n + nx > DS__MAX_ENTRIES) {
			ds_error("'%s': more members than dstage supports", t->tar);
			rc = -E2BIG;
		} else {
			/* merge the two sorted lists */
			struct item *all = ds_xmalloc((t->n + nx) * sizeof(*all));
			size_t a = 0, b = 0, o = 0;
			while (a < t->n || b < nx)
				all[o++] = b == nx || (a < t->n && ds_path_cmp(t->v[a].m.name,
				                                               extra[b].m.name) < 0)
				                   ? t->v[a++]
				                   : extra[b++];
			free(t->v);
			t->v = all;
			t->n = t->cap = o;
			nx = 0;
		}
	}
	for (size_t i = 0; i < nx; i++)
		member_release(&extra[i].m);
	free(extra);
	return rc;
}

int ds__tar_scan(int fd, const char *tarname, struct ds__tar_member **out, size_t *n)
{
	struct tscan t = {.fd = fd, .tar = tarname};
	struct stat st;
	int rc;
	*out = NULL;
	*n = 0;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		ds_error("'%s': %s", tarname, strerror(errno));
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		ds_error("'%s': not a regular file", tarname);
		return -DS_ENOTREG;
	}
	t.fsize = (uint64_t)st.st_size;
	t.tar_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	t.win = ds_xmalloc(WIN);
	rc = walk(&t);
	free(t.win);
	free(t.slot);
	if (!rc)
		rc = last_wins(&t);
	if (!rc)
		rc = add_parents(&t);
	if (rc) {
		for (size_t i = 0; i < t.n; i++)
			member_release(&t.v[i].m);
		free(t.v);
		return rc;
	}
	struct ds__tar_member *v = ds_xmalloc((t.n ? t.n : 1) * sizeof(*v));
	for (size_t i = 0; i < t.n; i++)
		v[i] = t.v[i].m;
	free(t.v);
	*out = v;
	*n = t.n;
	return 0;
}

void ds__tar_free(struct ds__tar_member *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		member_release(&v[i]);
	free(v);
}
