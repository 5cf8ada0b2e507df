/* SPDX-License-Identifier: BSD-3-Clause */
/* tar.h (private to hdf5/): the members of a tar shard, for sources staged
 * in place with --expand-tar (docs/formats.md, "Tar shards").  A member's
 * data is contiguous in the tar, so a file member is read where it lies:
 * bytes [data_off, data_off + size) of the tar.
 *
 * The scanner treats the tar as hostile: every header's checksum, every
 * number, name and link is checked, and a member the staged tree could not
 * hold safely refuses the whole tar (the rules: tar.c, top comment). */
#ifndef DS_TAR_H
#define DS_TAR_H

#include <stddef.h>
#include <stdint.h>

struct ds__tar_member {
	char *name;    /* path inside the tar: checked (ds_name_check), no leading
	                     "./", no trailing '/' */
	char *target;  /* symlinks: the target, checked to stay inside the tar;
	                     others NULL */
	uint32_t mode; /* with the type bits: S_IFREG, S_IFDIR or S_IFLNK */
	int64_t mtime_ns;
	uint64_t size;     /* files: data bytes; symlinks: target length; dirs: 0 */
	uint64_t data_off; /* files: where the data starts in the tar; others 0 */
};

/* List the members of the tar open on fd (a regular file; tarname names it
 * in messages), sorted by path (ds_path_cmp), one per name (the last of a
 * name wins, as GNU tar's extraction leaves it), with the directories their
 * paths imply added (mode 0755, the tar's mtime).  Reads ustar, GNU
 * (long names and links 'L'/'K', base-256 numbers) and POSIX pax (path,
 * linkpath, size, mtime) archives.  Refuses, with a message naming the tar
 * and the member: unsafe names and link targets (-DS_ENAME), hard links to
 * no earlier regular member, sparse and multi-volume members, unknown member
 * types (-DS_EFORMAT), bad checksums, numbers or extended headers, and an
 * archive that ends before its end-of-archive block (-DS_ECORRUPT).
 * Devices, FIFOs and volume labels are skipped with a warning.  A member's
 * name joined to the tar's own path must still pass the caller's name
 * checks (length).  Returns 0 with *out (free with ds__tar_free) and *n. */
int ds__tar_scan(int fd, const char *tarname, struct ds__tar_member **out, size_t *n);
void ds__tar_free(struct ds__tar_member *v, size_t n);

#endif
