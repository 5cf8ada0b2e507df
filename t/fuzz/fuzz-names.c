/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-names.c: libFuzzer target for the name rules every layer relies on
 * (common/common.c): ds_name_check, ds_target_check, ds_path_normalise,
 * ds_path_cmp.  Properties checked, not just "no crash":
 *  - a name that passes ds_name_check normalises (under "/") to itself;
 *  - ds_path_normalise is idempotent and never yields "..";
 *  - a target that passes ds_target_check, joined to its link's directory
 *    and normalised, stays under the tree's root;
 *  - ds_path_cmp is antisymmetric and 0 only for equal strings.
 * Input: two strings separated by the first NUL (link, target). */
#include "dscommon.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a named failure (a bare __builtin_trap is merged by the optimiser and
 * the report cannot say which property broke) */
#define CHECK(cond, what)                                                                \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "fuzz-names: %s\n", what);                      \
			abort();                                                         \
		}                                                                        \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 3 * PATH_MAX)
		return 0;
	const char *a = (const char *)data;
	const char *nul = memchr(a, 0, size);
	size_t alen = nul ? (size_t)(nul - a) : size;
	const char *b = nul ? nul + 1 : "";
	size_t blen = nul ? size - alen - 1 : 0;

	char *link = strndup(a, alen), *target = strndup(b, blen);
	const char *why;
	int link_ok = ds_name_check(a, alen, &why) == 0;
	if (link_ok) {
		char p[PATH_MAX + 2];
		p[0] = '/';
		memcpy(p + 1, a, alen);
		p[alen + 1] = 0;
		size_t n = ds_path_normalise(p);
		CHECK(n == alen + 1 && !memcmp(p + 1, a, alen), "a safe name is not normal");
	}
	/* normalise arbitrary absolute paths: idempotent, no ".." left */
	/* left unset on purpose: what follows the terminator is whatever the
	 * last input left on the stack (ds_path_normalise once read past it) */
	char q[3 * PATH_MAX + 2], r[3 * PATH_MAX + 2];
	q[0] = '/';
	memcpy(q + 1, a, alen);
	q[alen + 1] = 0;
	size_t qn = strlen(q);
	(void)qn;
	ds_path_normalise(q);
	memcpy(r, q, strlen(q) + 1);
	ds_path_normalise(r);
	CHECK(!strcmp(q, r), "ds_path_normalise is not idempotent");
	CHECK(!strstr(q, "/../") && strcmp(q, "/..") &&
	      (strlen(q) < 3 || strcmp(q + strlen(q) - 3, "/..")), "'..' left after ds_path_normalise");

	if (link_ok && ds_target_check(a, alen, target, strlen(target), &why) == 0 &&
	    strlen(target) == blen) {
		/* resolve lexically from the link's directory under a root */
		char j[3 * PATH_MAX + 16];
		const char *slash = memrchr(a, '/', alen);
		size_t dl = slash ? (size_t)(slash - a) : 0;
		int n = snprintf(j, sizeof(j), "/ROOT/%.*s%s%s", (int)dl, a, dl ? "/" : "", target);
		if (n > 0 && (size_t)n < sizeof(j)) {
			ds_path_normalise(j);
			CHECK(!strncmp(j, "/ROOT", 5) && (!j[5] || j[5] == '/'),
			      "a target ds_target_check accepts leaves the tree");
		}
	}

	int c1 = ds_path_cmp(link, target), c2 = ds_path_cmp(target, link);
	CHECK((c1 > 0) == (c2 < 0) && (c1 == 0) == !strcmp(link, target),
	      "ds_path_cmp is not antisymmetric or not 0 exactly for equal names");
	free(link);
	free(target);
	return 0;
}
