/* SPDX-License-Identifier: BSD-3-Clause */
/* h5util.c: the HDF5 side of the pack format: property lists that make the
 * files byte-reproducible, the table types and their packed encoding, the
 * skeleton writer, and the cross-check of HDF5's view that verify runs in a
 * child process (the only place dstage lets HDF5 parse a pack file). */
#include "pack_int.h"

#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOST_BIG_ENDIAN (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)

void ds__h5_quiet(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	H5open();
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

hid_t ds__h5_fapl(void)
{
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0)
		return H5I_INVALID_HID;
	/* Fixed bounds: the object formats written must not depend on which
	 * HDF5 release built dstage.  EARLIEST..V18 is readable by every HDF5
	 * since 1.8 and has no timestamps once track_times is off. */
	if (H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18) < 0 ||
	    /* payload blocks start 4 KiB-aligned in the file (the user block is
	     * 4 KiB too), so stage can read them with aligned, direct I/O */
	    H5Pset_alignment(fapl, 4096, 4096) < 0 ||
	    /* flock is missing on many Lustre mounts; a pack is written once by
	     * one process and never modified */
	    H5Pset_file_locking(fapl, 0, 1) < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
		H5Pclose(fapl);
		return H5I_INVALID_HID;
	}
	return fapl;
}

hid_t ds__h5_fcpl(void)
{
	hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
	if (fcpl < 0)
		return H5I_INVALID_HID;
	/* the root group inherits the object creation properties of the fcpl */
	if (H5Pset_userblock(fcpl, DS__SEAL_SIZE) < 0 || H5Pset_obj_track_times(fcpl, 0) < 0) {
		H5Pclose(fcpl);
		return H5I_INVALID_HID;
	}
	return fcpl;
}

hid_t ds__h5_dcpl(void)
{
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (dcpl < 0)
		return H5I_INVALID_HID;
	/* Contiguous and allocated now: H5Dget_offset then gives the address,
	 * and with FILL_TIME_NEVER HDF5 writes none of the raw bytes itself, so
	 * the payload can be streamed in with pwrite (and holes stay holes). */
	if (H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
	    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 ||
	    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
		H5Pclose(dcpl);
		return H5I_INVALID_HID;
	}
	return dcpl;
}

/* The tables' fields: name, place in the native struct, bytes on disk.
 * On disk a row is these fields packed, little-endian, in this order (the
 * docs/formats.md, "The pack", lists the same); the native struct is what the
 * code uses.  Readers and the writer encode and decode rows themselves with
 * this list: HDF5 never converts a type read from an untrusted file (its
 * compound conversion can be crashed by a crafted type). */
struct field {
	const char *name;
	size_t mem_off;
	unsigned size;  /* 1, 4 or 8 bytes, in memory and on disk */
	int sign;
};

#define FIELD(S, f, sign) {#f, offsetof(struct S, f), sizeof(((struct S *)0)->f), sign}

static const struct field row_fields[] = {
	FIELD(ds__row, path_off, 0), FIELD(ds__row, path_len, 0),  FIELD(ds__row, mode, 0),
	FIELD(ds__row, mtime_ns, 1), FIELD(ds__row, size, 0),      FIELD(ds__row, part, 0),
	FIELD(ds__row, offset, 0),   FIELD(ds__row, stored, 0),    FIELD(ds__row, codec, 0),
	FIELD(ds__row, flags, 0),    FIELD(ds__row, crc, 0),       FIELD(ds__row, target_off, 0),
	FIELD(ds__row, target_len, 0),
};

static const struct field prow_fields[] = {
	FIELD(ds__prow, size, 0), FIELD(ds__prow, nfiles, 0), FIELD(ds__prow, replicated, 0)};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

static hid_t le_type(const struct field *f)
{
	if (f->sign)
		return H5T_STD_I64LE;
	return f->size == 8 ? H5T_STD_U64LE : f->size == 4 ? H5T_STD_U32LE : H5T_STD_U8LE;
}

static size_t disk_size(const struct field *f, size_t nf)
{
	size_t n = 0;
	for (size_t i = 0; i < nf; i++)
		n += f[i].size;
	return n;
}

static hid_t compound(const struct field *f, size_t nf)
{
	hid_t t = H5Tcreate(H5T_COMPOUND, disk_size(f, nf));
	if (t < 0)
		return H5I_INVALID_HID;
	size_t off = 0;
	for (size_t i = 0; i < nf; i++) {
		if (H5Tinsert(t, f[i].name, off, le_type(&f[i])) < 0) {
			H5Tclose(t);
			return H5I_INVALID_HID;
		}
		off += f[i].size;
	}
	return t;
}

hid_t ds__h5_row_type(void)
{
	return compound(row_fields, NFIELDS(row_fields));
}

hid_t ds__h5_prow_type(void)
{
	return compound(prow_fields, NFIELDS(prow_fields));
}

/* Rows between the native structs and the packed little-endian bytes. */
static void *encode(const struct field *f, size_t nf, const void *rows, size_t row_size, uint64_t n,
                    size_t *len)
{
	size_t ds = disk_size(f, nf);
	unsigned char *out = ds_xmalloc(n * ds + 1), *o = out;
	for (uint64_t r = 0; r < n; r++) {
		const char *row = (const char *)rows + r * row_size;
		for (size_t i = 0; i < nf; i++) {
			uint64_t v = 0;
			memcpy((char *)&v + (HOST_BIG_ENDIAN ? 8 - f[i].size : 0), row + f[i].mem_off, f[i].size);
			for (unsigned b = 0; b < f[i].size; b++)
				*o++ = (unsigned char)(v >> (8 * b));
		}
	}
	*len = n * ds;
	return out;
}

static void decode(const struct field *f, size_t nf, const void *raw, uint64_t n, void *rows,
                   size_t row_size)
{
	const unsigned char *in = raw;
	for (uint64_t r = 0; r < n; r++) {
		char *row = (char *)rows + r * row_size;
		for (size_t i = 0; i < nf; i++) {
			uint64_t v = 0;
			for (unsigned b = 0; b < f[i].size; b++)
				v |= (uint64_t)*in++ << (8 * b);
			memcpy(row + f[i].mem_off, (char *)&v + (HOST_BIG_ENDIAN ? 8 - f[i].size : 0), f[i].size);
		}
	}
}

/* The seal's bounds checks use the packed sizes: they must be the tables'. */
static void check_sizes(void)
{
	if (disk_size(row_fields, NFIELDS(row_fields)) != DS__ROW_BYTES ||
	    disk_size(prow_fields, NFIELDS(prow_fields)) != DS__PROW_BYTES)
		abort();
}

void *ds__rows_encode(const struct ds__row *rows, uint64_t n, size_t *len)
{
	check_sizes();
	return encode(row_fields, NFIELDS(row_fields), rows, sizeof(*rows), n, len);
}

void *ds__prows_encode(const struct ds__prow *rows, uint64_t n, size_t *len)
{
	return encode(prow_fields, NFIELDS(prow_fields), rows, sizeof(*rows), n, len);
}

void ds__rows_decode(const void *raw, uint64_t n, struct ds__row *rows)
{
	check_sizes();
	decode(row_fields, NFIELDS(row_fields), raw, n, rows, sizeof(*rows));
}

void ds__prows_decode(const void *raw, uint64_t n, struct ds__prow *rows)
{
	decode(prow_fields, NFIELDS(prow_fields), raw, n, rows, sizeof(*rows));
}

hid_t ds__h5_dataset(hid_t loc, const char *name, hid_t ftype, uint64_t n)
{
	hsize_t dim = n;
	hid_t space = H5Screate_simple(1, &dim, NULL);
	hid_t dcpl = ds__h5_dcpl();
	hid_t d = H5I_INVALID_HID;
	if (space >= 0 && dcpl >= 0)
		d = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (space >= 0)
		H5Sclose(space);
	return d;
}

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *val)
{
	hid_t space = H5Screate(H5S_SCALAR);
	hid_t a = space >= 0 ? H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
	int rc = a >= 0 && H5Awrite(a, mtype, val) >= 0 ? 0 : -EIO;
	if (a >= 0)
		H5Aclose(a);
	if (space >= 0)
		H5Sclose(space);
	return rc;
}

int ds__h5_attr_str(hid_t loc, const char *name, const char *val)
{
	/* fixed-length ASCII, no terminator: h5py reads it as bytes */
	hid_t t = H5Tcopy(H5T_C_S1);
	if (t < 0)
		return -EIO;
	int rc = -EIO;
	if (H5Tset_size(t, strlen(val)) >= 0 && H5Tset_strpad(t, H5T_STR_NULLPAD) >= 0)
		rc = attr_write(loc, name, t, t, val);
	H5Tclose(t);
	return rc;
}

int ds__h5_attr_u64(hid_t loc, const char *name, hid_t ftype, uint64_t v)
{
	return attr_write(loc, name, ftype, H5T_NATIVE_UINT64, &v);
}

/* An attribute holding exactly one value of the given class. */
static hid_t attr_open_scalar(hid_t loc, const char *name, H5T_class_t cls, hid_t *type)
{
	if (H5Aexists(loc, name) <= 0)
		return H5I_INVALID_HID;
	hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return H5I_INVALID_HID;
	hid_t s = H5Aget_space(a);
	hid_t t = H5Aget_type(a);
	int ok = s >= 0 && t >= 0 && H5Sget_simple_extent_npoints(s) == 1 && H5Tget_class(t) == cls;
	if (s >= 0)
		H5Sclose(s);
	if (!ok) {
		if (t >= 0)
			H5Tclose(t);
		H5Aclose(a);
		return H5I_INVALID_HID;
	}
	*type = t;
	return a;
}

int ds__h5_read_attr_str(hid_t loc, const char *name, char *buf, size_t cap)
{
	hid_t t, a = attr_open_scalar(loc, name, H5T_STRING, &t);
	if (a < 0)
		return -DS_ECORRUPT;
	size_t size = H5Tget_size(t);
	int rc = -DS_ECORRUPT;
	htri_t var = H5Tis_variable_str(t);
	if (var == 0 && size > 0 && size < cap) {
		memset(buf, 0, cap);
		/* read with the file's own type: no conversion to go wrong */
		if (H5Aread(a, t, buf) >= 0)
			rc = 0;
		buf[size] = '\0';
	}
	H5Tclose(t);
	H5Aclose(a);
	return rc;
}

int ds__h5_read_attr_u64(hid_t loc, const char *name, uint64_t *v)
{
	hid_t t, a = attr_open_scalar(loc, name, H5T_INTEGER, &t);
	if (a < 0)
		return -DS_ECORRUPT;
	int rc = -DS_ECORRUPT;
	size_t size = H5Tget_size(t);
	unsigned char b[8] = {0};
	/* read with the attribute's own type (no conversion), decode here */
	if ((size == 1 || size == 2 || size == 4 || size == 8) && H5Tget_order(t) == H5T_ORDER_LE &&
	    H5Tget_sign(t) == H5T_SGN_NONE && H5Aread(a, t, b) >= 0) {
		*v = 0;
		for (size_t i = 0; i < size; i++)
			*v |= (uint64_t)b[i] << (8 * i);
		rc = 0;
	}
	H5Tclose(t);
	H5Aclose(a);
	return rc;
}

/* Does a dataset keep its bytes where we expect, in this file and raw?
 * External storage would make HDF5 open other files named by the pack;
 * filters would let a few bytes claim gigabytes. */
static int layout_ok(hid_t d)
{
	hid_t dcpl = H5Dget_create_plist(d);
	if (dcpl < 0)
		return 0;
	int ok = H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_nfilters(dcpl) == 0 &&
	         H5Pget_external_count(dcpl) == 0;
	H5Pclose(dcpl);
	return ok;
}

int ds__h5_open_1d(hid_t file, const char *name, uint64_t file_len, hid_t *dset, uint64_t *n,
                   size_t *type_size)
{
	if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
		return -DS_ECORRUPT;
	H5O_info_t info;
	if (H5Oget_info_by_name(file, name, &info, H5P_DEFAULT) < 0 || info.type != H5O_TYPE_DATASET)
		return -DS_ECORRUPT;
	hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
	if (d < 0)
		return -DS_ECORRUPT;
	hid_t s = H5Dget_space(d), t = H5Dget_type(d);
	hsize_t dim = 0;
	size_t tsize = t >= 0 ? H5Tget_size(t) : 0;
	int ok = s >= 0 && t >= 0 && tsize > 0 && tsize <= 4096 &&
	         H5Sget_simple_extent_ndims(s) == 1 && H5Sget_simple_extent_dims(s, &dim, NULL) == 1 &&
	         layout_ok(d);
	/* bound the element count by the bytes really there, before anyone
	 * allocates memory for it: a corrupt count must not become a huge malloc */
	if (ok && dim > file_len / tsize)
		ok = 0;
	if (ok && dim && H5Dget_storage_size(d) < dim * tsize)
		ok = 0;
	if (s >= 0)
		H5Sclose(s);
	if (t >= 0)
		H5Tclose(t);
	if (!ok) {
		H5Dclose(d);
		return -DS_ECORRUPT;
	}
	*dset = d;
	*n = dim;
	if (type_size)
		*type_size = tsize;
	return 0;
}

hid_t ds__h5_open_file(const char *path)
{
	ds__h5_quiet();
	hid_t fapl = ds__h5_fapl();
	if (fapl < 0)
		return H5I_INVALID_HID;
	/* HDF5 opens by name: check the file is a regular one on a descriptor
	 * of our own and let HDF5 open that very file (/proc/self/fd/N), so a
	 * FIFO or device can neither hang nor feed it, even swapped in now */
	int fd, rc = ds_open_regular(path, &fd);
	if (rc) {
		ds_error("'%s': %s", path, ds_strerror(rc));
		H5Pclose(fapl);
		return H5I_INVALID_HID;
	}
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	hid_t f = H5Fopen(access(self, R_OK) == 0 ? self : path, H5F_ACC_RDONLY, fapl);
	close(fd);
	H5Pclose(fapl);
	return f;
}

/* ---- HDF5's view of a pack file ------------------------------------------ */
static int attr_is(hid_t f, const char *path, const char *name, uint64_t want)
{
	uint64_t v;
	if (ds__h5_read_attr_u64(f, name, &v) || v != want) {
		ds_error("'%s': HDF5 attribute '%s' differs from the seal", path, name);
		return 0;
	}
	return 1;
}

static int str_attr_is(hid_t f, const char *path, const char *name, const char *want)
{
	char s[64];
	if (ds__h5_read_attr_str(f, name, s, sizeof(s)) || strcmp(s, want)) {
		ds_error("'%s': HDF5 attribute '%s' is not '%s'", path, name, want);
		return 0;
	}
	return 1;
}

/* Dataset name: exactly type t, n elements, its data at offset off. */
static int dataset_is(hid_t f, const char *path, const char *name, hid_t t, uint64_t n, uint64_t off)
{
	hid_t d, dt = H5I_INVALID_HID;
	uint64_t dn;
	struct stat st;
	int ok = stat(path, &st) == 0 && !ds__h5_open_1d(f, name, (uint64_t)st.st_size, &d, &dn, NULL);
	if (ok) {
		dt = H5Dget_type(d);
		ok = t >= 0 && dt >= 0 && H5Tequal(dt, t) > 0 && dn == n && (!n || H5Dget_offset(d) == off);
		if (dt >= 0)
			H5Tclose(dt);
		H5Dclose(d);
	}
	if (!ok)
		ds_error("'%s': HDF5 dataset '%s' differs from the seal", path, name);
	return ok;
}

static int crosscheck(const char *path, const struct ds__seal *s)
{
	int index = s->part == UINT32_MAX;
	hid_t f = ds__h5_open_file(path);
	if (f < 0) {
		ds_error("'%s': not readable as HDF5", path);
		return 0;
	}
	hid_t rt = ds__h5_row_type(), pt = ds__h5_prow_type();
	int ok = str_attr_is(f, path, "format", index ? DS__PACK_FORMAT : DS__PART_FORMAT) &&
	         str_attr_is(f, path, "checksum", DS__CHECKSUM) &&
	         attr_is(f, path, "version", index && (s->flags & DS__SEAL_INPLACE)
	                                     ? DS__PACK_VERSION_INPLACE : DS__PACK_VERSION) && attr_is(f, path, "pack_id", s->pack_id) &&
	         attr_is(f, path, "nparts", s->nparts) &&
	         dataset_is(f, path, "entries", rt, s->nentries, s->entries_off) &&
	         dataset_is(f, path, "strings", H5T_STD_U8LE, s->strings_len, s->strings_off);
	if (ok && index)
		ok = dataset_is(f, path, "partitions", pt, s->nparts_rows, s->parts_off) &&
		     (!(s->flags & DS__SEAL_INPLACE) ||
		      (str_attr_is(f, path, "layout", "in-place") &&
		       dataset_is(f, path, "sources", H5T_STD_U8LE, s->payload_len, s->payload_off)));
	else if (ok)
		ok = attr_is(f, path, "part", s->part) && attr_is(f, path, "replicated", s->flags & 1) &&
		     dataset_is(f, path, "payload", H5T_STD_U8LE, s->payload_len, s->payload_off);
	H5Tclose(rt);
	H5Tclose(pt);
	H5Fclose(f);
	return ok;
}

int ds__h5_crosscheck(const char *path, const struct ds__seal *s)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		ds_error("'%s': cannot check it with HDF5: %s", path, strerror(errno));
		return -errno;
	}
	if (pid == 0)
		_exit(crosscheck(path, s) ? 0 : 1);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFSIGNALED(status)) {
		ds_error("'%s': the HDF5 library crashed reading it (signal %d): damaged or crafted",
		         path, WTERMSIG(status));
		return -DS_ECORRUPT;
	}
	return WEXITSTATUS(status) ? -DS_ECORRUPT : 0;
}

/* ---- writing ------------------------------------------------------------ */
static int h5_broken;

int ds__h5_close(hid_t f)
{
	if (H5Fclose(f) >= 0)
		return 0;
	h5_broken = 1;
	return -EIO;
}

int ds__h5_broken(void)
{
	return h5_broken;
}

int ds__h5_skeleton(const char *path, int (*attrs)(hid_t f, const void *ctx), const void *ctx,
                    struct ds__h5_ds *ds, size_t nds)
{
	hid_t fcpl = ds__h5_fcpl(), fapl = ds__h5_fapl();
	int rc = -EIO;
	hid_t f = fcpl >= 0 && fapl >= 0 ? H5Fcreate(path, H5F_ACC_EXCL, fcpl, fapl) : -1;
	if (f >= 0 && !attrs(f, ctx)) {
		rc = 0;
		for (size_t i = 0; !rc && i < nds; i++) {
			hid_t d = ds__h5_dataset(f, ds[i].name, ds[i].ftype, ds[i].n);
			if (d < 0) {
				rc = -EIO;
				break;
			}
			/* H5Dget_offset of an empty dataset is not an address */
			ds[i].off = ds[i].n ? H5Dget_offset(d) : 0;
			if (ds[i].n && ds[i].off == HADDR_UNDEF)
				rc = -EIO;
			H5Dclose(d);
		}
	}
	if (f >= 0 && ds__h5_close(f))
		rc = -EIO;
	if (fcpl >= 0)
		H5Pclose(fcpl);
	if (fapl >= 0)
		H5Pclose(fapl);
	return rc;
}
