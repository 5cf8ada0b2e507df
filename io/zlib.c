/* SPDX-License-Identifier: BSD-3-Clause */
/* zlib.c: libz, loaded at the first zlib file a process reads.
 *
 * The shim needs three functions of zlib (inflateInit_, inflate,
 * inflateEnd: remote.c inflates a -z zlib file at its first read).  Linked
 * as a dependency, libz.so.1 was opened and mapped (five mappings) in every
 * process that loads the shim, a shell's /bin/true included.  These
 * definitions, hidden in the shim (-fvisibility=hidden: the program's own
 * zlib calls never come here), open it with dlopen at the first call
 * instead, once.  When it cannot be found, inflateInit_ fails with
 * Z_VERSION_ERROR and the read with EIO, said once in the log. */
#include "shim.h"

#ifndef DS_LINK_WRAP /* the tsan build links libz itself */
#include <dlfcn.h>
#include <zlib.h>

static struct {
	int (*init)(z_streamp, const char *, int);
	int (*inflate)(z_streamp, int);
	int (*end)(z_streamp);
} z;
static pthread_once_t z_once = PTHREAD_ONCE_INIT;

static void z_load(void)
{
	ds__busy++; /* dlopen's own opens are libc's */
	void *h = DS__REAL(dlopen)("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		z.init = (int (*)(z_streamp, const char *, int))dlsym(h, "inflateInit_");
		z.inflate = (int (*)(z_streamp, int))dlsym(h, "inflate");
		z.end = (int (*)(z_streamp))dlsym(h, "inflateEnd");
	}
	if (!z.init || !z.inflate || !z.end) {
		ds_warn("libz.so.1: %s: zlib files cannot be read", h ? "incomplete" : dlerror());
		z.init = NULL;
	}
	ds__busy--;
}

int inflateInit_(z_streamp s, const char *version, int size)
{
	pthread_once(&z_once, z_load);
	return z.init ? z.init(s, version, size) : Z_VERSION_ERROR;
}

int inflate(z_streamp s, int flush)
{
	return z.inflate(s, flush); /* only after a successful inflateInit_ */
}

int inflateEnd(z_streamp s)
{
	return z.end ? z.end(s) : Z_STREAM_ERROR;
}
#endif
