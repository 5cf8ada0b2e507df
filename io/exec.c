/* SPDX-License-Identifier: BSD-3-Clause */
/* exec.c: staged descriptors across exec (issue 18 item 1).
 *
 * A staged descriptor is a duplicate of the reservation (fdtab.c) that
 * carries the program's FD_CLOEXEC in the kernel: one the program did not
 * mark close-on-exec survives exec as the reservation, an inert O_PATH of a
 * symlink.  The exec wrappers add DSTAGE_FDS to the environment they pass:
 *
 *     DSTAGE_FDS=pid;region+1;inc;fd:id:offset:flags:cell+1:ino,...
 *
 * (the pid that describes them; entry id in this node's index, the file
 * offset, the F_GETFL flags; the shared offsets' region (offset.c) by
 * descriptor number and each file's cell, inc = 1 when the describing
 * process was a vfork child whose parent keeps its counts; ino the inode of
 * the open file's own object, below), built on the stack without malloc, so
 * it is safe in a vfork child.  Each open file that crosses is first given
 * an object of its own, an O_PATH of an unnamed socket (unique_object),
 * dup'ed onto each of its numbers: the staged descriptors of a process are
 * all duplicates of one reservation, and a program without the shim
 * between two images (`exec 3<&4`, `prog <&3`) moves numbers, so neither
 * "is the reservation" nor the pid told one staged open from another
 * (silent wrong bytes: issue 25 item 4).  The next image's shim looks at
 * each number listed, and at 0, 1, 2, and takes one over as the open file
 * whose object it holds (one fstat each), whatever number the list gave
 * it; any other number is left alone (EBADF when read); then it removes the
 * variable.  A process other than the describing pid (a descendant of a
 * program without the shim, a posix_spawn child) is a new holder of each
 * cell.  So `sort < /dstage/f`, `perl -ne ... < /dstage/f`,
 * `tar xzf /dstage/a.tgz` (gzip's stdin) read the file's bytes.
 *
 * What fails, and how (docs/shim.md, docs/guarantees.md):
 *   - a next image without the shim (static binary, setuid, LD_PRELOAD
 *     cleared) reads EBADF from the reservation: loud, never empty;
 *   - glibc's posix_spawn and posix_spawnp call the kernel's execve in
 *     their child, past these wrappers: spawn.c wraps them and passes
 *     DSTAGE_FDS in the child's environment, and does system and popen
 *     through them (glibc's use its internal spawn, past any wrapper);
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
#include <sys/socket.h>
#include <sys/syscall.h>

#include "rawsys.h"

#define FDS_NAME DS__FDS_NAME
/* the cwd is a directory of the outputs (write.c): relative names in the
 * next image are the outputs' too (`cd MOUNT/out && sed -i f`) */
#define OUT_CWD_NAME DS__OUT_CWD_NAME
#define FDS_MAX DS__FDS_MAX
#define FDS_BUF DS__FDS_BUF

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

/* A system call made without libc (and without the shim's own wrappers:
 * this runs in vfork children too): the result, or -errno. */
static long sys4(long n, long a, long b, long c, long d)
{
#ifdef DS__RAWSYS
	return ds__rawsys(n, a, b, c, d);
#else
	long r = DS__REAL(syscall)(n, a, b, c, d);
	return r < 0 ? -errno : r;
#endif
}

/* A fresh inert descriptor with an inode of its own, for one open file
 * that crosses exec: an O_PATH of an unnamed AF_UNIX socket (read, write,
 * lseek, mmap EBADF; reopening /proc/self/fd/N ENXIO; names nothing; the
 * bare socket when /proc cannot be opened: reads fail ENOTCONN).  Its inode
 * number goes into DSTAGE_FDS, and the next image takes a number over only
 * when fstat shows that inode: all staged descriptors of a process are
 * duplicates of one reservation, so "is the reservation" could not tell
 * one staged open from another when a program without the shim moved
 * numbers between exec's (`exec 3<&4`: issue 25 item 4).  Made here, at
 * exec, not at every open: an open stays one fcntl and one fstat.  -1 when
 * it cannot be made. */
static int unique_object(uint64_t *ino)
{
	char path[48];
	struct stat st;
	long s = sys4(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, 0);
	if (s < 0)
		return -1;
	memcpy(path, "/proc/self/fd/", 14);
	char *e = put_u64(path + 14, path + sizeof(path), (uint64_t)s);
	long o = -1;
	if (e) {
		*e = 0;
		o = sys4(SYS_openat, AT_FDCWD, (long)path, O_PATH | O_CLOEXEC, 0);
	}
	if (o >= 0) {
		sys4(SYS_close, s, 0, 0, 0);
		s = o;
	}
	if (sys4(SYS_newfstatat, s, (long)"", (long)&st, AT_EMPTY_PATH) < 0 ||
	    !S_ISSOCK(st.st_mode)) {
		sys4(SYS_close, s, 0, 0, 0);
		return -1;
	}
	*ino = (uint64_t)st.st_ino;
	return (int)s;
}

/* The open files given an object by one describe. */
struct made {
	struct ds__file *f;
	int fd;
	uint64_t ino;
};

/* One entry, ",fd:id:offset:flags:cell+1:ino" (no comma first), at p:
 * its end, or NULL when it does not fit. */
static char *put_entry(char *q, char *end, int comma, unsigned fd, const struct ds__file *f, int fl,
                       int regfd, uint64_t ino)
{
	if (comma)
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
	if (q)
		*q++ = ':';
	q = q ? put_u64(q, end, ino) : NULL;
	return q && q < end ? q : NULL;
}

/* The staged descriptors this exec (or spawn: all, dups; shim.h) keeps,
 * into buf as "DSTAGE_FDS=...": each number gets its open file's object
 * (unique_object; one per open file, so dup'ed numbers stay one file).
 * 1 when there is at least one, 0 when none (or nothing can be said). */
int ds__exec_describe(char *buf, size_t size, int regfd, const int (*dups)[2], int ndups, int all)
{
	char *p = buf, *end = buf + size;
	int owner = ds__owner(), n = 0, nmade = 0, ndesc = 0;
	struct made made[FDS_MAX];
	struct {
		int fd, m, fl;
	} desc[FDS_MAX];
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
			if (k < 0) {
				n = 0; /* too much happened in this child: say nothing */
				break;
			}
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
		if (cl < 0)
			continue;
		if (cl & FD_CLOEXEC) { /* a spawn's dup2 source only */
			int src = 0;
			for (int i = 0; all && i < ndups && !src; i++)
				src = dups[i][0] == (int)fd;
			if (!src)
				continue;
		}
		/* the number must still hold something inert of ours (the
		 * reservation or an earlier object: O_PATH) when it is replaced:
		 * another thread may have closed it and opened its own file there
		 * since the table was read (a window of two system calls is left) */
		long gl = sys4(SYS_fcntl, (long)fd, F_GETFL, 0, 0);
		if (gl < 0 || !(gl & O_PATH))
			continue;
		int m = 0;
		while (m < nmade && made[m].f != f)
			m++;
		if (m == nmade) {
			uint64_t ino;
			int o = unique_object(&ino);
			if (o < 0)
				continue; /* left the reservation: EBADF in the next image */
			made[nmade++] = (struct made){f, o, ino};
		}
		if (sys4(SYS_dup3, made[m].fd, (long)fd, (cl & FD_CLOEXEC) ? O_CLOEXEC : 0, 0) < 0)
			continue;
		char *q = put_entry(p, end, n > 0, fd, f, fl, regfd, made[m].ino);
		if (!q)
			break;
		p = q;
		n++;
		desc[ndesc++] = (typeof(desc[0])){(int)fd, m, fl};
	}
	/* the numbers a spawn's file actions dup2 staged ones onto: the same
	 * open file listed under its new number too (a candidate to look at) */
	for (int i = 0; i < ndups && n < FDS_MAX; i++)
		for (int d = 0; d < ndesc; d++)
			if (desc[d].fd == dups[i][0]) {
				char *q = put_entry(p, end, n > 0, (unsigned)dups[i][1],
				                    made[desc[d].m].f, desc[d].fl, regfd,
				                    made[desc[d].m].ino);
				if (q) {
					p = q;
					n++;
				}
				break;
			}
	for (int m = 0; m < nmade; m++)
		sys4(SYS_close, made[m].fd, 0, 0, 0);
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
 * does not carry this frame (16 KiB with ds__exec_describe's: fresh stack
 * pages, faults per child). */
static __attribute__((noinline)) int exec_described(enum how how, int dirfd, const char *path,
                                                    char *const argv[], char *const envp[],
                                                    size_t n, int atflags)
{
	char var[FDS_BUF];
	int regfd = ds__offcell_exec_fd();
	int have = ds__exec_describe(var, sizeof(var), regfd, NULL, 0, 0);
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

/* One entry of DSTAGE_FDS. */
struct passed {
	uint64_t fd, id, off, fl, cell, ino;
};

/* Which passed open file is descriptor fd?  The entry whose object's inode
 * fd holds (unique_object), whatever number the list gives it: a program
 * without the shim between two images may have moved numbers (`exec 3<&4`,
 * `prog <&3`), and posix_spawn's file actions do (adddup2).  -1: none. */
static int passed_find(int fd, const struct passed *e, int n)
{
	struct stat st;
	if ((unsigned)fd >= ds__fdtab_len || ds__fd_known(fd) || DS__REAL(fstat)(fd, &st) < 0 ||
	    !S_ISSOCK(st.st_mode))
		return -1;
	for (int k = 0; k < n; k++)
		if (e[k].ino == (uint64_t)st.st_ino)
			return k;
	return -1;
}

/* The open files a parent passed (FDS_NAME), as they are taken over
 * (ds__exec_inherit). */
struct inherit {
	struct passed e[FDS_MAX];
	/* open files already bound in this image, by entry: dup'ed numbers of
	 * one open file share one object here too (and count once) */
	struct ds__file *files[FDS_MAX];
	int n;
	uint64_t regfd, inc;
	int shared; /* the region is adopted at the first number taken over */
	int stdin_ours;
};

/* Parse "PID;REGION;INC;" and the entries into in; a malformed list is
 * ignored from where it goes wrong (said at info). */
static void inherit_parse(const char *s, struct inherit *in)
{
	uint64_t pid = 0;
	/* "PID;REGION;INC;": PID the process that described them.  Any pid is
	 * taken: a descriptor is taken over only when it holds one of the
	 * objects made for this list (passed_find), which only that process's
	 * exec or spawn, or a descendant's inheritance, can give it.  A process
	 * other than PID (the child of a posix_spawn, or of a program without
	 * the shim that forked) is a new holder of each open file's cell. */
	if (get_u64(&s, &pid) || *s++ != ';' || get_u64(&s, &in->regfd) || *s++ != ';' ||
	    get_u64(&s, &in->inc) || *s++ != ';') {
		ds_info("%s: malformed: ignored", FDS_NAME);
		s = "";
		in->regfd = 0;
	}
	if (pid != (uint64_t)getpid())
		in->inc = 1;
	while (*s && in->n < FDS_MAX) {
		struct passed *p = &in->e[in->n];
		if (get_u64(&s, &p->fd) || *s++ != ':' || get_u64(&s, &p->id) || *s++ != ':' ||
		    get_u64(&s, &p->off) || *s++ != ':' || get_u64(&s, &p->fl) || *s++ != ':' ||
		    get_u64(&s, &p->cell) || *s++ != ':' || get_u64(&s, &p->ino) ||
		    (*s && *s != ',')) {
			ds_info("%s: malformed: ignored", FDS_NAME);
			break;
		}
		if (*s == ',')
			s++;
		if (p->id < ds__g.ix.h->nentries && p->off <= INT64_MAX && p->fd <= INT_MAX)
			in->n++;
	}
	for (int k = 0; k < in->n; k++)
		in->files[k] = NULL;
}

/* Bind descriptor fd (whose close-on-exec flag is cl) to open file f. */
static void inherit_bind(struct inherit *in, int fd, int cl, struct ds__file *f)
{
	struct ds__file *old = ds__fd_bind(fd, f, (cl & FD_CLOEXEC) != 0);
	if (old)
		ds__file_put(old);
	if (fd == 0)
		in->stdin_ours = 1;
}

/* Take over descriptor fd if it holds one of the open files passed. */
static void inherit_fd(struct inherit *in, int fd)
{
	struct passed *e = in->e;
	int k = passed_find(fd, e, in->n);
	if (k < 0) {
		ds_debug("%s: descriptor %d is none of the open files passed: left alone", FDS_NAME,
		         fd);
		return;
	}
	int cl = DS__REAL(fcntl)(fd, F_GETFD);
	if (cl < 0)
		return;
	if (in->shared < 0)
		in->shared = in->regfd > 0 && in->regfd <= INT_MAX &&
		             ds__offcell_adopt((int)in->regfd - 1) == 0;
	if (in->files[k]) { /* a dup of a file bound already */
		inherit_bind(in, fd, cl, in->files[k]);
		return;
	}
	struct ds__res r;
	memset(&r, 0, sizeof(r));
	r.ours = 1;
	r.id = (int64_t)e[k].id;
	struct ds__file *f;
	if (ds__file_make(&r, (int)e[k].fl & ~(O_CREAT | O_TRUNC | O_PATH), &f))
		return;
	atomic_store(&f->flags, (int)e[k].fl);
	if (in->shared && e[k].cell && e[k].cell <= INT32_MAX) {
		ds__offcell_bind(f, (int32_t)(e[k].cell - 1), in->inc != 0);
	} else {
		if (f->cell >= 0)
			ds__offcell_put(f);
		atomic_store(&f->off, (int64_t)e[k].off);
	}
	inherit_bind(in, fd, cl, f);
	in->files[k] = f; /* the table's reference keeps it */
	ds__file_put(f);  /* bind took its own reference */
}

void ds__exec_inherit(void)
{
	const char *s = getenv(FDS_NAME);
	if (!s)
		return;
	struct inherit in;
	in.n = 0;
	in.regfd = in.inc = 0;
	in.shared = -1;
	in.stdin_ours = 0;
	inherit_parse(s, &in);
	/* the numbers listed, and stdin, stdout, stderr (`prog <&3`) */
	for (int c = 0; c < in.n + 3; c++) {
		int fd = c < in.n ? (int)in.e[c].fd : c - in.n;
		if (c >= in.n) {
			int listed = 0;
			for (int k = 0; k < in.n && !listed; k++)
				listed = in.e[k].fd == (uint64_t)fd;
			if (listed)
				continue;
		}
		inherit_fd(&in, fd);
	}
	unsetenv(FDS_NAME);
	/* glibc's stdin reads with its internal read, past any preload (sort,
	 * cksum read stdin with fread): a staged stdin gets a stream of ours,
	 * before the program has read anything from it */
	if (in.stdin_ours) {
		FILE *f = DS__WRAP(fdopen)(0, "r");
		if (f)
			stdin = f;
	}
}
