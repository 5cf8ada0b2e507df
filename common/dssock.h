/* SPDX-License-Identifier: BSD-3-Clause */
/* dssock.h: a whole message over a stream socket, within a deadline: the
 * one helper of the clients of the services' Unix sockets (the shim's
 * io/write.c, dstage stop, dstage drain).  Plain libc: linked into the shim
 * (common/ is compiled -fPIC, no MPI). */
#ifndef DS_COMMON_SOCK_H
#define DS_COMMON_SOCK_H

#include <stddef.h>

/* Send (out 1) or receive (out 0) exactly len bytes on fd (blocking or
 * not) before deadline (ds_now() seconds; a deadline of 0 or less: none).
 * 0, -EPIPE (the peer closed), -ETIMEDOUT, or -errno. */
int ds_sock_xfer(int fd, void *buf, size_t len, int out, double deadline);

#endif
