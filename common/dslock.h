/* SPDX-License-Identifier: BSD-3-Clause */
/* dslock.h: one owner per job directory (docs/design.md section 6), libc only.
 *
 * JOBDIR/lock is a 0600 file locked with flock(LOCK_EX): stage, serve and
 * clean of a job take it without waiting, so two of them never run over
 * each other on one node-local directory, and the lock dies with its
 * holder (killed, crashed, node rebooted).  The holder writes who it is
 * into the file ("dstage serve, pid 123 on host n1, since ..."), so a
 * loser can name it; a loser that finds no description, or that of a dead
 * process on this host (a killed holder's; the new holder writes its own
 * right after its flock), reads again until the holder's is there, a few
 * seconds at most, and an orderly drop empties the description.  A process
 * may take the same lock again (`dstage run` holds it across stage and
 * serve): takes nest, and the last drop frees it. */
#ifndef DSLOCK_H
#define DSLOCK_H

#include "dsstore.h" /* DS_LOCK_NAME */

#include <stddef.h>

/* Take JOBDIR/lock for command `what` ("stage", "serve", "clean", "run")
 * without waiting.  JOBDIR must exist.  Returns 0; -EBUSY when another
 * process holds it (its description in who, "" when it has not written one
 * yet); or -errno (-ENOENT: no JOBDIR; -EPERM: the lock is not a regular
 * file of this user). */
int ds_joblock_take(const char *jobdir, const char *what, char *who, size_t wholen);
/* Make DIR (0755, with its parents) and JOBDIR in it (0700), and check
 * that JOBDIR is a directory of this user.  0, or a negative errno with the
 * reason logged ("'PATH': reason"). */
int ds_jobdir_make(const char *to, const char *jobdir);
/* Replace the holder's description's state ("leaving"): a clean that finds
 * a service leaving waits for it instead of refusing. */
void ds_joblock_note(const char *jobdir, const char *state);
/* Undo one take; the last one closes (frees) the lock. */
void ds_joblock_drop(const char *jobdir);
/* With the lock held: remove JOBDIR when nothing but the lock is left in it
 * (all = 0), or remove everything in it (all = 1), the lock file last, so a
 * stage that comes meanwhile finds the lock taken, never half a directory.
 * The lock stays held (on the unlinked file) until dropped.  0 or -errno. */
int ds_joblock_remove_dir(const char *jobdir, int all);

#endif
