/* SPDX-License-Identifier: BSD-3-Clause */
/* version.c: `dstage --version`: this dstage's version (tools/version.sh,
 * through the generated dsversion.h) and the MPI and HDF5 libraries the
 * process runs with, which may not be those it was built with (a site's
 * module loads another MPI, an ABI-compatible MPICH swapped in under
 * LD_LIBRARY_PATH): what a bug report needs.  MPI_Get_library_version and
 * MPI_Get_version may be called before MPI_Init (MPI-3 section 8.1.1), so
 * --version starts no MPI, under a launcher or not. */
#include "cli.h"

#include "dsversion.h"

#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* The MPI library's own text can run to several lines (MPICH adds its
 * configure line): each line indented under the first. */
static void print_lines(FILE *f, const char *label, const char *text)
{
	fprintf(f, "%s", label);
	const char *p = text;
	int first = 1;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
			n--;
		if (n > 0) {
			fprintf(f, "%s%.*s\n", first ? "" : "    ", (int)n, p);
			first = 0;
		}
		p = nl ? nl + 1 : p + strlen(p);
	}
	if (first)
		fprintf(f, "(none)\n");
}

int ds_cli_version(FILE *f)
{
	fprintf(f, "dstage %s\n", DSTAGE_VERSION);

	char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
	int len = 0, major = 0, minor = 0;
	if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS)
		snprintf(lib, sizeof(lib), "(MPI_Get_library_version failed)");
	lib[len >= 0 && len < (int)sizeof(lib) ? len : (int)sizeof(lib) - 1] = '\0';
	MPI_Get_version(&major, &minor);
	fprintf(f, "MPI standard: %d.%d\n", major, minor);
	print_lines(f, "MPI library: ", lib);

	unsigned hmaj = 0, hmin = 0, hrel = 0;
	H5get_libversion(&hmaj, &hmin, &hrel);
	fprintf(f, "HDF5: %u.%u.%u (built with %d.%d.%d)%s\n", hmaj, hmin, hrel, H5_VERS_MAJOR,
	        H5_VERS_MINOR, H5_VERS_RELEASE,
#ifdef H5_HAVE_PARALLEL
	        ", parallel"
#else
	        ""
#endif
	);
	fprintf(f, "zlib: %s (built with %s)\n", zlibVersion(), ZLIB_VERSION);
	return 0;
}
