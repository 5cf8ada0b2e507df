/* SPDX-License-Identifier: BSD-3-Clause */
/* exec.c: staged descriptors across exec (issue 18 item 1).
 *
 * A staged descriptor is a duplicate of the reservation (fdtab.c) that
 * carries the program's FD_CLOEXEC in the kernel: one the program did not
 * mark close-on-exec survives exec as the reservation, an inert O_PATH of a
 * symlink.  The exec wrappers add DSTAGE_FDS to the environment they pass:
 *
 *     DSTAGE_FDS=pid;region+1;inc;fd:id:offset:flags:cell+1,...
 *
 * (the pid that execs, which the next image has too: a process without the
 * shim that inherits the variable, forks and rearranges its descriptors
 * cannot hand stale descriptions to a grandchild; entry id in this node's
 * index, the file offset, the F_GETFL flags; the shared offsets' region
 * (offset.c) by descriptor number and each file's cell, inc = 1 when the
 * exec'ing process was a vfork child whose parent keeps its counts), built
 * on the stack without malloc, so it is safe in a vfork child.  The next
 * image's shim takes each one over at init, only after checking that the
 * number really is the reservation (fstat: dev+ino of NODEDIR/reserved, the
 * same inode for every process of the node), then removes the variable from
 * its environment.  So `sort < /dstage/f`, `perl -ne ... < /dstage/f`,
 * `tar xzf /dstage/a.tgz` (gzip's stdin) read the file's bytes.
 *
 * What fails, and how (docs/shim.md, docs/guarantees.md):
 *   - a next image without the shim (static binary, setuid, LD_PRELOAD
 *     cleared) reads EBADF from the reservation: loud, never empty;
 *   - glibc's posix_spawn, system and popen call the kernel's execve
 *     directly (not through these wrappers): no DSTAGE_FDS, so the child's
 *     staged descriptors are the bare reservation: EBADF, loud;
 *   - virtual files (epoch lists) and O_PATH descriptors are not passed:
 *     EBADF in the next image;
 *   - glibc reads its stdin FILE with an internal read that no preload
 *     sees: an inherited staged stdin is given a stream of the shim's
 *     (stdin = fdopen(0)) at start; other inherited numbers read through
 *     stdio by a FILE the program makes with fdopen are ours already;
 *   - the offset is shared through the region's cell (offset.c); without the
 *     region (no memfd) it is copied, and the next image's reads do not
 *     move the parent's. */
#include "shim.h"

#include <alloca.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>

#define FDS_NAME "DSTAGE_FDS"
/* the cwd is a directory of the outputs (write.c): relative names in the
 * next image are the outputs' too (`cd MOUNT/out && sed -i f`) */
#define OUT_CWD_NAME "DSTAGE_OUT_CWD"
#define FDS_MAX 128 /* descriptors described; more are left to EBADF */
#define FDS_BUF (FDS_MAX * 64 + 32)

extern char **environ;

static char *put_u64(char *p, char *end, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (end - p < n + 1)
		return NULL;
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* The staged descriptors this exec keeps, into buf as "DSTAGE_FDS=...".
 * 1 when there is at least one, 0 when none (or nothing can be said). */
static int describe(char *buf, size_t size, int regfd)
{
	char *p = buf, *end = buf + size;
	int owner = ds__owner(), n = 0;
	memcpy(p, FDS_NAME "=", sizeof(FDS_NAME));
	p += sizeof(FDS_NAME);
	p = put_u64(p, end, (uint64_t)getpid());
	*p++ = ';';
	p = put_u64(p, end, (uint64_t)(regfd + 1));
	*p++ = ';';
	*p++ = owner ? '0' : '1';
	*p++ = ';';
	unsigned h = atomic_load(&ds__fd_hwm);
	if (!owner && h < 4096) /* a vfork child may dup above the high mark */
		h = ds__fdtab_len < 4096 ? ds__fdtab_len : 4096;
	for (unsigned fd = 0; fd < h && n < FDS_MAX; fd++) {
		uintptr_t v = atomic_load(&ds__fdtab[fd]), nv;
		if (!owner) {
			int k = ds__vfork_lookup((int)fd, &nv);
			if (k < 0)
				return 0; /* too much happened in this child: say nothing */
			if (k)
				v = nv;
		}
		struct ds__file *f = (struct ds__file *)DS__FD_FILE(v);
		if (!f || (f->kind != DS__F_REG && f->kind != DS__F_DIR) || f->id < 0)
			continue;
		int fl = atomic_load(&f->flags);
		if (fl & O_PATH)
			continue;
		/* the kernel's flag is the program's (vfork children included) */
		int cl = DS__REAL(fcntl)((int)fd, F_GETFD);
		if (cl < 0 || (cl & FD_CLOEXEC))
			continue;
		char *q = p;
		if (n)
			*q++ = ',';
		q = put_u64(q, end, fd);
		if (q)
			*q++ = ':';
		q = q ? put_u64(q, end, (uint64_t)f->id) : NULL;
		if (q)
			*q++ = ':';
		q = q ? put_u64(q, end, (uint64_t)atomic_load(f->offp)) : NULL;
		if (q)
			*q++ = ':';
		q = q ? put_u64(q, end, (uint32_t)fl) : NULL;
		if (q)
			*q++ = ':';
		q = q ? put_u64(q, end, (uint64_t)(regfd >= 0 ? f->cell + 1 : 0)) : NULL;
		if (!q || q >= end)
			break;
		p = q;
		n++;
	}
	*p = 0;
	return n > 0;
}

static int is_fds_var(const char *e)
{
	return !strncmp(e, FDS_NAME "=", sizeof(FDS_NAME)) ||
	       !strncmp(e, OUT_CWD_NAME "=", sizeof(OUT_CWD_NAME));
}

enum how { H_EXECVE, H_EXECVPE, H_FEXECVE, H_EXECVEAT };

/* The real exec call, with the environment it is given. */
static int exec_real(enum how how, int dirfd, const char *path, char *const argv[],
                     char *const env[], int atflags)
{
	switch (how) {
	case H_EXECVE: return DS__REAL(execve)(path, argv, env);
	case H_EXECVPE: return DS__REAL(execvpe)(path, argv, env);
	case H_FEXECVE: return DS__REAL(fexecve)(dirfd, argv, env);
	case H_EXECVEAT: return DS__REAL(execveat)(dirfd, path, argv, env, atflags);
	}
	errno = EINVAL;
	return -1;
}

/* The exec of a process with a descriptor table: the environment passed,
 * less any stale DSTAGE_FDS, plus this process's.  Apart from exec_with_fds
 * so that a process that never named a staged path (a spawner's fork child)
 * does not carry this frame (8 KiB: a fresh stack page, a fault per child). */
static __attribute__((noinline)) int exec_described(enum how how, int dirfd, const char *path,
                                                    char *const argv[], char *const envp[],
                                                    size_t n, int atflags)
{
	char var[FDS_BUF];
	int regfd = ds__offcell_exec_fd();
	int have = describe(var, sizeof(var), regfd);
	char **ne = alloca((n + 3) * sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!is_fds_var(envp[i]))
			ne[k++] = envp[i];
	if (have)
		ne[k++] = var;
	char work[PATH_MAX];
	if (atomic_load_explicit(&ds__out_cwd, memory_order_relaxed) &&
	    ds__out_rel(AT_FDCWD, ".", work))
		ne[k++] = (char *)OUT_CWD_NAME "=1";
	ne[k] = NULL;
	int rc = exec_real(how, dirfd, path, argv, ne, atflags);
	int e = errno;
	ds__offcell_exec_failed(regfd); /* still here: the exec failed */
	errno = e;
	return rc;
}

/* Every exec wrapper ends here. */
static int exec_with_fds(enum how how, int dirfd, const char *path, char *const argv[],
                         char *const envp[], int atflags)
{
	ds__ensure_init();
	size_t n = 0;
	while (envp && envp[n])
		n++;
	if (ds__fdtab && n < 65536)
		return exec_described(how, dirfd, path, argv, envp, n, atflags);
	return exec_real(how, dirfd, path, argv, envp, atflags);
}

/* Before a fork (init.c's handler, in the parent): look up the exec calls
 * a child is about to make, so that each child does not do the dlsym
 * itself (its look-up touches a dozen pages of ld.so and libc that a fork
 * child, sharing nothing file-backed with its parent, faults in again). */
void ds__exec_resolve(void)
{
#ifndef DS_LINK_WRAP
	(void)DS__REAL(execve);
	(void)DS__REAL(execvpe);
#endif
}

DS__EXPORT int DS__WRAP(execve)(const char *path, char *const argv[], char *const envp[])
{
	return exec_with_fds(H_EXECVE, -1, path, argv, envp, 0);
}

DS__EXPORT int DS__WRAP(execvpe)(const char *file, char *const argv[], char *const envp[])
{
	return exec_with_fds(H_EXECVPE, -1, file, argv, envp, 0);
}

DS__EXPORT int DS__WRAP(fexecve)(int fd, char *const argv[], char *const envp[])
{
	return exec_with_fds(H_FEXECVE, fd, NULL, argv, envp, 0);
}

DS__EXPORT int DS__WRAP(execveat)(int dirfd, const char *path, char *const argv[],
                                char *const envp[], int flags)
{
	return exec_with_fds(H_EXECVEAT, dirfd, path, argv, envp, flags);
}

/* glibc's execv, execvp and execl* call its internal execve, past any
 * preload: each is wrapped here onto the two above. */
#ifndef DS_LINK_WRAP
DS__EXPORT int execv(const char *path, char *const argv[])
{
	return exec_with_fds(H_EXECVE, -1, path, argv, environ, 0);
}

DS__EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_with_fds(H_EXECVPE, -1, file, argv, environ, 0);
}

/* The argument list of execl*: counted, then copied on the stack. */
#define ARGV_FROM_VA(arg0, ap, argv, envp_out)                                                \
	do {                                                                                  \
		size_t n_ = 1;                                                                \
		va_start(ap, arg0);                                                           \
		while (va_arg(ap, char *))                                                    \
			n_++;                                                                 \
		va_end(ap);                                                                   \
		argv = alloca((n_ + 1) * sizeof(char *));                                     \
		argv[0] = (char *)arg0;                                                       \
		va_start(ap, arg0);                                                           \
		for (size_t i_ = 1; i_ <= n_; i_++)                                           \
			argv[i_] = va_arg(ap, char *);                                        \
		envp_out = va_arg(ap, char **);                                               \
		va_end(ap);                                                                   \
	} while (0)

DS__EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv, **e;
	ARGV_FROM_VA(arg, ap, argv, e);
	(void)e;
	return exec_with_fds(H_EXECVE, -1, path, argv, environ, 0);
}

DS__EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **argv, **e;
	ARGV_FROM_VA(arg, ap, argv, e);
	(void)e;
	return exec_with_fds(H_EXECVPE, -1, file, argv, environ, 0);
}

DS__EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv, **e;
	ARGV_FROM_VA(arg, ap, argv, e);
	return exec_with_fds(H_EXECVE, -1, path, argv, e, 0);
}
#endif

/* ---- the next image ------------------------------------------------------------ */
static int get_u64(const char **s, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p++ - '0');
	}
	*s = p;
	*v = x;
	return 0;
}

void ds__exec_inherit(void)
{
	const char *s = getenv(FDS_NAME);
	int stdin_ours = 0;
	uint64_t pid, regfd = 0, inc = 0;
	/* cells already bound in this image: dup'ed descriptors of one open
	 * file share one object here too (and count once) */
	int32_t cells[FDS_MAX];
	struct ds__file *files[FDS_MAX];
	int ncells = 0;
	if (!s)
		return;
	if (get_u64(&s, &pid) || *s++ != ';' || pid != (uint64_t)getpid() ||
	    get_u64(&s, &regfd) || *s++ != ';' || get_u64(&s, &inc) || *s++ != ';') {
		ds_debug("%s: not from this process: ignored", FDS_NAME);
		s = "";
		regfd = 0;
	}
	int shared = regfd > 0 && regfd <= INT_MAX && ds__offcell_adopt((int)regfd - 1) == 0;
	while (*s) {
		uint64_t fd, id, off, fl, cell;
		if (get_u64(&s, &fd) || *s++ != ':' || get_u64(&s, &id) || *s++ != ':' ||
		    get_u64(&s, &off) || *s++ != ':' || get_u64(&s, &fl) || *s++ != ':' ||
		    get_u64(&s, &cell) || (*s && *s != ',')) {
			ds_info("%s: malformed: ignored", FDS_NAME);
			break;
		}
		if (*s == ',')
			s++;
		/* only a number that really is the reservation of this node,
		 * that the table does not know, naming an entry of this index */
		if (fd >= ds__fdtab_len || ds__fd_known((int)fd) || id >= ds__g.ix.h->nentries ||
		    off > INT64_MAX || !ds__fd_is_reservation((int)fd)) {
			ds_debug("%s: descriptor %u is not the reservation: left alone", FDS_NAME,
			         (unsigned)fd);
			continue;
		}
		int cl = DS__REAL(fcntl)((int)fd, F_GETFD);
		if (cl < 0)
			continue;
		int k = 0;
		while (shared && cell && k < ncells && cells[k] != (int32_t)(cell - 1))
			k++;
		if (shared && cell && k < ncells) { /* a dup of a file bound already */
			struct ds__file *old = ds__fd_bind((int)fd, files[k], (cl & FD_CLOEXEC) != 0);
			if (old)
				ds__file_put(old);
			if (fd == 0)
				stdin_ours = 1;
			continue;
		}
		struct ds__res r;
		memset(&r, 0, sizeof(r));
		r.ours = 1;
		r.id = (int64_t)id;
		struct ds__file *f;
		if (ds__file_make(&r, (int)fl & ~(O_CREAT | O_TRUNC | O_PATH), &f))
			continue;
		atomic_store(&f->flags, (int)fl);
		if (shared && cell && cell <= INT32_MAX && ncells < FDS_MAX) {
			ds__offcell_bind(f, (int32_t)(cell - 1), inc != 0);
			cells[ncells] = (int32_t)(cell - 1);
			files[ncells++] = f;
		} else {
			if (f->cell >= 0)
				ds__offcell_put(f);
			atomic_store(&f->off, (int64_t)off);
		}
		struct ds__file *old = ds__fd_bind((int)fd, f, (cl & FD_CLOEXEC) != 0);
		if (old)
			ds__file_put(old);
		ds__file_put(f); /* bind took its own reference */
		if (fd == 0)
			stdin_ours = 1;
	}
	unsetenv(FDS_NAME);
	/* glibc's stdin reads with its internal read, past any preload (sort,
	 * cksum read stdin with fread): a staged stdin gets a stream of ours,
	 * before the program has read anything from it */
	if (stdin_ours) {
		FILE *in = DS__WRAP(fdopen)(0, "r");
		if (in)
			stdin = in;
	}
}
