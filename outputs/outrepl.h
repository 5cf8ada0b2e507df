/* SPDX-License-Identifier: BSD-3-Clause */
/* outrepl.h: replicated write-once outputs (outrepl.c, --outputs-replicas N,
 * docs/outputs.md "Replicated outputs").  The hooks the other files of
 * outputs/ call; everything here runs with the outputs mutex held unless
 * it says otherwise. */
#ifndef DS_OUTPUTS_OUTREPL_H
#define DS_OUTPUTS_OUTREPL_H

#include "outputs.h"

#include <stdint.h>

struct ds__orepl;

/* ds_out_start (collective, mutex not held): the replicas' communicator,
 * the replica count of this step (capped to the step's nodes, said so).
 * 0 or -errno. */
int ds__repl_start(struct ds_out *o, struct ds__orepl **out);
/* main, every ds__out_poll: replica transfers and notices. */
void ds__repl_poll(struct ds__orepl *rp);
/* In flight (a stop waits for it)? */
int ds__repl_busy(struct ds__orepl *rp);
/* The holder, at a writer's close, before the publish: sum the closed file
 * fd (size bytes) into *crc, send it to the step's N-1 replica nodes, wait
 * until each has written it and checked it against *crc.  The mutex is
 * dropped while it waits.  Fills repl[]/nrepl (the replica nodes); 0, or
 * -errno (a replica failed: the output must not be published; the replicas
 * that have it were told to drop it).  With N = 1: 0 at once, nrepl 0. */
int ds__repl_push(struct ds__orepl *rp, int fd, uint64_t size, uint64_t token, const char *path,
                  uint32_t *crc, uint32_t *repl, uint32_t *nrepl);
/* The publish of token failed after a successful push: the replicas drop
 * their copies. */
void ds__repl_abandon(struct ds__orepl *rp, uint64_t token, const uint32_t *repl, uint32_t nrepl);
/* apply() of a publish on a replica node: the copy of token becomes the
 * file dst (mode, mtime).  0 or -errno. */
int ds__repl_take(struct ds__orepl *rp, uint64_t token, const char *dst, uint32_t mode,
                  int64_t mtime_ns);
/* apply() made r a replica here: was it reported drained already? */
void ds__repl_applied(struct ds__orepl *rp, struct ds__orec *r);
/* The holder's drain made r durable: tell the replicas (they stop listing
 * it as not drained). */
void ds__repl_drained(struct ds_out *o, struct ds__orec *r);
/* outputs.status: an undrained= line for each output this node holds a
 * replica of and whose holder has not reported it drained (a recovery
 * after a lost holder copies it from here).  Not after an orderly stop
 * (every holder lived to its own final status). */
void ds__repl_status(struct ds__orepl *rp, struct ds__orec *recs, struct ds_buf *b);
/* An orderly stop: the replica lines are left out from here on. */
void ds__repl_stop(struct ds__orepl *rp);
void ds__repl_free(struct ds__orepl *rp); /* collective */

#endif
