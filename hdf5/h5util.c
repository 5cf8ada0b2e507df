/* h5util.c: the HDF5 side of the pack format: property lists that make the
 * files byte-reproducible, the table types, attributes, and checked opens of
 * untrusted files. */
#include "pack_int.h"

#include <string.h>

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

/* A compound type built from a field list: packed little-endian on disk,
 * the native struct layout in memory. */
struct field {
	const char *name;
	size_t mem_off;
	hid_t disk; /* H5T_STD_*LE */
	hid_t mem;  /* H5T_NATIVE_* */
};

static hid_t compound(const struct field *f, size_t nf, size_t mem_size, int on_disk)
{
	size_t size = 0;
	if (on_disk)
		for (size_t i = 0; i < nf; i++)
			size += H5Tget_size(f[i].disk);
	hid_t t = H5Tcreate(H5T_COMPOUND, on_disk ? size : mem_size);
	if (t < 0)
		return H5I_INVALID_HID;
	size_t off = 0;
	for (size_t i = 0; i < nf; i++) {
		if (H5Tinsert(t, f[i].name, on_disk ? off : f[i].mem_off, on_disk ? f[i].disk : f[i].mem) < 0) {
			H5Tclose(t);
			return H5I_INVALID_HID;
		}
		off += H5Tget_size(f[i].disk);
	}
	return t;
}

#define FIELD(S, name, disk, mem) {#name, offsetof(struct S, name), disk, mem}

hid_t ds__h5_row_type(int on_disk)
{
	/* The field order is the on-disk order (README, "Pack format"). */
	const struct field f[] = {
		FIELD(ds__row, path_off, H5T_STD_U64LE, H5T_NATIVE_UINT64),
		FIELD(ds__row, path_len, H5T_STD_U32LE, H5T_NATIVE_UINT32),
		FIELD(ds__row, mode, H5T_STD_U32LE, H5T_NATIVE_UINT32),
		FIELD(ds__row, mtime_ns, H5T_STD_I64LE, H5T_NATIVE_INT64),
		FIELD(ds__row, size, H5T_STD_U64LE, H5T_NATIVE_UINT64),
		FIELD(ds__row, part, H5T_STD_U32LE, H5T_NATIVE_UINT32),
		FIELD(ds__row, offset, H5T_STD_U64LE, H5T_NATIVE_UINT64),
		FIELD(ds__row, stored, H5T_STD_U64LE, H5T_NATIVE_UINT64),
		FIELD(ds__row, codec, H5T_STD_U8LE, H5T_NATIVE_UINT8),
		FIELD(ds__row, flags, H5T_STD_U8LE, H5T_NATIVE_UINT8),
		FIELD(ds__row, crc, H5T_STD_U32LE, H5T_NATIVE_UINT32),
		FIELD(ds__row, target_off, H5T_STD_U64LE, H5T_NATIVE_UINT64),
		FIELD(ds__row, target_len, H5T_STD_U32LE, H5T_NATIVE_UINT32),
	};
	return compound(f, sizeof(f) / sizeof(f[0]), sizeof(struct ds__row), on_disk);
}

hid_t ds__h5_prow_type(int on_disk)
{
	const struct field f[] = {
		FIELD(ds__prow, size, H5T_STD_U64LE, H5T_NATIVE_UINT64),
		FIELD(ds__prow, nfiles, H5T_STD_U32LE, H5T_NATIVE_UINT32),
		FIELD(ds__prow, replicated, H5T_STD_U8LE, H5T_NATIVE_UINT8),
	};
	return compound(f, sizeof(f) / sizeof(f[0]), sizeof(struct ds__prow), on_disk);
}

hid_t ds__h5_dataset(hid_t loc, const char *name, hid_t ftype, hid_t mtype, uint64_t n,
                     const void *data)
{
	hsize_t dim = n;
	hid_t space = H5Screate_simple(1, &dim, NULL);
	hid_t dcpl = ds__h5_dcpl();
	hid_t d = H5I_INVALID_HID;
	if (space >= 0 && dcpl >= 0)
		d = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (d >= 0 && data && n && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
		H5Dclose(d);
		d = H5I_INVALID_HID;
	}
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
	if (H5Tget_size(t) <= 8 && H5Tget_sign(t) == H5T_SGN_NONE && H5Aread(a, H5T_NATIVE_UINT64, v) >= 0)
		rc = 0;
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
	hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
	H5Pclose(fapl);
	return f;
}

hid_t ds__h5_open_image(const void *buf, size_t len)
{
	ds__h5_quiet();
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	hid_t f = H5I_INVALID_HID;
	/* the core driver over a copy of the image; nothing touches the disk */
	if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0 &&
	    H5Pset_file_image(fapl, (void *)buf, len) >= 0)
		f = H5Fopen("dstage-image", H5F_ACC_RDONLY, fapl);
	if (fapl >= 0)
		H5Pclose(fapl);
	return f;
}
