/* SPDX-License-Identifier: BSD-3-Clause */
/* dscommon.h: what the MPI side and the preload shim share (libc only).
 *
 * Conventions, everywhere in dstage:
 *  - functions return 0 (or a count) on success and a negative errno on
 *    failure; project-specific failures use the DS_E* codes below;
 *  - messages go to stderr as "dstage: CMD: SUBJECT: REASON", lowercase,
 *    subject quoted, no final period;
 *  - public names are ds_*, internal non-static names ds__*. */
#ifndef DSCOMMON_H
#define DSCOMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

/* Project error codes, beyond errno (negative, far from errno's range). */
#define DS_ECORRUPT 10001 /* structure of a pack or store is invalid */
#define DS_ECHECKSUM 10002 /* data does not match its checksum */
#define DS_EFORMAT 10003   /* unknown format or version */
#define DS_ENAME 10004     /* a name is unsafe (.., absolute, not UTF-8, ...) */
#define DS_ENOTREG 10005   /* a FIFO, device, socket or directory where a file is read */

/* strerror that also knows the DS_E* codes; takes a positive or negative code. */
const char *ds_strerror(int err);

/* ---- logging ------------------------------------------------------------ */
enum ds_log_level { DS_LOG_ERROR = 0, DS_LOG_WARN, DS_LOG_INFO, DS_LOG_DEBUG };

/* The command name used in messages ("pack", "stage", ...). Not copied. */
void ds_log_set_cmd(const char *cmd);
/* Level from $DSTAGE_LOG (error, warn, info, debug), default warn; then the
 * command line wins: verbose > 0 (-v) raises it to at least info, verbose < 0
 * (-q) sets error. */
void ds_log_init(int verbose);
/* A prefix added after "dstage: CMD: ", e.g. "rank 3: " (copied). */
void ds_log_set_prefix(const char *prefix);
void ds_log(enum ds_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ds_error(...) ds_log(DS_LOG_ERROR, __VA_ARGS__)
#define ds_warn(...) ds_log(DS_LOG_WARN, __VA_ARGS__)
#define ds_info(...) ds_log(DS_LOG_INFO, __VA_ARGS__)
#define ds_debug(...) ds_log(DS_LOG_DEBUG, __VA_ARGS__)

/* ---- memory ------------------------------------------------------------- */
/* Allocation that cannot fail: prints and exits 1 on ENOMEM (for commands,
 * never used by the shim). */
void *ds_xmalloc(size_t n);
void *ds_xcalloc(size_t n, size_t size);
void *ds_xrealloc(void *p, size_t n);
char *ds_xstrdup(const char *s);
/* free(*pp) and set *pp = NULL: a double free becomes impossible. */
void ds_free(void *pp);

/* Growable byte buffer. */
struct ds_buf {
	char *data;
	size_t len, cap;
};
void ds_buf_reserve(struct ds_buf *b, size_t extra);
void ds_buf_add(struct ds_buf *b, const void *p, size_t n);
void ds_buf_release(struct ds_buf *b);

/* ---- numbers and sizes -------------------------------------------------- */
/* "64KiB", "1GiB", "10M", "4096" -> bytes.  Returns 0 or -EINVAL. */
int ds_parse_size(const char *s, uint64_t *out);
/* Human form of a byte count into buf ("1.5 GiB"). Returns buf. */
char *ds_fmt_size(uint64_t n, char *buf, size_t len);
int ds_parse_u64(const char *s, uint64_t *out);
int ds_parse_double(const char *s, double *out);
double ds_now(void); /* monotonic seconds */

/* An id and its position in the caller's list; ds_sort_id_at sorts pairs
 * made in position order by id, then position (stable LSD radix, two 16-bit
 * digits).  0 or -ENOMEM. */
struct ds_id_at {
	uint32_t id;
	uint32_t at;
};
int ds_sort_id_at(struct ds_id_at *a, size_t n);

/* ---- checksums ---------------------------------------------------------- */
/* CRC-32C (Castagnoli), the checksum of every file in a pack.  Start with
 * crc = 0; feed pieces in order.  Uses SSE4.2 when the CPU has it. */
uint32_t ds_crc32c(uint32_t crc, const void *buf, size_t len);
/* The CRC-32C of A then B from crc_a, crc_b and B's length (zlib's
 * crc32_combine): pieces checksummed out of order. */
uint32_t ds_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* ---- names -------------------------------------------------------------- */
/* Is this relative path safe to store: not empty, no leading '/', no "." or
 * ".." component, no empty component, no '\n', valid UTF-8, shorter than
 * PATH_MAX, each component shorter than NAME_MAX+1.  Returns 0 or -DS_ENAME
 * with *why set to a static reason. */
int ds_name_check(const char *path, size_t len, const char **why);
/* Is this relative path the top-level ".dstage" or under it?  That name is
 * the shim's virtual directory (MOUNT/.dstage/epochs/...), which would hide
 * real data of that name: pack, every manifest reader and the node-store
 * index refuse it.  1 or 0; *why (when given) set to the reason. */
int ds_name_reserved(const char *path, size_t len, const char **why);
/* The order of paths in packs and indexes: bytewise, with '/' below every
 * other byte, so a directory's subtree follows it contiguously and siblings
 * come out in name order. */
int ds_path_cmp(const char *a, const char *b);
/* Does symlink target (len bytes) stay inside the tree when resolved,
 * lexically, from the directory holding the link (a relative path of
 * link_len bytes)?  Relative, no NUL, no ".." climbing above the tree's
 * root.  Returns 0, or -EXDEV (it leaves the tree) / -DS_ENAME (empty, too
 * long, NUL) with *why set to a static reason. */
int ds_target_check(const char *link, size_t link_len, const char *target, size_t len,
                    const char **why);
/* Lexically normalise an absolute path in place ("//" -> "/", "." dropped,
 * ".." pops).  Returns the new length. */
size_t ds_path_normalise(char *path);

/* ---- I/O ---------------------------------------------------------------- */
/* Full-length pread/pwrite/write, retrying EINTR and short transfers.
 * Return 0 or -errno (-EIO for an unexpected end of file on read). */
int ds_pread_full(int fd, void *buf, size_t len, off_t off);
int ds_pwrite_full(int fd, const void *buf, size_t len, off_t off);
int ds_write_full(int fd, const void *buf, size_t len);
/* Write a whole file so readers see the old one or the new one, never a
 * part: PATH.tmp.<pid>, fsync, rename.  0 or -errno (the temporary removed). */
int ds_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode);
/* The temporary ds_write_file_atomic writes, made (O_RDWR, O_EXCL) for a
 * caller that writes it in pieces and renames it itself: its name into tmp
 * (size bytes); the descriptor or -errno. */
int ds_tmp_create(const char *path, char *tmp, size_t size, mode_t mode);
/* Open a file for reading that must be a regular file: a FIFO, device,
 * socket or directory in its place is refused (-DS_ENOTREG) without
 * blocking (opened O_NONBLOCK, checked with fstat on the descriptor, so no
 * swap between check and open can make a read hang).  0 and *fd, or
 * -errno / -DS_ENOTREG. */
int ds_open_regular(const char *path, int *fd);
/* mkdir -p with a mode for the created components. */
int ds_mkdir_p(const char *path, mode_t mode);
/* rm -rf, not following symlinks, not crossing devices. 0 or -errno. */
int ds_rm_rf(const char *path);

/* ---- stopping on SIGINT / SIGTERM (common/stop.c) ---------------------- */
/* Catch SIGINT and SIGTERM: the handler records the signal and nothing
 * else; long loops (pack, stage, the S3 client) poll ds_stop_signal() and
 * end their step with -EINTR, which fails it as any error does. */
void ds_stop_on_signals(void);
/* 0, or the signal that asked to stop. */
int ds_stop_signal(void);
/* "interrupted by SIGINT" (or SIGTERM): the reason in messages. */
const char *ds_stop_why(void);

/* ---- fault injection (tests) -------------------------------------------- */
/* DSTAGE_FAULT=POINT[:rank=N][:action=error|kill|exit],...: returns -EIO
 * when an error is injected at `point` on `rank` (see common/fault.c). */
int ds_fault(const char *point, int rank);

/* A measurement switch (DSTAGE_SERVE_RGET, DSTAGE_SERVE_VERIFY, ...): 1
 * unless the environment sets name to "0".  Read once into *cache, which
 * starts at -1; threads racing at the first call store the same value. */
int ds_env_switch(const char *name, int *cache);

#endif
