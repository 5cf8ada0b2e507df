/* SPDX-License-Identifier: BSD-3-Clause */
/* tap.h: a tiny TAP producer for C tests (plan, ok, is, diag, skip). */
#ifndef TAP_H
#define TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_fail;

static inline void plan(int n) { printf("1..%d\n", n); }
static inline void skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}
__attribute__((format(printf, 2, 3))) static inline int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	tap_n++;
	if (!cond)
		tap_fail++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}
__attribute__((format(printf, 1, 2))) static inline void diag(const char *fmt, ...)
{
	va_list ap;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}
#define is(got, want, ...)                                                              \
	do {                                                                            \
		long long g_ = (long long)(got), w_ = (long long)(want);                \
		if (!ok(g_ == w_, __VA_ARGS__))                                         \
			diag("  got %lld, want %lld", g_, w_);                          \
	} while (0)
#define is_str(got, want, ...)                                                          \
	do {                                                                            \
		const char *g_ = (got), *w_ = (want);                                   \
		if (!ok(g_ && w_ && !strcmp(g_, w_), __VA_ARGS__))                      \
			diag("  got '%s', want '%s'", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
	} while (0)
static inline void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		printf("ok %d # skip %s\n", ++tap_n, why);
}
static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_fail ? 1 : 0;
}

#endif
