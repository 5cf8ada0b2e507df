/* SPDX-License-Identifier: BSD-3-Clause */
/* h5-packtool: tamper with a pack the way an attacker or a broken copy
 * would, for tests of the readers' validation.  The seal (a CRC) would catch
 * any change; `reseal` recomputes it so a test can reach the checks behind it.
 *
 *   h5-packtool set FILE DATASET ROW FIELD VALUE   one field of a table row
 *   h5-packtool set-attr FILE NAME VALUE            a root integer attribute
 *   h5-packtool pool FILE OFFSET TEXT               overwrite bytes of "strings"
 *   h5-packtool flip FILE OFFSET                    xor one byte with 0xff
 *   h5-packtool payload-offset FILE                 print where the payload is
 *   h5-packtool reseal FILE                         recompute the seal's CRCs
 *   h5-packtool seal-set FILE FIELD VALUE           one field of the seal
 *   h5-packtool read-image FILE                     ds_manifest_read_image on it
 * Exit 0 on success, 1 on failure (with a message). */
#include "pack_int.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int die(const char *what)
{
	fprintf(stderr, "h5-packtool: %s\n", what);
	return 1;
}

static hid_t open_rw(const char *path)
{
	ds__h5_quiet();
	hid_t fapl = ds__h5_fapl();
	hid_t f = H5Fopen(path, H5F_ACC_RDWR, fapl);
	H5Pclose(fapl);
	return f;
}

/* Write one unsigned integer field of one row of a compound dataset. */
static int set_field(const char *path, const char *dset, const char *row, const char *field,
                     const char *value)
{
	uint64_t r, v;
	if (ds_parse_u64(row, &r) || ds_parse_u64(value, &v))
		return die("bad number");
	hid_t f = open_rw(path);
	if (f < 0)
		return die("cannot open");
	hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
	hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(v));
	H5Tinsert(mt, field, 0, H5T_NATIVE_UINT64);
	hid_t fs = H5Dget_space(d);
	hsize_t coord = r, one = 1;
	hid_t ms = H5Screate_simple(1, &one, NULL);
	int rc = d < 0 || H5Sselect_elements(fs, H5S_SELECT_SET, 1, &coord) < 0 ||
	         H5Dwrite(d, mt, ms, fs, H5P_DEFAULT, &v) < 0;
	H5Sclose(ms);
	H5Sclose(fs);
	H5Tclose(mt);
	if (d >= 0)
		H5Dclose(d);
	H5Fclose(f);
	return rc ? die("cannot write the field") : 0;
}

static int set_attr(const char *path, const char *name, const char *value)
{
	uint64_t v;
	if (ds_parse_u64(value, &v))
		return die("bad number");
	hid_t f = open_rw(path);
	if (f < 0)
		return die("cannot open");
	hid_t a = H5Aopen(f, name, H5P_DEFAULT);
	int rc = a < 0 || H5Awrite(a, H5T_NATIVE_UINT64, &v) < 0;
	if (a >= 0)
		H5Aclose(a);
	H5Fclose(f);
	return rc ? die("cannot write the attribute") : 0;
}

static int overwrite_pool(const char *path, const char *off, const char *text)
{
	uint64_t o;
	if (ds_parse_u64(off, &o))
		return die("bad number");
	hid_t f = open_rw(path);
	if (f < 0)
		return die("cannot open");
	hid_t d = H5Dopen2(f, "strings", H5P_DEFAULT);
	hid_t fs = H5Dget_space(d);
	hsize_t start = o, count = strlen(text);
	hid_t ms = H5Screate_simple(1, &count, NULL);
	int rc = d < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ||
	         H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, text) < 0;
	H5Sclose(ms);
	H5Sclose(fs);
	if (d >= 0)
		H5Dclose(d);
	H5Fclose(f);
	return rc ? die("cannot write the pool") : 0;
}

static int flip(const char *path, const char *off)
{
	uint64_t o;
	unsigned char c;
	int fd = open(path, O_RDWR);
	if (fd < 0 || ds_parse_u64(off, &o) || pread(fd, &c, 1, (off_t)o) != 1)
		return die("cannot read the byte");
	c ^= 0xff;
	int rc = pwrite(fd, &c, 1, (off_t)o) != 1;
	close(fd);
	return rc ? die("cannot write the byte") : 0;
}

/* The seal as it is, without checking anything. */
static int seal_get(int fd, char magic[17], struct ds__seal *s)
{
	unsigned char h[DS__SEAL_USED];
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -1;
	memcpy(magic, h, 16);
	magic[16] = '\0';
	ds__seal_decode(h, s);
	return 0;
}

/* Recompute the CRCs and the size, keeping the directory. */
static int reseal(const char *path)
{
	struct ds__seal s;
	char magic[17];
	int fd = open(path, O_RDWR);
	if (fd < 0 || seal_get(fd, magic, &s))
		return die("cannot read the seal");
	int rc = ds__seal_write(fd, magic, &s);
	close(fd);
	return rc ? die("cannot write the seal") : 0;
}

/* Set one field of the seal's directory (header CRC recomputed, the CRC of
 * the rest kept: these fields are not in it). */
static int seal_set(const char *path, const char *field, const char *value)
{
	static const struct {
		const char *name;
		size_t off, size;
	} f[] = {
		{"file_size", offsetof(struct ds__seal, file_size), 8},
		{"pack_id", offsetof(struct ds__seal, pack_id), 8},
		{"entries_off", offsetof(struct ds__seal, entries_off), 8},
		{"nentries", offsetof(struct ds__seal, nentries), 8},
		{"strings_off", offsetof(struct ds__seal, strings_off), 8},
		{"strings_len", offsetof(struct ds__seal, strings_len), 8},
		{"parts_off", offsetof(struct ds__seal, parts_off), 8},
		{"nparts_rows", offsetof(struct ds__seal, nparts_rows), 8},
		{"payload_off", offsetof(struct ds__seal, payload_off), 8},
		{"payload_len", offsetof(struct ds__seal, payload_len), 8},
		{"part", offsetof(struct ds__seal, part), 4},
		{"nparts", offsetof(struct ds__seal, nparts), 4},
		{"flags", offsetof(struct ds__seal, flags), 4},
	};
	struct ds__seal s;
	char magic[17];
	uint64_t v;
	unsigned char h[DS__SEAL_USED];
	int fd = open(path, O_RDWR);
	if (fd < 0 || seal_get(fd, magic, &s) || ds_parse_u64(value, &v))
		return die("cannot read the seal");
	size_t i = 0;
	while (i < sizeof(f) / sizeof(f[0]) && strcmp(f[i].name, field))
		i++;
	if (i == sizeof(f) / sizeof(f[0]))
		return die("no such seal field");
	if (f[i].size == 8)
		memcpy((char *)&s + f[i].off, &v, 8);
	else {
		uint32_t v32 = (uint32_t)v;
		memcpy((char *)&s + f[i].off, &v32, 4);
	}
	ds__seal_encode(h, magic, &s);
	int rc = pwrite(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h);
	close(fd);
	return rc ? die("cannot write the seal") : 0;
}

static int payload_offset(const char *path)
{
	struct ds__seal s;
	char magic[17];
	int fd = open(path, O_RDONLY);
	if (fd < 0 || seal_get(fd, magic, &s))
		return die("cannot read the seal");
	close(fd);
	printf("%llu %llu\n", (unsigned long long)s.payload_off, (unsigned long long)s.payload_len);
	return 0;
}

static int read_image(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0)
		return die("cannot open");
	char *buf = ds_xmalloc((size_t)st.st_size + 1);
	if (ds_pread_full(fd, buf, (size_t)st.st_size, 0))
		return die("cannot read");
	close(fd);
	struct ds_manifest m;
	int rc = ds_manifest_read_image(buf, (size_t)st.st_size, path, &m);
	free(buf);
	if (rc)
		return 1;
	printf("%zu entries, %u partitions\n", m.n, m.nparts);
	ds_manifest_release(&m);
	return 0;
}

int main(int argc, char **argv)
{
	ds_log_set_cmd("packtool");
	if (argc == 7 && !strcmp(argv[1], "set"))
		return set_field(argv[2], argv[3], argv[4], argv[5], argv[6]);
	if (argc == 5 && !strcmp(argv[1], "set-attr"))
		return set_attr(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "pool"))
		return overwrite_pool(argv[2], argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "flip"))
		return flip(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "seal-set"))
		return seal_set(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "reseal"))
		return reseal(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "payload-offset"))
		return payload_offset(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "read-image"))
		return read_image(argv[2]);
	return die("usage: h5-packtool set|set-attr|pool|flip|reseal|seal-set|payload-offset|read-image ...");
}
