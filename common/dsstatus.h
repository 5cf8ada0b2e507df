/* SPDX-License-Identifier: BSD-3-Clause */
/* dsstatus.h: JOBDIR/status.all, the figures of every node of a job, which
 * the service gathers over MPI (shuffle/gather.c) and `dstage status` reads
 * (stage/status.c).  Text: a line "dstage-status-1 NODES", then one line per
 * node of DS_STATUS_FIELDS numbers: node, files, bytes, store size, local,
 * cache and remote reads, stalls, served reads, epoch, prefetch done and
 * total, fetched bytes.  It exists only while the service runs. */
#ifndef DS_STATUS_H
#define DS_STATUS_H

#include "dsstore.h" /* DS_STATUS_ALL */

#define DS_STATUS_MAGIC "dstage-status-1"
#define DS_STATUS_FIELDS 13

#endif
