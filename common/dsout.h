/* SPDX-License-Identifier: BSD-3-Clause */
/* dsout.h: write-once outputs (docs/outputs.md): what the shim and the node
 * service say to each other about them, and where they live.  libc only.
 *
 * When `dstage serve --outputs SUBDIR --drain-to DIR` runs, each node's
 * service writes NODEDIR/outputs.conf:
 *
 *     SUBDIR\n        the one top-level name of the mount that takes writes
 *     AREA\n          this node's output area (absolute, 0700, the user's)
 *
 * AREA/ns is the outputs namespace as this node sees it: the closed outputs
 * held here (their bytes), placeholders of the ones held by other nodes
 * (right size and mtime, no bytes: the service fetches them before any open
 * for reading), and every directory.  AREA/w holds files being written
 * (w/<token>), which nobody else sees.  The shim redirects
 * MOUNT/SUBDIR/<rel> to AREA/ns/<rel> for reading and asks the service over
 * NODEDIR/osock for everything that changes the namespace.
 *
 * Request: struct ds_out_req; answer: struct ds_out_resp.  One request per
 * connection (outputs are opened and closed rarely, checkpoints not
 * samples); the service checks the peer's uid (SO_PEERCRED) and every name
 * (ds_name_check: no "..", no leading '/'): the shim is never trusted.
 *
 *   CREATE  path, flags (O_EXCL O_TRUNC O_APPEND O_ACCMODE), mode: take the
 *           path for this writer (EEXIST when another writer of the job
 *           holds it, or O_EXCL and it exists); answer token: the shim
 *           opens AREA/w/<token> (made by the service, 0600, holding the old
 *           bytes when neither O_TRUNC nor a new file) and puts an OFD write
 *           lock on one free byte of the DS_OUT_LOCK_SLOTS at
 *           DS_OUT_LOCK_OFF.  The lock lives as long as any descriptor on
 *           that open file: across dup, fork and exec.  The writer may open
 *           its file again while it writes it (HDF5 does): each open file
 *           takes a byte of its own, then says WATCH again.  The answer
 *           also carries the device and inode of AREA/w/<token>: the writer
 *           checks it opened that very file.  The create's first WATCH goes
 *           on the CREATE's own connection, with no answer: the
 *           confirmation.  The create takes effect only with it: the
 *           connection closed without it (a writer that gave up at its
 *           timeout, or failed or died in its open) rolls it back.
 *   CLOSE   token: the writer closed a descriptor; when no descriptor holds
 *           the lock any more the output is complete: published to every
 *           node before the answer (visible at close).
 *   OPEN    path: about to be opened for reading: bytes held elsewhere are
 *           fetched here first; outputs whose writers have gone without a
 *           close (exit, exec) are published first.
 *   RENAME  path -> path2 (a closed file, or a directory of closed outputs:
 *           one change, EBUSY while a file under it is written);
 *   UNLINK  path; MKDIR path, mode; RMDIR path: first with
 *           DS_OUT_F_PREPARE (checked, not applied), then, on the same
 *           connection, again without it (applied)
 *   DRAIN   wait until every output closed so far is durable in the drain
 *           directory (`dstage drain --wait`); status -EIO when one failed.
 *   PING    status 0 when the outputs service is up. */
#ifndef DSOUT_H
#define DSOUT_H

#include "dsstore.h" /* DS_OUT_SOCK, DS_OUT_CONF, DS_OUT_STATUS, DS_OUT_NS, DS_OUT_W */

#include <limits.h>
#include <stdint.h>

#define DS_OUT_MAGIC 0x44534f31u /* "DSO1" */
/* the bytes a writer's OFD write locks cover, far past any real file: one
 * per open file of the output (a writer that opens its own file again takes
 * the next free one); it is published when the whole range is free */
#define DS_OUT_LOCK_OFF ((int64_t)0x7fffffffffffffc0ll)
#define DS_OUT_LOCK_SLOTS 64
/* the drain's temporary names: DIR/<path>.dstage-drain.<node>.<seq> */
#define DS_OUT_DRAIN_TMP ".dstage-drain."
/* The longest suffix the drain adds to an output's name for its temporary
 * copy (DS_OUT_DRAIN_TMP "<node>.<seq>": 10 and 20 digits at most; a
 * recovery's "recover.<pid>" is shorter), hence the longest name (last
 * component) a file in the outputs may have, 210 bytes.  Longer names, and
 * paths that would not fit PATH_MAX in every node's area or in the drain
 * directory with that suffix, are ENAMETOOLONG at create, mkdir and rename
 * (node 0 decides): a name is never cut on its way to the drain. */
#define DS_OUT_DRAIN_SUFFIX_MAX (sizeof(DS_OUT_DRAIN_TMP) - 1 + 10 + 1 + 20)
#define DS_OUT_FILE_NAME_MAX (NAME_MAX - DS_OUT_DRAIN_SUFFIX_MAX)

enum ds_out_op {
	DS_OUT_CREATE = 1,
	DS_OUT_CLOSE,
	DS_OUT_OPEN,
	DS_OUT_RENAME,
	DS_OUT_UNLINK,
	DS_OUT_MKDIR,
	DS_OUT_RMDIR,
	DS_OUT_DRAIN,
	DS_OUT_PING,
	DS_OUT_WATCH, /* token: the writer holds its lock; publish when every
	               * one of the range goes.  -ESTALE when the output is no
	               * longer being written (published meanwhile): the open
	               * that took that lock must not write it.  A create's
	               * first one is its confirmation, on the CREATE's
	               * connection, unanswered */
	DS_OUT_ABORT, /* token: drop it (the shim closes the CREATE's connection instead) */
};

/* RENAME, UNLINK, MKDIR, RMDIR with this in flags: node 0 checks the change
 * and applies nothing; an answer 0 leaves the connection open for the same
 * request again without it, which is applied and answered when every node
 * has it.  A connection closed before that second request (a writer that
 * gave up at its DSTAGE_TIMEOUT) applies nothing, ever: a change whose call
 * failed with EIO never lands later (docs/outputs.md). */
#define DS_OUT_F_PREPARE 0x40000000

struct ds_out_req {
	uint32_t magic;
	uint32_t op;
	int32_t flags;
	uint32_t mode;
	uint64_t token;
	char path[PATH_MAX];  /* relative to the outputs root */
	char path2[PATH_MAX]; /* RENAME: the new name */
};

struct ds_out_resp {
	uint32_t magic;
	int32_t status; /* 0 or -errno */
	uint64_t token;
	uint64_t dev, ino; /* CREATE: AREA/w/<token>'s: the writer checks it opened that file */
};

#endif
