/* SPDX-License-Identifier: BSD-3-Clause */
/* A workaround for a hang of MPI_Finalize over UCX's TCP transport.
 *
 * Debian 12's MPICH 4.0.2 (ch4:ucx) with UCX 1.13 hangs in MPI_Finalize,
 * with 3 or more ranks talking over TCP (separate hosts, or
 * MPIR_CVAR_NOLOCAL=1), in about half of the runs, and in nearly every run
 * of 4 ranks on 4 network namespaces (t/lib-hosts.sh).  A plain
 * MPI_Init + MPI_Allreduce + MPI_Finalize does it; no dstage code is
 * involved.  The stacks: some ranks sit in the process manager's barrier
 * (PMI), done; the others spin in ucp_worker_progress() inside
 * MPIDI_UCX_mpi_finalize_hook, waiting for the endpoint closes it started
 * with ucp_disconnect_nb() (a close in "flush" mode) to complete.  They
 * never do: the TCP transport stops progressing endpoints too early
 * (openucx/ucx#8738, open as of UCX 1.14).  No UCX or MPICH setting avoids
 * it (tried: UCX_TCP_CONN_NB, UCX_PROTO_ENABLE, UCX_KEEPALIVE_INTERVAL,
 * UCX_TCP_PUT_ENABLE, UCX_TCP_NODELAY, UCX_TCP_MAX_POLL, UCX_USE_MT_MUTEX,
 * a closing all-to-all; a "force" close is refused with "Invalid parameter"
 * by a worker without peer error handling, which is how MPICH makes it).
 *
 * dstage's own commands finish every communication, and agree on the
 * outcome, before MPI_Finalize (a barrier or an allreduce ends every step).
 * So the endpoints have nothing left to flush, and the close can be left to
 * ucp_worker_destroy(), which MPICH calls after the process manager's
 * barrier and which tears every remaining endpoint down locally, without
 * waiting for a peer.  This definition of ucp_disconnect_nb in the dstage
 * executable comes first in symbol lookup, so libmpich's call lands here:
 * it reports the close as done at once.  DSTAGE_UCX_CLOSE=flush passes
 * every call on to UCX unchanged (for a UCX where the bug is fixed).
 *
 * Only the dstage executable (and bench/mpibench) carries this; the preload
 * library never does.  An MPICH built on another netmod never calls it.
 *
 * MPICH only (its mpi.h defines MPICH).  Open MPI 4.1 calls ucp_disconnect_nb
 * from libmca_common_ucx, which its plugins load at run time, so a definition
 * here would not even be exported to it (the linker exports an executable's
 * symbol only for a library it links); and it needs none: its pml/ucx and
 * osc/ucx take UCX only for Mellanox devices (pml_ucx_devices=mlx*), the
 * rest go through ob1 and its own TCP and shared-memory transports, and
 * forced onto UCX's TCP (pml=ucx, devices any, UCX_TLS=tcp,self) 4 ranks
 * finalized in 6 runs of 6 here (docs/mpi.md). */
#include <mpi.h>

#if defined(MPICH)
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* From <ucp/api/ucp.h>, declared here so that building needs no UCX
 * headers: ucs_status_ptr_t is a pointer, NULL is UCS_OK (done at once). */
typedef void *ds__ucs_status_ptr;
typedef void *ds__ucp_ep;

ds__ucs_status_ptr ucp_disconnect_nb(ds__ucp_ep ep);

static int pass_through(void)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("DSTAGE_UCX_CLOSE");
		v = e && !strcmp(e, "flush");
	}
	return v;
}

ds__ucs_status_ptr ucp_disconnect_nb(ds__ucp_ep ep)
{
	if (pass_through()) {
		ds__ucs_status_ptr (*real)(ds__ucp_ep) =
		        (ds__ucs_status_ptr(*)(ds__ucp_ep))dlsym(RTLD_NEXT, "ucp_disconnect_nb");
		if (real)
			return real(ep);
	}
	return NULL;
}
#endif /* MPICH */
