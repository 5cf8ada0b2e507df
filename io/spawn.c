/* SPDX-License-Identifier: BSD-3-Clause */
/* spawn.c: staged descriptors across posix_spawn (issue 25 item 2).
 *
 * glibc's posix_spawn makes its child with clone(CLONE_VM|CLONE_VFORK) and
 * does the file actions and the execve there with its internal calls: no
 * wrapper of the shim runs in the child, and without DSTAGE_FDS the next
 * image saw its staged descriptors as the bare reservation.  CPython's
 * subprocess takes this path when close_fds=False and the program is
 * named by a path (Rust's Command, Java's ProcessBuilder spawn the same
 * way).  So posix_spawn and posix_spawnp are wrapped: the child is still
 * glibc's (its attributes, signal mask and defaults, process group,
 * setsid, scheduling, cgroup, the error of a failed exec, all libc's), and
 * only the environment it gets is ours: DSTAGE_FDS describing every staged
 * descriptor the child inherits, and the close-on-exec ones a dup2 action
 * gives it, each open file given its object (exec.c).  The next
 * image's shim takes over a number when it holds one of those objects, so
 * whatever the actions did (dup2, close, closefrom) each number the child
 * has is right or left alone (EBADF).  It looks at 0, 1, 2 and the numbers
 * listed; the dup2 actions' targets are listed too: the file actions
 * object is opaque, so posix_spawn_file_actions_adddup2 is wrapped to
 * remember them (a table by object, reset by _init and _destroy).
 *
 * posix_spawn_file_actions_addopen of a staged path: the child's open would
 * be the kernel's (ENOENT), so the shim opens the file in the parent (a
 * close-on-exec descriptor kept until the object is destroyed) and the
 * action becomes a dup2 of it; each spawn opens the file again onto that
 * number, so each child gets a fresh open file, offset 0, as its own open
 * would.  A relative path after an addchdir_np into a staged directory is
 * taken relative to it (the shim follows the child's cwd through the
 * actions); after a chdir to a real directory it is left to the kernel.
 *
 * addchdir_np to a staged directory and addfchdir_np of a staged directory
 * descriptor become an addchdir_np to the directory's shadow (cwd.c), the
 * real directory a chdir into the mount moves the kernel's cwd to, which
 * the child's shim takes as that directory, as across exec.
 *
 * What still fails, loudly: past 64 objects with actions at once, 8 staged
 * addopen or 32 dup2 actions per object, the rest are the kernel's (ENOENT
 * for an open, EBADF for a dup2's target in the child); past 128 staged
 * descriptors, EBADF in the child; a child whose image has no shim, EBADF.
 * system() and popen() are done here (below) when the process has staged
 * descriptors: glibc's spawn with its internal posix_spawn. */
#include "shim.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

#define FA_SLOTS 64
#define FA_DUPS 32
#define FA_OPENS 8

/* What the shim remembers of one file actions object. */
struct fa_rec {
	const posix_spawn_file_actions_t *fa; /* NULL: a free slot */
	int ndups, nopens, chdir;             /* chdir: an addchdir_np was added */
	char *cwd;                            /* the child's cwd then (note_chdir) */
	int dups[FA_DUPS][2];                 /* adddup2 from, to */
	struct fa_open {
		int fd;     /* the descriptor the action dup2s from (ours, cloexec) */
		int flags;  /* the open's flags */
		char *path; /* the staged name, opened again at each spawn */
	} opens[FA_OPENS];
};

static struct fa_rec fa_recs[FA_SLOTS];
static pthread_mutex_t fa_lock = PTHREAD_MUTEX_INITIALIZER;

/* fa's record, made when make (caller holds fa_lock); NULL when none. */
static struct fa_rec *fa_find(const posix_spawn_file_actions_t *fa, int make)
{
	struct fa_rec *free_slot = NULL;
	for (int i = 0; i < FA_SLOTS; i++) {
		if (fa_recs[i].fa == fa)
			return &fa_recs[i];
		if (!fa_recs[i].fa && !free_slot)
			free_slot = &fa_recs[i];
	}
	if (make && free_slot) {
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->fa = fa;
	}
	return make ? free_slot : NULL;
}

static void fa_forget(const posix_spawn_file_actions_t *fa)
{
	pthread_mutex_lock(&fa_lock);
	struct fa_rec *r = fa_find(fa, 0);
	if (r) {
		for (int i = 0; i < r->nopens; i++) {
			DS__WRAP(close)(r->opens[i].fd);
			free(r->opens[i].path);
		}
		free(r->cwd);
		memset(r, 0, sizeof(*r));
	}
	pthread_mutex_unlock(&fa_lock);
}

DS__EXPORT int DS__WRAP(posix_spawn_file_actions_init)(posix_spawn_file_actions_t *fa)
{
	fa_forget(fa); /* an object reused after destroy, or on the stack again */
	return DS__REAL(posix_spawn_file_actions_init)(fa);
}

DS__EXPORT int DS__WRAP(posix_spawn_file_actions_destroy)(posix_spawn_file_actions_t *fa)
{
	fa_forget(fa);
	return DS__REAL(posix_spawn_file_actions_destroy)(fa);
}

DS__EXPORT int DS__WRAP(posix_spawn_file_actions_adddup2)(posix_spawn_file_actions_t *fa, int fd,
                                                          int newfd)
{
	int rc = DS__REAL(posix_spawn_file_actions_adddup2)(fa, fd, newfd);
	if (rc == 0 && ds__live()) {
		pthread_mutex_lock(&fa_lock);
		struct fa_rec *r = fa_find(fa, 1);
		if (r && r->ndups < FA_DUPS) {
			r->dups[r->ndups][0] = fd;
			r->dups[r->ndups++][1] = newfd;
		} else
			ds_info("posix_spawn: too many dup2 actions to follow: %d -> %d may read "
			        "EBADF in the child",
			        fd, newfd);
		pthread_mutex_unlock(&fa_lock);
	}
	return rc;
}

/* The shadow directory (cwd.c) of a staged directory r into buf: 0, or -1
 * when r is not one a process can live in (then the kernel's chdir in the
 * child fails, loudly). */
static int shadow_of(const struct ds__res *r, char *buf, size_t size)
{
	struct stat st;
	if (!r->ours || r->v.kind != DS__V_NONE || ds__stat_res(r, &st) || !S_ISDIR(st.st_mode) ||
	    ds__perm(&st, X_OK))
		return -1;
	return ds__cwd_shadow(r->id, buf, size) ? -1 : 0;
}

/* After an addchdir_np or addfchdir_np: the child's cwd, cwd (malloc'd,
 * absolute, a staged directory's name under the mount) or NULL when it is
 * not one (a real directory, or unknown: relative names go to the kernel). */
static void note_chdir(posix_spawn_file_actions_t *fa, char *cwd)
{
	pthread_mutex_lock(&fa_lock);
	struct fa_rec *r = fa_find(fa, 1);
	if (r) {
		r->chdir = 1;
		free(r->cwd);
		r->cwd = cwd;
		cwd = NULL;
	}
	pthread_mutex_unlock(&fa_lock);
	free(cwd);
}

/* The name a relative path of an action has in the child: joined to the
 * staged cwd an earlier action gave it (malloc'd, *full), or path itself
 * (*full NULL).  -1 when the child's cwd is not known to the shim (a real
 * directory): the kernel's name, relative. */
static int child_name(const posix_spawn_file_actions_t *fa, const char *path, char **full)
{
	int rc = 0;
	*full = NULL;
	if (path[0] == '/')
		return 0;
	pthread_mutex_lock(&fa_lock);
	struct fa_rec *r = fa_find(fa, 0);
	if (r && r->chdir) {
		size_t a = r->cwd ? strlen(r->cwd) : 0, b = strlen(path);
		if (!r->cwd || !(*full = malloc(a + b + 2)))
			rc = -1;
		else {
			memcpy(*full, r->cwd, a);
			(*full)[a] = '/';
			memcpy(*full + a + 1, path, b + 1);
		}
	}
	pthread_mutex_unlock(&fa_lock);
	return rc;
}

/* A chdir into a staged directory: the child's kernel cwd becomes the
 * directory's shadow, which its shim takes as that directory
 * (ds__cwd_inherit), as a chdir in the parent would. */
DS__EXPORT int DS__WRAP(posix_spawn_file_actions_addchdir_np)(posix_spawn_file_actions_t *fa,
                                                              const char *path)
{
	char shadow[PATH_MAX + 32];
	struct ds__res r;
	char *full = NULL, *cwd = NULL;
	int rc = -1, e = errno;
	ds__ensure_init();
	if (!ds__null(path) && ds__live() && ds__owner() && child_name(fa, path, &full) == 0) {
		const char *name = full ? full : path;
		if (ds__maybe_ours(name) && ds__resolve(AT_FDCWD, name, DS__RES_FOLLOW, &r) == 0 &&
		    shadow_of(&r, shadow, sizeof(shadow)) == 0) {
			rc = DS__REAL(posix_spawn_file_actions_addchdir_np)(fa, shadow);
			cwd = rc == 0 ? DS__WRAP(realpath)(name, NULL) : NULL;
		} else if (full) /* a real name relative to a staged cwd */
			rc = DS__REAL(posix_spawn_file_actions_addchdir_np)(fa, full);
		free(full);
		errno = e;
	}
	if (rc < 0)
		rc = DS__REAL(posix_spawn_file_actions_addchdir_np)(fa, path);
	if (rc == 0 && ds__live())
		note_chdir(fa, cwd);
	else
		free(cwd);
	return rc;
}

/* fchdir to a staged directory's descriptor: the same, by its entry. */
DS__EXPORT int DS__WRAP(posix_spawn_file_actions_addfchdir_np)(posix_spawn_file_actions_t *fa,
                                                               int fd)
{
	char shadow[PATH_MAX + 32], link[40], name[PATH_MAX];
	char *cwd = NULL;
	int rc = -1, e = errno;
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (f) {
		struct ds__res r;
		memset(&r, 0, sizeof(r));
		r.ours = 1;
		r.id = f->id;
		r.v = f->v;
		if (f->id >= 0 && ds__owner() && shadow_of(&r, shadow, sizeof(shadow)) == 0 &&
		    (rc = DS__REAL(posix_spawn_file_actions_addchdir_np)(fa, shadow)) == 0) {
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			ssize_t n = DS__WRAP(readlink)(link, name, sizeof(name) - 1);
			if (n > 0 && name[0] == '/') {
				name[n] = 0;
				cwd = strdup(name);
			}
		}
		ds__file_put(f);
		errno = e;
	}
	if (rc < 0)
		rc = DS__REAL(posix_spawn_file_actions_addfchdir_np)(fa, fd);
	if (rc == 0 && ds__live())
		note_chdir(fa, cwd);
	else
		free(cwd);
	return rc;
}

DS__EXPORT int DS__WRAP(posix_spawn_file_actions_addopen)(posix_spawn_file_actions_t *fa, int fd,
                                                          const char *path, int flags, mode_t mode)
{
	char *full = NULL;
	ds__ensure_init();
	if (DS__LIKELY(ds__null(path) || !ds__live()) || fd < 0 || !ds__owner() ||
	    child_name(fa, path, &full) < 0)
		return DS__REAL(posix_spawn_file_actions_addopen)(fa, fd, path, flags, mode);
	const char *name = full ? full : path;
	if (!ds__maybe_ours(name)) {
		int rc = DS__REAL(posix_spawn_file_actions_addopen)(fa, fd, name, flags, mode);
		free(full);
		return rc;
	}
	pthread_mutex_lock(&fa_lock);
	struct fa_rec *r = fa_find(fa, 1);
	int e = errno, rc = -1;
	if (r && r->nopens < FA_OPENS) {
		int o = DS__WRAP(open)(name, flags | O_CLOEXEC, mode);
		struct ds__file *f = o >= 0 ? ds__fd_get(o) : NULL;
		char *copy = f ? strdup(name) : NULL;
		if (f)
			ds__file_put(f);
		if (copy && (rc = DS__REAL(posix_spawn_file_actions_adddup2)(fa, o, fd)) == 0) {
			r->opens[r->nopens++] = (struct fa_open){o, flags | O_CLOEXEC, copy};
			if (r->ndups < FA_DUPS) {
				r->dups[r->ndups][0] = o;
				r->dups[r->ndups++][1] = fd;
			}
		} else {
			free(copy);
			if (o >= 0)
				DS__WRAP(close)(o);
			rc = -1;
		}
	}
	pthread_mutex_unlock(&fa_lock);
	errno = e;
	if (rc < 0) /* not a staged file: the kernel's open in the child */
		rc = DS__REAL(posix_spawn_file_actions_addopen)(fa, fd, name, flags, mode);
	free(full);
	return rc;
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);

static int spawn(spawn_fn real, pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fdtab || !atomic_load(&ds__fd_hwm)) || !ds__owner())
		return real(pid, path, fa, attr, argv, envp);
	int dups[FA_DUPS][2], ndups = 0;
	if (fa) {
		pthread_mutex_lock(&fa_lock);
		struct fa_rec *r = fa_find(fa, 0);
		if (r) {
			ndups = r->ndups;
			memcpy(dups, r->dups, sizeof(dups[0]) * (size_t)ndups);
			/* a fresh open file for this child, on the number the action
			 * dup2s from (the shim's dup2 replaces the old one) */
			for (int i = 0; i < r->nopens; i++) {
				int o = DS__WRAP(open)(r->opens[i].path, r->opens[i].flags, 0);
				if (o >= 0) {
					DS__WRAP(dup3)(o, r->opens[i].fd, O_CLOEXEC);
					DS__WRAP(close)(o);
				}
			}
		}
		pthread_mutex_unlock(&fa_lock);
	}
	size_t n = 0;
	while (envp && envp[n])
		n++;
	char *var = malloc(DS__FDS_BUF);
	char **ne = malloc((n + 3) * sizeof(char *));
	if (!var || !ne) {
		free(var);
		free(ne);
		return ENOMEM;
	}
	int regfd = ds__offcell_exec_fd();
	int have = ds__exec_describe(var, DS__FDS_BUF, regfd, (const int(*)[2])dups, ndups, 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], DS__FDS_NAME "=", sizeof(DS__FDS_NAME)) &&
		    strncmp(envp[i], DS__OUT_CWD_NAME "=", sizeof(DS__OUT_CWD_NAME)))
			ne[k++] = envp[i];
	if (have)
		ne[k++] = var;
	char work[PATH_MAX]; /* a cwd in the outputs, as exec.c passes it */
	if (atomic_load_explicit(&ds__out_cwd, memory_order_relaxed) &&
	    ds__out_rel(AT_FDCWD, ".", work))
		ne[k++] = (char *)DS__OUT_CWD_NAME "=1";
	ne[k] = NULL;
	int rc = real(pid, path, fa, attr, argv, ne);
	ds__offcell_exec_failed(regfd); /* the parent's stays close-on-exec */
	free(ne);
	free(var);
	return rc;
}

DS__EXPORT int DS__WRAP(posix_spawn)(pid_t *pid, const char *path,
                                     const posix_spawn_file_actions_t *fa,
                                     const posix_spawnattr_t *attr, char *const argv[],
                                     char *const envp[])
{
	return spawn(DS__REAL(posix_spawn), pid, path, fa, attr, argv, envp);
}

DS__EXPORT int DS__WRAP(posix_spawnp)(pid_t *pid, const char *file,
                                      const posix_spawn_file_actions_t *fa,
                                      const posix_spawnattr_t *attr, char *const argv[],
                                      char *const envp[])
{
	return spawn(DS__REAL(posix_spawnp), pid, file, fa, attr, argv, envp);
}

/* system(3): glibc's spawns its shell with its internal posix_spawn, past
 * the wrapper above.  With staged descriptors in the process, the same
 * steps are done here through it (SIGINT and SIGQUIT ignored and SIGCHLD
 * blocked while the command runs, the child given back the caller's mask
 * and the default actions of the signals the caller did not ignore,
 * "sh -c CMD", 127 when the shell cannot run); without any, glibc's.  (Not
 * done here: glibc's count of concurrent system() calls that restores
 * SIGINT and SIGQUIT only when the last one returns.) */
DS__EXPORT int DS__WRAP(system)(const char *cmd)
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fdtab || !atomic_load(&ds__fd_hwm)) || !cmd || !ds__owner())
		return DS__REAL(system)(cmd);
	struct sigaction ign, intr, quit;
	sigset_t chld, omask, def;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGINT, &ign, &intr);
	sigaction(SIGQUIT, &ign, &quit);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &omask);
	sigemptyset(&def);
	if (intr.sa_handler != SIG_IGN)
		sigaddset(&def, SIGINT);
	if (quit.sa_handler != SIG_IGN)
		sigaddset(&def, SIGQUIT);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &omask);
	posix_spawnattr_setsigdefault(&attr, &def);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	char *argv[] = {"sh", "-c", (char *)cmd, NULL};
	pid_t pid;
	int status = 0;
	int rc = spawn(DS__REAL(posix_spawn), &pid, "/bin/sh", NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	if (rc == 0) {
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR) {
				status = -1;
				break;
			}
	} else
		status = W_EXITCODE(127, 0);
	int e = errno;
	sigaction(SIGINT, &intr, NULL);
	sigaction(SIGQUIT, &quit, NULL);
	sigprocmask(SIG_SETMASK, &omask, NULL);
	errno = e;
	return status;
}

/* popen(3) and pclose(3): glibc's popen spawns with its internal
 * posix_spawn too.  With staged descriptors in the process, popen is done
 * here through spawn() as glibc does it (a close-on-exec pipe, the child's
 * end dup2'ed onto its stdin or stdout, the streams of earlier popen calls
 * closed in the child, "sh -c CMD"; "e" in the mode keeps the parent's end
 * close-on-exec), and pclose knows these streams apart from glibc's. */
struct popen_rec {
	FILE *f;
	pid_t pid;
	struct popen_rec *next;
};
static struct popen_rec *popens;
static pthread_mutex_t popen_lock = PTHREAD_MUTEX_INITIALIZER;

DS__EXPORT FILE *DS__WRAP(popen)(const char *cmd, const char *mode)
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fdtab || !atomic_load(&ds__fd_hwm)) || !ds__owner() || ds__null(cmd) ||
	    ds__null(mode) || (mode[0] != 'r' && mode[0] != 'w'))
		return DS__REAL(popen)(cmd, mode);
	int rd = mode[0] == 'r', cloexec = strchr(mode + 1, 'e') != NULL;
	struct popen_rec *rec = malloc(sizeof(*rec));
	int p[2];
	if (!rec)
		return NULL;
	if (DS__WRAP(pipe2)(p, O_CLOEXEC) < 0) {
		free(rec);
		return NULL;
	}
	int child = rd ? p[1] : p[0], parent = rd ? p[0] : p[1], target = rd ? 1 : 0;
	posix_spawn_file_actions_t fa;
	int rc = DS__WRAP(posix_spawn_file_actions_init)(&fa);
	if (!rc) /* onto itself when child == target: clears its close-on-exec */
		rc = DS__WRAP(posix_spawn_file_actions_adddup2)(&fa, child, target);
	pthread_mutex_lock(&popen_lock);
	for (struct popen_rec *o = popens; o && !rc; o = o->next) {
		int ofd = DS__WRAP(fileno)(o->f);
		if (ofd >= 0 && ofd != target)
			rc = posix_spawn_file_actions_addclose(&fa, ofd); /* libc's */
	}
	pthread_mutex_unlock(&popen_lock);
	char *argv[] = {"sh", "-c", (char *)cmd, NULL};
	if (!rc)
		rc = spawn(DS__REAL(posix_spawn), &rec->pid, "/bin/sh", &fa, NULL, argv, environ);
	DS__WRAP(posix_spawn_file_actions_destroy)(&fa);
	DS__WRAP(close)(child);
	FILE *f = NULL;
	if (!rc && !cloexec)
		DS__REAL(fcntl)(parent, F_SETFD, 0);
	if (!rc && !(f = DS__WRAP(fdopen)(parent, rd ? "r" : "w")))
		rc = errno;
	if (rc) {
		DS__WRAP(close)(parent);
		free(rec);
		errno = rc;
		return NULL;
	}
	rec->f = f;
	pthread_mutex_lock(&popen_lock);
	rec->next = popens;
	popens = rec;
	pthread_mutex_unlock(&popen_lock);
	return f;
}

DS__EXPORT int DS__WRAP(pclose)(FILE *f)
{
	struct popen_rec *rec = NULL, **pp;
	pthread_mutex_lock(&popen_lock);
	for (pp = &popens; *pp; pp = &(*pp)->next)
		if ((*pp)->f == f) {
			rec = *pp;
			*pp = rec->next;
			break;
		}
	pthread_mutex_unlock(&popen_lock);
	if (!rec)
		return DS__REAL(pclose)(f);
	pid_t pid = rec->pid;
	free(rec);
	DS__WRAP(fclose)(f);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}
