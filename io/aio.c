/* SPDX-License-Identifier: BSD-3-Clause */
/* aio.c: POSIX AIO on staged descriptors (issue 25 item 3).
 *
 * glibc runs aio_read in a thread of its own that calls its internal pread,
 * past any preload: on a staged descriptor that pread reaches the
 * reservation (EBADF), and a caller that polls aio_error until the request
 * is no longer EINPROGRESS (ROMIO's MPI_File_iread/iread_at, then MPI_Wait)
 * could only ever see the error, or spin.  A request on a staged descriptor
 * is therefore done here, at once, in the caller: the read is the shim's
 * pread (the mapped store, the epoch cache or the node service), a write
 * fails as write(2) on a staged descriptor does (EBADF: the reservation is
 * O_PATH), an fsync as fsync(2) does.  Its result goes where glibc keeps it,
 * the aiocb's own status (__return_value, then __error_code with a release
 * store), so libc's aio_error, aio_return, aio_suspend and aio_cancel see a
 * finished request with no wrapper of theirs (aio_suspend returns at once
 * when one listed request is no longer EINPROGRESS, aio_cancel says
 * AIO_ALLDONE).  The requested notification is then given as glibc gives
 * it: SIGEV_SIGNAL and SIGEV_THREAD_ID queue the signal with si_code
 * SI_ASYNCIO and the sigev_value, SIGEV_THREAD runs the function in a new
 * detached thread with the given attributes.  aio_cancel on a staged
 * descriptor is AIO_ALLDONE (nothing of ours is ever pending).
 *
 * lio_listio: the staged entries are done here, the others handed to libc's
 * lio_listio as one list with the staged ones left out (NULL entries are
 * skipped); with LIO_NOWAIT and a notification, libc notifies when its part
 * is done (ours are done before), or we do at once when nothing is left.
 *
 * Requests on other descriptors go to libc untouched: one table lookup. */
#include "shim.h"

#include <aio.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

/* Is fd staged?  (1 and a reference in *fp, 0 not ours.) */
static int staged(int fd, struct ds__file **fp)
{
	ds__ensure_init();
	*fp = ds__fd_get(fd);
	return *fp != NULL;
}

struct notify_thread {
	void (*fn)(union sigval);
	union sigval v;
};

static void *notify_run(void *arg)
{
	struct notify_thread t = *(struct notify_thread *)arg;
	free(arg);
	t.fn(t.v);
	return NULL;
}

/* Give sev's notification, as glibc's AIO thread does at completion. */
static void notify(const struct sigevent *sev)
{
	if (!sev)
		return;
	if (sev->sigev_notify == SIGEV_SIGNAL || sev->sigev_notify == SIGEV_THREAD_ID) {
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		si.si_signo = sev->sigev_signo;
		si.si_code = SI_ASYNCIO;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value = sev->sigev_value;
		if (sev->sigev_notify == SIGEV_THREAD_ID)
			syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)sev->_sigev_un._tid,
			        (long)sev->sigev_signo, &si);
		else
			syscall(SYS_rt_sigqueueinfo, (long)getpid(), (long)sev->sigev_signo, &si);
	} else if (sev->sigev_notify == SIGEV_THREAD && sev->sigev_notify_function) {
		struct notify_thread *t = malloc(sizeof(*t));
		pthread_attr_t a, *ap = sev->sigev_notify_attributes;
		pthread_t th;
		if (!t) {
			ds_warn("aio: no memory for a SIGEV_THREAD notification: run inline");
			sev->sigev_notify_function(sev->sigev_value);
			return;
		}
		t->fn = sev->sigev_notify_function;
		t->v = sev->sigev_value;
		int detached = 0;
		if (!ap) {
			pthread_attr_init(&a);
			pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			ap = &a;
		} else if (pthread_attr_getdetachstate(ap, &detached) || /* the caller's: */
		           detached != PTHREAD_CREATE_DETACHED)          /* not changed */
			detached = 0;
		int rc = pthread_create(&th, ap, notify_run, t);
		if (ap == &a)
			pthread_attr_destroy(&a);
		else if (rc == 0 && !detached)
			pthread_detach(th);
		if (rc) { /* the function still runs, in this thread */
			ds_warn("aio: cannot start a SIGEV_THREAD notification: %s: run inline",
			        strerror(rc));
			free(t);
			sev->sigev_notify_function(sev->sigev_value);
		}
	}
}

/* Do request cb (op LIO_READ, LIO_WRITE, or an fsync O_SYNC/O_DSYNC) on
 * staged f now and record its result in cb. */
static void complete(struct aiocb *cb, struct ds__file *f, int op)
{
	ssize_t r;
	if (op == LIO_READ)
		r = cb->aio_offset < 0
		            ? -EINVAL
		            : ds__file_read(f, (void *)cb->aio_buf, cb->aio_nbytes, cb->aio_offset);
	else if (op == LIO_WRITE) {
		/* what write(2) gives on a staged descriptor: the kernel's */
		r = pwrite(cb->aio_fildes, (const void *)cb->aio_buf, cb->aio_nbytes,
		           cb->aio_offset);
		if (r < 0)
			r = -errno;
	} else {
		int e = errno;
		r = (op == O_DSYNC ? fdatasync : fsync)(cb->aio_fildes) < 0 ? -errno : 0;
		errno = e;
	}
	cb->__return_value = r < 0 ? -1 : r;
	__atomic_store_n(&cb->__error_code, r < 0 ? (int)-r : 0, __ATOMIC_RELEASE);
}

static int submit(struct aiocb *cb, int op, int (*real)(struct aiocb *))
{
	struct ds__file *f;
	if (!cb || !staged(cb->aio_fildes, &f))
		return real(cb);
	int e = errno;
	complete(cb, f, op);
	ds__file_put(f);
	notify(&cb->aio_sigevent);
	errno = e;
	return 0;
}

DS__EXPORT int DS__WRAP(aio_read)(struct aiocb *cb)
{
	return submit(cb, LIO_READ, DS__REAL(aio_read));
}

DS__EXPORT int DS__WRAP(aio_write)(struct aiocb *cb)
{
	return submit(cb, LIO_WRITE, DS__REAL(aio_write));
}

/* aiocb and aiocb64 are one layout on 64-bit (off_t is 64 bits): the 64
 * names are libc's aliases, wrapped onto the same code. */
_Static_assert(sizeof(struct aiocb) == sizeof(struct aiocb64), "aiocb64 differs from aiocb");

DS__EXPORT int DS__WRAP(aio_read64)(struct aiocb64 *cb)
{
	return submit((struct aiocb *)cb, LIO_READ, (int (*)(struct aiocb *))DS__REAL(aio_read64));
}

DS__EXPORT int DS__WRAP(aio_write64)(struct aiocb64 *cb)
{
	return submit((struct aiocb *)cb, LIO_WRITE,
	              (int (*)(struct aiocb *))DS__REAL(aio_write64));
}

static int fsync_one(int op, struct aiocb *cb, int (*real)(int, struct aiocb *))
{
	struct ds__file *f;
	if (!cb || !staged(cb->aio_fildes, &f))
		return real(op, cb);
	ds__file_put(f);
	if (op != O_SYNC && op != O_DSYNC) {
		errno = EINVAL;
		return -1;
	}
	int e = errno;
	complete(cb, NULL, op);
	notify(&cb->aio_sigevent);
	errno = e;
	return 0;
}

DS__EXPORT int DS__WRAP(aio_fsync)(int op, struct aiocb *cb)
{
	return fsync_one(op, cb, DS__REAL(aio_fsync));
}

DS__EXPORT int DS__WRAP(aio_fsync64)(int op, struct aiocb64 *cb)
{
	return fsync_one(op, (struct aiocb *)cb,
	                 (int (*)(int, struct aiocb *))DS__REAL(aio_fsync64));
}

static int cancel(int fd, struct aiocb *cb, int (*real)(int, struct aiocb *))
{
	struct ds__file *f;
	if (!staged(fd, &f))
		return real(fd, cb);
	ds__file_put(f);
	if (cb && cb->aio_fildes != fd) {
		errno = EINVAL;
		return -1;
	}
	return AIO_ALLDONE; /* ours are done when submitted */
}

DS__EXPORT int DS__WRAP(aio_cancel)(int fd, struct aiocb *cb)
{
	return cancel(fd, cb, DS__REAL(aio_cancel));
}

DS__EXPORT int DS__WRAP(aio_cancel64)(int fd, struct aiocb64 *cb)
{
	return cancel(fd, (struct aiocb *)cb, (int (*)(int, struct aiocb *))DS__REAL(aio_cancel64));
}

#define LIO_STACK 64

static int listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev,
                  int (*real)(int, struct aiocb *const[], int, struct sigevent *))
{
	struct aiocb *stack[LIO_STACK], **rest = NULL;
	int ours = 0, left = 0, e = errno;
	if ((mode != LIO_WAIT && mode != LIO_NOWAIT) || n < 0 || !list || !ds__live())
		return real(mode, list, n, sev);
	for (int i = 0; i < n; i++) {
		struct ds__file *f;
		struct aiocb *cb = list[i];
		if (!cb || cb->aio_lio_opcode == LIO_NOP)
			continue;
		if (!staged(cb->aio_fildes, &f)) {
			left++;
			continue;
		}
		if (!rest) { /* the first staged one: copy the list */
			rest = n <= LIO_STACK ? stack : malloc((size_t)n * sizeof(*rest));
			if (!rest) {
				ds__file_put(f);
				errno = EAGAIN;
				return -1;
			}
			memcpy(rest, list, (size_t)n * sizeof(*rest));
		}
		rest[i] = NULL;
		ours++;
		if (cb->aio_lio_opcode != LIO_READ && cb->aio_lio_opcode != LIO_WRITE) {
			cb->__return_value = -1;
			__atomic_store_n(&cb->__error_code, EINVAL, __ATOMIC_RELEASE);
		} else
			complete(cb, f, cb->aio_lio_opcode);
		ds__file_put(f);
		if (mode == LIO_NOWAIT)
			notify(&cb->aio_sigevent);
	}
	if (!ours)
		return real(mode, list, n, sev);
	int rc = 0;
	if (left)
		rc = real(mode, rest, n, sev);
	else if (mode == LIO_NOWAIT)
		notify(sev);
	if (rc == 0)
		errno = e;
	if (rest != stack)
		free(rest);
	/* LIO_WAIT: a failed entry makes the call EIO, as libc's */
	if (rc == 0 && mode == LIO_WAIT)
		for (int i = 0; i < n; i++)
			if (list[i] && list[i]->aio_lio_opcode != LIO_NOP &&
			    __atomic_load_n(&list[i]->__error_code, __ATOMIC_ACQUIRE) != 0) {
				errno = EIO;
				return -1;
			}
	return rc;
}

DS__EXPORT int DS__WRAP(lio_listio)(int mode, struct aiocb *const list[], int n,
                                    struct sigevent *sev)
{
	return listio(mode, list, n, sev, DS__REAL(lio_listio));
}

DS__EXPORT int DS__WRAP(lio_listio64)(int mode, struct aiocb64 *const list[], int n,
                                      struct sigevent *sev)
{
	return listio(mode, (struct aiocb *const *)list, n, sev,
	              (int (*)(int, struct aiocb *const[], int, struct sigevent *))DS__REAL(
			      lio_listio64));
}
