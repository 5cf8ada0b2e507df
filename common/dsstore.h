/* SPDX-License-Identifier: BSD-3-Clause */
/* dsstore.h: the node store as a contract: every name in a job directory and
 * in a node directory, who writes it, who reads it, its format and how long
 * it lives.  libc only (the shim includes it).
 *
 * Nothing outside common/ spells one of these names as a string literal:
 * they use the constants and the path helpers below (t/0011-store-names.t
 * fails when a literal comes back).  A rename here is a format change: the
 * shell scripts jobs/{stage-in,train}.sbatch, jobs/epilog-dstage.sh and the tests in t/
 * spell some of them (marked "sh" below) and must follow.
 *
 * Layout (DIR is --to, a node-local directory):
 *
 *   DIR/dstage.<uid>.<job>/           JOBDIR, 0700: one per user and job (sh)
 *   JOBDIR/<node>/                    NODEDIR, 0700: node <node>'s store (sh)
 *
 * With stage --spill SPILL (the spill tier, dsindex.h), the same names:
 *
 *   SPILL/dstage.<uid>.<job>/<node>/store   the node's store from the
 *                                      index's ram_size on, 0700/0600; built
 *                                      in <node>.partial like NODEDIR; the
 *                                      job's lock is JOBDIR's; removed with
 *                                      NODEDIR (clean, serve --clean)
 *
 * JOBDIR (shared by the node stores one host holds):
 *
 *   name           constant            writer -> reader: format; lifetime
 *   lock           DS_LOCK_NAME        stage, serve, clean (flock) -> stop,
 *                                      clean, a losing stage: 0600 text, the
 *                                      holder's description (dslock.h); until
 *                                      clean removes JOBDIR
 *   <node>.partial DS_PARTIAL_SUFFIX   stage -> nobody: NODEDIR being built,
 *                                      renamed to <node> when complete;
 *                                      removed by the next stage when killed
 *   nodes          DS_NODES_NAME       serve --nodes (failover) -> shim,
 *                                      serve, dstage epoch: text, the node
 *                                      sets by epoch (dsnodeset.h); removed
 *                                      by every new stage
 *   epoch.conf     DS_EPOCH_CONF_NAME  serve at start -> shim, dstage epoch:
 *                                      text key=value (dsepoch.h); until
 *                                      serve --clean or clean
 *   stop           DS_STOP_NAME        dstage stop -> serve (polls it):
 *                                      empty; removed by serve on the way out
 *   status.all     DS_STATUS_ALL       serve (gather.c) -> dstage status:
 *                                      text (dsstatus.h); while serve runs
 *   by-host/<host> DS_BYHOST_NAME      stage -> shim (which node am I):
 *                                      symlink to "<node>"; until clean
 *   cwd/<id>       DS_CWD_NAME         shim -> shim (getcwd inside the
 *                                      mount): empty directories 0500 named
 *                                      by entry id; until clean
 *   dl/<path>      DS_DL_NAME          shim -> the dynamic loader: copies of
 *                                      staged shared objects dlopen'ed
 *                                      (io/dl.c); until clean
 *
 * NODEDIR (one node's store):
 *
 *   index          DS_INDEX_NAME       stage -> shim, serve, status, epoch:
 *                                      binary (dsindex.h), mapped read-only;
 *                                      as long as the store (sh)
 *   store          DS_STORE_NAME       stage -> shim, serve (MPI window):
 *                                      this node's partitions (dsindex.h);
 *                                      as long as the store (sh)
 *   stats          DS_STATS_NAME       stage creates; shim and serve count
 *                                      -> status: struct ds_stats (dsproto.h),
 *                                      MAP_SHARED; as long as the store
 *   sock           DS_SOCK_NAME        serve -> shim, stop, status: Unix
 *                                      socket 0600 (dsproto.h); while serve
 *                                      runs (sh: train.sbatch waits for it)
 *   serve.status   DS_SERVE_STATUS_NAME serve -> dstage status, tests, bench:
 *                                      text key=value, DS_SS_* keys below,
 *                                      rewritten whole (NAME.tmp, rename);
 *                                      state=stopped after serve (sh: t/)
 *   epochs/        DS_CACHE_DIR_NAME   serve -> shim: the epoch cache,
 *                                      ctl + <e>.<gen> (dsepoch.h), and
 *                                      share.<e> (DS_SHARE_PREFIX: the
 *                                      node's share of epoch e, dsnodeset.h);
 *                                      while serve runs
 *   reserved       DS_RESERVED_NAME    shim -> shim: a symlink to itself the
 *                                      shim opens O_PATH to hold descriptor
 *                                      numbers (io/fdtab.c), made through
 *                                      .reserved.<pid> (DS_RESERVED_TMP);
 *                                      as long as the store
 *   replicas.<g>   DS_REPLICAS_NAME    serve (failover re-replication) ->
 *   replicas.<g>.map                   serve, shim: copies of a lost node's
 *                                      partitions and their map
 *                                      (DS_REPLICAS_MAP_SUFFIX); as long as
 *                                      the store; when the store spills the
 *                                      copies (not the map) are in the
 *                                      spill tier's node directory
 *   outputs.conf   DS_OUT_CONF         serve --outputs -> shim: text, the
 *                                      outputs subdir and area (dsout.h);
 *                                      while serve runs
 *   osock          DS_OUT_SOCK         serve --outputs -> shim, dstage drain:
 *                                      Unix socket 0600 (dsout.h); while
 *                                      serve runs (sh: train.sbatch rm's it)
 *   outputs.status DS_OUT_STATUS       serve --outputs -> dstage drain,
 *                                      status: text (outputs/outputs.c);
 *                                      until clean
 *   outputs/       DS_OUT_AREA_NAME    serve --outputs -> shim, drain: the
 *                                      default output area (docs/outputs.md):
 *                                      ns/ (DS_OUT_NS), w/ (DS_OUT_W) and the
 *                                      temporaries of outputs/conn.c,
 *                                      fetch.c (w/f.<n>) and outrepl.c
 *                                      (w/r.<token>: a replica);
 *                                      until drained and clean
 *
 * Temporaries: ds_write_file_atomic writes PATH.tmp.<pid>.<tid>.<n> (O_EXCL,
 * one per call: threads writing PATH at once never share one); serve.status and
 * the cache's ctl go through NAME DS_TMP_SUFFIX; all in the same directory
 * (rename is atomic), removed on success. */
#ifndef DSSTORE_H
#define DSSTORE_H

#include <stddef.h>
#include <stdint.h>

/* ---- JOBDIR --------------------------------------------------------------- */
#define DS_JOBDIR_PREFIX "dstage." /* DIR/dstage.<uid>.<job> */
#define DS_LOCK_NAME "lock"
#define DS_PARTIAL_SUFFIX ".partial"
#define DS_NODES_NAME "nodes"
#define DS_EPOCH_CONF_NAME "epoch.conf"
#define DS_STOP_NAME "stop"
#define DS_STATUS_ALL "status.all"
#define DS_BYHOST_NAME "by-host"
#define DS_CWD_NAME "cwd"
#define DS_DL_NAME "dl"

/* ---- NODEDIR -------------------------------------------------------------- */
#define DS_INDEX_NAME "index"
#define DS_STORE_NAME "store"
#define DS_STATS_NAME "stats"
#define DS_SOCK_NAME "sock"
#define DS_SERVE_STATUS_NAME "serve.status"
#define DS_CACHE_DIR_NAME "epochs"
#define DS_SHARE_PREFIX "share."
#define DS_RESERVED_NAME "reserved"
#define DS_RESERVED_TMP ".reserved."
#define DS_REPLICAS_NAME "replicas."
#define DS_REPLICAS_MAP_SUFFIX ".map"
#define DS_OUT_CONF "outputs.conf"
#define DS_OUT_SOCK "osock"
#define DS_OUT_STATUS "outputs.status"
#define DS_OUT_AREA_NAME "outputs"
#define DS_OUT_NS "ns" /* in the output area */
#define DS_OUT_W "w"   /* in the output area */

#define DS_TMP_SUFFIX ".tmp"

/* ---- NODEDIR/serve.status keys (shuffle/exchange.c -> stage/cmd_store.c) */
#define DS_SS_STATE "state"           /* starting, running, stopped, failed (sh) */
#define DS_SS_PID "pid"               /* the service's pid (sh: tests kill it) */
#define DS_SS_LOCAL_L0 "local_l0"     /* L=0: expected fraction held here */
#define DS_SS_OVERLAP_L0 "overlap_l0" /* L=0: expected overlap with epoch e-1 */
#define DS_SS_EPOCH "epoch."          /* epoch.E=share=N share_bytes=B local=F ... */

/* ---- sizes ---------------------------------------------------------------- */
/* What stage asks the file system to have free beyond a node's store bytes:
 * the index, stats, serve.status, sockets and the file system's own
 * metadata for them, with room to spare. */
#define DS_STORE_HEADROOM (64ull << 20)

/* ---- path helpers ----------------------------------------------------------
 * Each writes a path into buf (len bytes) and returns 0, or -ENAMETOOLONG
 * when it does not fit (buf then holds a truncated, NUL-terminated path that
 * must not be used).  -EINVAL when an argument is NULL or len is 0. */

/* DIR/NAME: a name of the table in a job or node directory. */
int ds_store_path(char *buf, size_t len, const char *dir, const char *name);
/* JOBDIR/NODE/NAME: a node directory's name, the node given by its
 * directory name (as readdir of JOBDIR gives it). */
int ds_store_node_path(char *buf, size_t len, const char *jobdir, const char *node,
                       const char *name);
/* NODEDIR/replicas.<gen>, or NODEDIR/replicas.<gen>.map when map. */
int ds_store_replica_path(char *buf, size_t len, const char *nodedir, int gen, int map);

#endif
