/* SPDX-License-Identifier: BSD-3-Clause */
/* crc32c.c: CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the
 * checksum of every file in a pack.  Slicing-by-8 in portable C; the SSE4.2
 * crc32 instruction when the CPU has it (checked once at run time). */
#include "dscommon.h"

#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static uint32_t tab[8][256];
/* sh256/sh512[k][n]: the CRC register (byte n at byte position k) after 256
 * or 512 zero bytes: shifts a stream's CRC past the streams that follow. */
static uint32_t sh256[4][256], sh512[4][256];

static void make_tables(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		tab[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 1; k < 8; k++)
			tab[k][n] = (tab[k - 1][n] >> 8) ^ tab[0][tab[k - 1][n] & 0xff];
	for (int n = 0; n < 256; n++)
		for (int k = 0; k < 4; k++) {
			uint32_t r = (uint32_t)n << (8 * k);
			for (int j = 0; j < 512; j++) {
				r = (r >> 8) ^ tab[0][r & 0xff];
				if (j == 255)
					sh256[k][n] = r;
			}
			sh512[k][n] = r;
		}
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc;
		crc = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^ tab[5][(w >> 16) & 0xff] ^
		      tab[4][(w >> 24) & 0xff] ^ tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^
		      tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;
	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	/* three independent streams hide the instruction's latency */
	while (len >= 3 * 256) {
		uint64_t c1 = 0, c2 = 0;
		const unsigned char *p1 = p + 256, *p2 = p + 512;
		for (int i = 0; i < 256; i += 8) {
			uint64_t a, b, d;
			memcpy(&a, p + i, 8);
			memcpy(&b, p1 + i, 8);
			memcpy(&d, p2 + i, 8);
			c = __builtin_ia32_crc32di(c, a);
			c1 = __builtin_ia32_crc32di(c1, b);
			c2 = __builtin_ia32_crc32di(c2, d);
		}
		/* combine: shift c over 512 and c1 over 256 bytes of zeros */
		uint32_t x = (uint32_t)c, y = (uint32_t)c1;
		uint32_t cx = sh512[0][x & 0xff] ^ sh512[1][(x >> 8) & 0xff] ^ sh512[2][(x >> 16) & 0xff] ^
		              sh512[3][x >> 24];
		uint32_t cy = sh256[0][y & 0xff] ^ sh256[1][(y >> 8) & 0xff] ^ sh256[2][(y >> 16) & 0xff] ^
		              sh256[3][y >> 24];
		c = cx ^ cy ^ (uint32_t)c2;
		p += 3 * 256;
		len -= 3 * 256;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static int use_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	make_tables();
#if defined(__x86_64__)
	/* one cpuid, here, at the first checksum: __builtin_cpu_supports would
	 * link libgcc's constructor, which runs a dozen cpuid instructions in
	 * every process that loads the shim (each one traps in a VM) */
	unsigned a, b, c, d;
	use_hw = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
#endif
	if (getenv("DSTAGE_CRC_SOFT"))
		use_hw = 0;
}

uint32_t ds_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (use_hw)
		return ~crc_hw(crc, buf, len);
#endif
	return ~crc_sw(crc, buf, len);
}

/* ds_crc32c_combine: multiply by the matrix of "one more zero bit" squared
 * up to B's length, over GF(2) (zlib's crc32_combine, the Castagnoli
 * polynomial). */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	for (; vec; vec >>= 1, mat++)
		if (vec & 1)
			sum ^= *mat;
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		sq[n] = gf2_times(mat, mat[n]);
}

uint32_t ds_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	uint32_t even[32], odd[32], row = 1;
	if (!len_b)
		return crc_a;
	odd[0] = 0x82f63b78u; /* the reflected polynomial: one zero bit */
	for (int n = 1; n < 32; n++, row <<= 1)
		odd[n] = row;
	gf2_square(even, odd); /* two zero bits */
	gf2_square(odd, even); /* four */
	do {
		gf2_square(even, odd);
		if (len_b & 1)
			crc_a = gf2_times(even, crc_a);
		len_b >>= 1;
		if (!len_b)
			break;
		gf2_square(odd, even);
		if (len_b & 1)
			crc_a = gf2_times(odd, crc_a);
		len_b >>= 1;
	} while (len_b);
	return crc_a ^ crc_b;
}
