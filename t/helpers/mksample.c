/* SPDX-License-Identifier: BSD-3-Clause */
/* mksample: write the built-in sample dataset (make demo, tests, benchmarks).
 *
 *   mksample [-c CLASSES] [-n PER_CLASS] [-v VAL_PER_CLASS] [-s SEED] DIR
 *
 * An ImageFolder-shaped tree: train/class-NN/img-NNNNN.ppm and
 * val/class-NN/img-NNNNN.ppm (binary PPM images of 12x12 .. 64x64 pixels,
 * deterministic for a seed: smooth gradients plus noise, so zlib gains a
 * little but not much, like real photos), a labels.txt, a README, an empty
 * directory and a symlink.  Same arguments => same bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng;

static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void mkdir_or_die(const char *p)
{
	if (mkdir(p, 0755) < 0 && errno != EEXIST) {
		perror(p);
		exit(1);
	}
}

static void image(const char *path, int cls)
{
	int w = 12 + next() % 53, h = 12 + next() % 53;
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fprintf(f, "P6\n%d %d\n255\n", w, h);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			uint64_t r = next();
			unsigned char px[3] = {(unsigned char)(x * 4 + cls * 20 + (r & 15)),
			                       (unsigned char)(y * 4 + ((r >> 8) & 31)),
			                       (unsigned char)(cls * 37 + ((r >> 16) & 63))};
			fwrite(px, 1, 3, f);
		}
	if (fclose(f)) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int classes = 4, per = 32, val = 4, c;
	rng = 42;
	while ((c = getopt(argc, argv, "c:n:v:s:")) != -1) {
		switch (c) {
		case 'c': classes = atoi(optarg); break;
		case 'n': per = atoi(optarg); break;
		case 'v': val = atoi(optarg); break;
		case 's': rng = strtoull(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: mksample [-c CLASSES] [-n PER_CLASS] [-v VAL] [-s SEED] DIR\n");
			return 2;
		}
	}
	if (optind + 1 != argc || classes < 1 || per < 0 || val < 0)
		return 2;
	const char *dir = argv[optind];
	char p[4096];
	mkdir_or_die(dir);
	const char *sets[2] = {"train", "val"};
	int counts[2] = {per, val};
	for (int s = 0; s < 2; s++) {
		snprintf(p, sizeof(p), "%s/%s", dir, sets[s]);
		mkdir_or_die(p);
		for (int k = 0; k < classes; k++) {
			snprintf(p, sizeof(p), "%s/%s/class-%02d", dir, sets[s], k);
			mkdir_or_die(p);
			for (int i = 0; i < counts[s]; i++) {
				snprintf(p, sizeof(p), "%s/%s/class-%02d/img-%05d.ppm", dir, sets[s], k, i);
				image(p, k);
			}
		}
	}
	snprintf(p, sizeof(p), "%s/labels.txt", dir);
	FILE *f = fopen(p, "w");
	for (int k = 0; f && k < classes; k++)
		fprintf(f, "class-%02d\tsample class %d\n", k, k);
	if (!f || fclose(f))
		return 1;
	snprintf(p, sizeof(p), "%s/README", dir);
	f = fopen(p, "w");
	if (!f)
		return 1;
	fprintf(f, "dstage sample dataset: %d classes, %d training and %d validation images each\n",
	        classes, per, val);
	fclose(f);
	snprintf(p, sizeof(p), "%s/empty", dir);
	mkdir_or_die(p);
	snprintf(p, sizeof(p), "%s/classes", dir);
	if (symlink("labels.txt", p) < 0 && errno != EEXIST)
		return 1;
	return 0;
}
