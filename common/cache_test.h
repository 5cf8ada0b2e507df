/* SPDX-License-Identifier: BSD-3-Clause */
/* cache_test.h: the functions of common/cache.c that only the tests call
 * (t/helpers/test-cache.c, t/helpers/serve-read.c), kept out of the face
 * dsepoch.h: production code reads a cache with ds_cache_find_checked and
 * keeps its set for the life of the process.  Private to common/ (t/ may
 * look inside, t/0001-modules.t). */
#ifndef DS_COMMON_CACHE_TEST_H
#define DS_COMMON_CACHE_TEST_H

#include "dsepoch.h"

void ds_cache_set_free(struct ds_cache_set *cs);
/* ds_cache_find_checked without *checked. */
int ds_cache_find(struct ds_cache_set *cs, uint32_t id, const void **data, uint64_t *len,
                  struct ds_cache_ref **ref);
/* The bytes ep's data takes. */
uint64_t ds_cache_epoch_bytes(const struct ds_cache_epoch *ep);
/* 1 when ep took over a spare file (ds_cache_epoch_free). */
int ds_cache_epoch_recycled(const struct ds_cache_epoch *ep);

#endif
