/* SPDX-License-Identifier: BSD-3-Clause */
/* place.c: partitions to nodes (see dsplace.h). */
#include "dsplace.h"
#include "dscommon.h"
#include "dsindex.h"

#include <string.h>

struct order {
	uint64_t size;
	uint32_t part;
};

static int by_size_desc(const void *x, const void *y)
{
	const struct order *a = x, *b = y;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return a->part < b->part ? -1 : a->part > b->part;
}

int ds_place(struct ds_placement *pl, uint32_t nparts, const uint64_t *sizes,
             const uint8_t *replicated, uint32_t nnodes, uint32_t r)
{
	memset(pl, 0, sizeof(*pl));
	if (nnodes == 0 || r == 0)
		return -EINVAL;
	if (r > nnodes)
		r = nnodes;
	uint64_t nloc = 0;
	for (uint32_t p = 0; p < nparts; p++)
		nloc += replicated && replicated[p] ? nnodes : r;
	if (nloc > UINT32_MAX)
		return -EINVAL;
	pl->nparts = nparts;
	pl->nnodes = nnodes;
	pl->r = r;
	pl->first = calloc((size_t)nparts + 1, sizeof(uint32_t));
	pl->node = calloc(nloc + 1, sizeof(uint32_t));
	pl->base = calloc(nloc + 1, sizeof(uint64_t));
	pl->store_size = calloc(nnodes, sizeof(uint64_t));
	uint64_t *load = calloc(nnodes, sizeof(uint64_t));
	uint8_t *holds = calloc((size_t)nparts * nnodes + 1, 1);
	struct order *ord = calloc((size_t)nparts + 1, sizeof(*ord));
	if (!pl->first || !pl->node || !pl->base || !pl->store_size || !load || !holds || !ord) {
		free(load);
		free(holds);
		free(ord);
		ds_placement_release(pl);
		return -ENOMEM;
	}
	uint32_t no = 0;
	for (uint32_t p = 0; p < nparts; p++) {
		if (replicated && replicated[p]) {
			for (uint32_t k = 0; k < nnodes; k++) {
				holds[(size_t)p * nnodes + k] = 1;
				load[k] += sizes[p];
			}
		} else {
			ord[no].size = sizes[p];
			ord[no].part = p;
			no++;
		}
	}
	qsort(ord, no, sizeof(*ord), by_size_desc);
	for (uint32_t i = 0; i < no; i++) {
		uint32_t p = ord[i].part;
		for (uint32_t c = 0; c < r; c++) {
			uint32_t best = UINT32_MAX;
			for (uint32_t k = 0; k < nnodes; k++)
				if (!holds[(size_t)p * nnodes + k] && (best == UINT32_MAX || load[k] < load[best]))
					best = k;
			holds[(size_t)p * nnodes + best] = 1;
			load[best] += sizes[p];
		}
	}
	/* locations in part order, nodes increasing; store bases per node */
	uint32_t l = 0;
	for (uint32_t p = 0; p < nparts; p++) {
		pl->first[p] = l;
		for (uint32_t k = 0; k < nnodes; k++) {
			if (!holds[(size_t)p * nnodes + k])
				continue;
			pl->node[l] = k;
			pl->base[l] = pl->store_size[k];
			pl->store_size[k] += (sizes[p] + DS_STORE_ALIGN - 1) / DS_STORE_ALIGN * DS_STORE_ALIGN;
			l++;
		}
	}
	pl->first[nparts] = l;
	free(load);
	free(holds);
	free(ord);
	return 0;
}

void ds_placement_release(struct ds_placement *pl)
{
	ds_free(&pl->first);
	ds_free(&pl->node);
	ds_free(&pl->base);
	ds_free(&pl->store_size);
	ds_free(&pl->tier);
	ds_free(&pl->ram_size);
}

static uint64_t aligned(uint64_t n, uint64_t a)
{
	return (n + a - 1) / a * a;
}

int ds_place_tiers(struct ds_placement *pl, const uint64_t *sizes, const uint8_t *replicated,
                   const uint64_t *room)
{
	uint32_t nloc = pl->first[pl->nparts];
	pl->tier = calloc((size_t)nloc + 1, 1);
	pl->ram_size = calloc(pl->nnodes + 1, sizeof(uint64_t));
	if (!pl->tier || !pl->ram_size) {
		ds_free(&pl->tier);
		ds_free(&pl->ram_size);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < pl->nnodes; k++) {
		pl->ram_size[k] = pl->store_size[k];
		if (pl->store_size[k] <= room[k])
			continue;
		/* first fit in placement order: replicated, then the rest */
		uint64_t left = room[k], ram = 0, spill = 0;
		for (int pass = 0; pass < 2; pass++)
			for (uint32_t p = 0; p < pl->nparts; p++) {
				int rep = replicated && replicated[p];
				if (rep != !pass)
					continue;
				for (uint32_t l = pl->first[p]; l < pl->first[p + 1]; l++) {
					if (pl->node[l] != k)
						continue;
					uint64_t a = aligned(sizes[p], DS_STORE_ALIGN);
					if (a <= left) {
						left -= a;
						pl->tier[l] = DS_TIER_RAM;
					} else {
						pl->tier[l] = DS_TIER_SPILL;
					}
				}
			}
		/* bases: RAM from 0, spill from ram_size, partition order in each */
		for (uint32_t p = 0; p < pl->nparts; p++)
			for (uint32_t l = pl->first[p]; l < pl->first[p + 1]; l++)
				if (pl->node[l] == k && pl->tier[l] == DS_TIER_RAM) {
					pl->base[l] = ram;
					ram += aligned(sizes[p], DS_STORE_ALIGN);
				}
		pl->ram_size[k] = aligned(ram, DS_SPILL_ALIGN);
		for (uint32_t p = 0; p < pl->nparts; p++)
			for (uint32_t l = pl->first[p]; l < pl->first[p + 1]; l++)
				if (pl->node[l] == k && pl->tier[l] == DS_TIER_SPILL) {
					pl->base[l] = pl->ram_size[k] + spill;
					spill += aligned(sizes[p], DS_STORE_ALIGN);
				}
		pl->store_size[k] = pl->ram_size[k] + spill;
	}
	return 0;
}

int ds_placement_has(const struct ds_placement *pl, uint32_t part, uint32_t node, uint64_t *base)
{
	if (part >= pl->nparts)
		return 0;
	for (uint32_t l = pl->first[part]; l < pl->first[part + 1]; l++)
		if (pl->node[l] == node) {
			if (base)
				*base = pl->base[l];
			return 1;
		}
	return 0;
}
