/* SPDX-License-Identifier: BSD-3-Clause */
/* h5-tarls: the members of a tar as ds__tar_scan (hdf5/tar.c) lists them,
 * for t/0013-tar-scan.t and the hostile-tar tests.
 *
 *   h5-tarls TAR          one line per member, sorted by path:
 *                         TYPE MODE SIZE DATA_OFF MTIME_NS NAME [-> TARGET]
 *                         (TYPE d, f or l; MODE octal permission bits)
 *   h5-tarls -x TAR DIR   extract the members into the new directory DIR,
 *                         every file's bytes read with pread from
 *                         [DATA_OFF, DATA_OFF + SIZE) of the tar, so a
 *                         diff -r against GNU tar's own extraction checks
 *                         the offsets byte for byte
 * Exit 0, or 1 with the scanner's message. */
#include "tar.h"

#include "pack_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int extract(int tfd, const struct ds__tar_member *v, size_t n, const char *dir)
{
	if (mkdir(dir, 0700) < 0) {
		perror(dir);
		return 1;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		perror(dir);
		return 1;
	}
	static char buf[1 << 16];
	for (size_t i = 0; i < n; i++) {
		const struct ds__tar_member *m = &v[i];
		int rc = 0;
		if (S_ISDIR(m->mode))
			rc = mkdirat(dfd, m->name, 0700);
		else if (S_ISLNK(m->mode))
			rc = symlinkat(m->target, dfd, m->name);
		else {
			int fd = openat(dfd, m->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
			                0600);
			rc = fd < 0 ? -1 : 0;
			for (uint64_t done = 0; !rc && done < m->size;) {
				size_t len = m->size - done < sizeof(buf) ? (size_t)(m->size - done)
				                                          : sizeof(buf);
				if (ds_pread_full(tfd, buf, len, (off_t)(m->data_off + done)) ||
				    ds_write_full(fd, buf, len))
					rc = -1;
				done += len;
			}
			if (fd >= 0)
				close(fd);
		}
		if (rc) {
			fprintf(stderr, "h5-tarls: %s/%s: extract failed\n", dir, m->name);
			return 1;
		}
	}
	close(dfd);
	return 0;
}

int main(int argc, char **argv)
{
	int x = argc == 4 && !strcmp(argv[1], "-x");
	if (argc != 2 && !x) {
		fprintf(stderr, "usage: h5-tarls [-x] TAR [DIR]\n");
		return 2;
	}
	const char *tar = argv[x ? 2 : 1];
	ds_log_set_cmd("tarls");
	ds_log_init(0);
	int fd = open(tar, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(tar);
		return 1;
	}
	struct ds__tar_member *v;
	size_t n;
	if (ds__tar_scan(fd, tar, &v, &n))
		return 1;
	int rc = 0;
	if (x)
		rc = extract(fd, v, n, argv[3]);
	else
		for (size_t i = 0; i < n; i++) {
			const struct ds__tar_member *m = &v[i];
			printf("%c %04o %llu %llu %lld %s%s%s\n",
			       S_ISDIR(m->mode)   ? 'd'
			       : S_ISLNK(m->mode) ? 'l'
			                          : 'f',
			       m->mode & 07777, (unsigned long long)m->size,
			       (unsigned long long)m->data_off, (long long)m->mtime_ns, m->name,
			       m->target ? " -> " : "", m->target ? m->target : "");
		}
	ds__tar_free(v, n);
	close(fd);
	return rc;
}
