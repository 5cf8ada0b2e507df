/* SPDX-License-Identifier: BSD-3-Clause */
/* init.c: the shim's once-only start and its fork handling.
 *
 * Init runs from the library constructor, or from the first wrapper called
 * before it (another library's constructor may call open first).  It must
 * not change errno (libfaketime, GekkoFS) and must not recurse: everything it
 * calls that is itself wrapped (open, fstat, mmap in ds_index_open; write in
 * logging) runs with the per-thread guard ds__busy set, so the wrappers go
 * straight to libc. */
#include "shim.h"

#include "rawsys.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

/* The three paths (mount, job directory, node directory) one after the
 * other: the start writes one page, not three.  The first of init.o's .bss,
 * which the Makefile links first: the page after .data (DS__HOT). */
static char ds__paths[4 * PATH_MAX]; /* 3 paths + the cwd at start */
#define NO_PATH (ds__paths + sizeof(ds__paths) - 1) /* "", never written */
struct ds__global ds__g DS__HOT = {
	.tmpl_fd = -1, .mount = ds__paths, .jobdir = NO_PATH, .nodedir = NO_PATH};
int ds__ready DS__HOT;
__thread int ds__busy __attribute__((tls_model("initial-exec")));
#ifndef DS_LINK_WRAP
struct ds__real ds__real;
#endif

static pthread_once_t init_once DS__HOT = PTHREAD_ONCE_INIT;

/* Stands for every function this libc lacks (statx before 2.28,
 * copy_file_range, preadv64v2, renameat2, closefrom and close_range before
 * 2.34...): a wrapper that passes through then fails with ENOSYS, as the
 * kernel does for a call it lacks, instead of calling NULL.  One stub for
 * all: each of these returns an int or ssize_t (-1) or nothing, and the
 * x86-64/aarch64 calling conventions let a caller ignore the arguments.
 * Wrappers that can do better test DS__HAVE(name) first (close_range falls
 * back to the system call, closefrom to close_range). */
static long ds__enosys(void)
{
	errno = ENOSYS;
	return -1;
}

/* Test hook: DSTAGE_TEST_NOREAL=name,name... resolves those as if this libc
 * lacked them (t/2080 proves no wrapper calls NULL).  One getenv at start. */
static const char *test_noreal DS__HOT;

extern char **environ;
/* getenv, without a page of libc text that a small program never touches */
static const char *env(const char *name)
{
	for (char **e = environ; e && *e; e++) {
		const char *v = *e, *n = name;
		while (*n && *v == *n)
			v++, n++;
		if (!*n && *v == '=')
			return v + 1;
	}
	return NULL;
}

static size_t slen(const char *s)
{
	const char *p = s;
	while (*p)
		p++;
	return (size_t)(p - s);
}

/* copy s and its NUL to d; returns d's NUL */
static char *scpy(char *d, const char *s)
{
	while ((*d = *s++))
		d++;
	return d;
}

/* DSTAGE_NODE and the like: plain digits here, anything else (sign,
 * blanks, overflow) as ds_parse_u64 (strtoull) says */
static int parse_u64(const char *s, uint64_t *v)
{
	uint64_t x = 0;
	const char *p = s;
	while (*p >= '0' && *p <= '9' && x < UINT64_MAX / 10 - 1)
		x = x * 10 + (uint64_t)(*p++ - '0');
	if (p == s || *p)
		return ds_parse_u64(s, v);
	*v = x;
	return 0;
}
static int test_lacks(const char *name)
{
	const char *l = test_noreal;
	size_t n = strlen(name);
	for (const char *p = l; p && *p;) {
		const char *c = strchr(p, ',');
		size_t k = c ? (size_t)(c - p) : strlen(p);
		if (k == n && !memcmp(p, name, n))
			return 1;
		p = c ? c + 1 : NULL;
	}
	return 0;
}

void ds__real_resolve(void)
{
#ifndef DS_LINK_WRAP
	test_noreal = env("DSTAGE_TEST_NOREAL");
#endif
}

#ifndef DS_LINK_WRAP
/* One look-up, at the first call through DS__REAL(name).  Two threads may
 * both look it up: they find and store the same address. */
void (*ds__real_find(void (**slot)(void), const char *name))(void)
{
	void (*f)(void) = (void (*)(void))dlsym(RTLD_NEXT, name);
	if (!f || test_lacks(name))
		f = (void (*)(void))ds__enosys;
	__atomic_store_n(slot, f, __ATOMIC_RELAXED);
	return f;
}
#endif

int ds__real_missing(void (*fn)(void))
{
	return fn == (void (*)(void))ds__enosys;
}

/* The node this reader is on: DSTAGE_NODE, SLURM_NODEID, the node stage
 * recorded for this host (by-host/<hostname> -> "<node>"), else 0. */
static uint32_t find_node(const char *jobdir)
{
	const char *e = env("DSTAGE_NODE");
	uint64_t v;
	if (!e || !*e)
		e = env("SLURM_NODEID");
	if (e && *e && !parse_u64(e, &v) && v < UINT32_MAX)
		return (uint32_t)v;
	char host[256], link[PATH_MAX], target[64];
	if (gethostname(host, sizeof(host)) == 0) {
		host[sizeof(host) - 1] = 0;
		snprintf(link, sizeof(link), "%s/" DS_BYHOST_NAME "/%s", jobdir, host);
		ssize_t n = DS__REAL(readlink)(link, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = 0;
			const char *t = strrchr(target, '/');
			if (!ds_parse_u64(t ? t + 1 : target, &v) && v < UINT32_MAX)
				return (uint32_t)v;
		}
	}
	return 0;
}

char ds__spill_store[PATH_MAX];
static int ours_alone(const char *path, int dir);

/* Is the spill tier the index names (dsindex.h: the store from ram_size
 * on) trusted as the RAM store is: the spill job and node directories and
 * the file this user's and not writable by others?  Sets ds__spill_store. */
static int spill_trusted(void)
{
	char dir[PATH_MAX];
	size_t jl = 0;
	if (ds_store_spill_nodedir(&ds__g.ix, dir, sizeof(dir), &jl) ||
	    ds_store_path(ds__spill_store, sizeof(ds__spill_store), dir, DS_STORE_NAME))
		return 0;
	dir[jl] = 0;
	int ok = ours_alone(dir, 1);
	dir[jl] = '/';
	if (!ok || !ours_alone(dir, 1) || !ours_alone(ds__spill_store, 0)) {
		ds_info("'%s': not a spill store of this user (owner, mode or type): staying out of "
		        "the way", dir);
		return 0;
	}
	return 1;
}

/* The spill tier's file, open (checked again: it may have changed since),
 * or -1. */
static int open_spill(uint64_t want)
{
	if (!spill_trusted())
		return -1;
	int fd = DS__REAL(open)(ds__spill_store, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd >= 0 && (DS__REAL(fstat)(fd, &st) < 0 || (uint64_t)st.st_size < want)) {
		ds_info("'%s': shorter than the index says", ds__spill_store);
		DS__REAL(close)(fd);
		return -1;
	}
	if (fd >= 0) {
		ds__g.spill_dev = st.st_dev;
		ds__g.spill_ino = st.st_ino;
	}
	return fd;
}

static void map_store(void)
{
	char path[PATH_MAX + 16];
	uint64_t want = ds__g.ix.h->store_size, ram = ds__g.ix.h->ram_size;
	if (want == 0)
		return;
	ds_store_path(path, sizeof(path), ds__g.nodedir, DS_STORE_NAME);
	int fd = DS__REAL(open)(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || DS__REAL(fstat)(fd, &st) < 0 || (uint64_t)st.st_size < ram) {
		ds_info("'%s': cannot map the node store: %s", path,
		        fd < 0 ? strerror(errno) : "shorter than the index says");
		if (fd >= 0)
			DS__REAL(close)(fd);
		return;
	}
	/* With a spill tier, its file right after the RAM one: one store to
	 * every reader of the mapping (docs/formats.md "The spill tier") */
	int sfd = ram < want ? open_spill(want - ram) : -1;
	if (ram < want && sfd < 0) {
		DS__REAL(close)(fd);
		return;
	}
	char *m = DS__REAL(mmap)(NULL, want, PROT_READ,
	                         sfd < 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
	                         sfd < 0 ? fd : -1, 0);
	if (m != MAP_FAILED && sfd >= 0 &&
	    ((ram && DS__REAL(mmap)(m, ram, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) ||
	     DS__REAL(mmap)(m + ram, want - ram, PROT_READ, MAP_SHARED | MAP_FIXED, sfd, 0) ==
	             MAP_FAILED)) {
		munmap(m, want);
		m = MAP_FAILED;
	}
	DS__REAL(close)(fd);
	if (sfd >= 0)
		DS__REAL(close)(sfd);
	if (m == MAP_FAILED)
		return;
	ds__g.store = m;
	ds__g.store_len = want;
	ds__g.ram_len = ram;
	ds__g.store_dev = st.st_dev;
	ds__g.store_ino = st.st_ino;
}

static void map_stats(void)
{
	char path[PATH_MAX + 16];
	ds_store_path(path, sizeof(path), ds__g.nodedir, DS_STATS_NAME);
	int fd = DS__REAL(open)(path, O_RDWR | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	if (DS__REAL(fstat)(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct ds_stats)) {
		void *m = DS__REAL(mmap)(NULL, sizeof(struct ds_stats), PROT_READ | PROT_WRITE,
		                         MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			struct ds_stats *s = m;
			/* stage creates it zeroed; the service stamps the magic */
			if (s->magic == DS_STATS_MAGIC || s->magic == 0)
				ds__g.stats = s;
			else
				munmap(m, sizeof(struct ds_stats));
		}
	}
	DS__REAL(close)(fd);
}

/* Is path a directory (or, dir == 0, a regular file) of this user that no
 * one else can write?  The shim trusts what the store says (names, bytes
 * and their checksums): a store planted by another user (the job directory
 * name is predictable) must not be taken for the reader's own. */
static int ours_alone(const char *path, int dir)
{
	struct stat st;
	if (DS__REAL(lstat)(path, &st) < 0)
		return 0;
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return 0;
	return st.st_uid == geteuid() && !(st.st_mode & 022);
}

static void atfork_child(void)
{
	ds__g.pid = ds__raw_getpid();
	ds__fdtab_atfork_child();
	ds__dir_atfork_child();
	ds__stdio_atfork_child();
	ds__remote_atfork_child();
	ds__offcell_atfork_child();
}

static void setup_store(void);
static void activate_prepare(void);
static void activate_after(void);
static void activate_child(void);
static void prefork(void);

/* The first half of the start, in every process: read the environment.
 * It calls no libc function that a small program would not call itself
 * (rawsys.h): this runs in every process the job starts. */
static void setup(void)
{
	const char *store = env("DSTAGE_STORE");
	const char *mount = env("DSTAGE_MOUNT");
	if (!mount || !*mount)
		mount = "/dstage";
	ds__g.pid = ds__raw_getpid();
	ds__g.timeout_ms = 30000;
	const char *to = env("DSTAGE_TIMEOUT");
	double t;
	if (to && *to && !ds_parse_double(to, &t) && t > 0 && t < 1e6)
		ds__g.timeout_ms = (int)(t * 1000);

	size_t ml = slen(mount), sl = store ? slen(store) : 0;
	if (mount[0] != '/' || ml >= PATH_MAX) {
		ds_info("DSTAGE_MOUNT '%s' is not an absolute path: staying out of the way", mount);
		return;
	}
	scpy(ds__g.mount, mount);
	ds__g.mlen = ds_path_normalise(ds__g.mount);
	if (ds__g.mlen <= 1) {
		ds_info("DSTAGE_MOUNT '/' would hide the whole file system: staying out of the way");
		return;
	}
	if (!store || !*store) {
		ds_info("DSTAGE_STORE is not set: staying out of the way");
		return;
	}
	if (sl >= PATH_MAX - 32) {
		ds_info("DSTAGE_STORE '%s' is too long", store);
		return;
	}
	/* mount < PATH_MAX, jobdir < PATH_MAX - 32, nodedir = jobdir/<u32> */
	char *jobdir = ds__g.mount + ds__g.mlen + 1;
	char *nodedir = scpy(jobdir, store) + 1;
	ds__g.node = find_node(jobdir);
	char num[16], *q = num + sizeof(num);
	uint32_t nv = ds__g.node;
	*--q = 0;
	do
		*--q = (char)('0' + nv % 10);
	while (nv /= 10);
	char *e = scpy(nodedir, jobdir);
	*e++ = '/';
	scpy(e, q);
	ds__g.jobdir = jobdir;
	ds__g.nodedir = nodedir;
	/* Map the store at start only when this image inherits staged
	 * descriptors (DSTAGE_FDS) or starts in a staged directory (its cwd is
	 * a shadow under the job directory); otherwise at the first path that
	 * may be under the mount (path.c): a process that never names one
	 * (a shell's /bin/true, a compiler, python's imports) pays for none
	 * of it.  The shadows' parent is JOBDIR/cwd (cwd.c).  The cwd goes
	 * in the unused end of ds__paths (under init_once), not in a 4 KiB
	 * stack frame. */
	char *cwd = nodedir + slen(nodedir) + 1;
	size_t cl = (size_t)(ds__paths + sizeof(ds__paths) - 1 - cwd);
	int eager = env("DSTAGE_FDS") != NULL;
	/* the exec that started this image was made from a cwd in the
	 * outputs (exec.c): relative names may be outputs (write.c) */
	if (env("DSTAGE_OUT_CWD"))
		ds__out_chdir();
	if (!eager && ds__raw_getcwd(cwd, cl)) {
		const char *c = cwd, *j = jobdir;
		while (*j && *c == *j)
			c++, j++;
		eager = !*j && *c == '/';
	}
	cwd[0] = 0;
	if (eager) {
		setup_store();
	} else {
		/* a fork waits for an activation under way in another thread */
		pthread_atfork(activate_prepare, activate_after, activate_child);
		__atomic_store_n(&ds__pending, 1, __ATOMIC_RELEASE);
	}
}

/* The second half of the start: check the store is the user's, map it, make
 * the descriptor table.  Under ds__busy (its calls are libc's). */
static void setup_store(void)
{
	char path[PATH_MAX + 16];
	ds_store_path(path, sizeof(path), ds__g.nodedir, DS_INDEX_NAME);
	if (!ours_alone(ds__g.jobdir, 1) || !ours_alone(ds__g.nodedir, 1) || !ours_alone(path, 0)) {
		ds_info("'%s': not a store of this user (owner, mode or type): staying out of the way",
		        ds__g.nodedir);
		return;
	}
	/* full = 0: checking every entry and the CRC of a 100 MB index would cost
	 * every process (ls, a DataLoader worker) its start-up time; stage wrote
	 * it atomically and checked it. */
	int rc = ds_index_open(&ds__g.ix, path, 0);
	if (rc) {
		ds_info("'%s': %s: staying out of the way", path, ds_strerror(rc));
		return;
	}
	/* a spill tier is trusted as the store is, or nothing is */
	if (ds_index_spills(&ds__g.ix) && !spill_trusted()) {
		ds_index_close(&ds__g.ix);
		return;
	}
	map_store();
	map_stats();
	ds__fdtab_init();
	if (!ds__fdtab) {
		ds_index_close(&ds__g.ix);
		return;
	}
	pthread_atfork(prefork, NULL, atfork_child);
	__atomic_store_n(&ds__g.active, 1, __ATOMIC_RELEASE);
	ds__exec_inherit();
	ds__cwd_inherit();
	ds_debug("node %u of %u, %u entries under '%s'", ds__g.node, ds__g.ix.h->nnodes,
	         ds__g.ix.h->nentries, ds__g.mount);
}

int ds__pending DS__HOT;
static pthread_mutex_t activate_lock DS__HOT = PTHREAD_MUTEX_INITIALIZER;

/* Before a fork: the child's exec finds its real call already looked up. */
static void prefork(void)
{
	int saved = errno;
	ds__exec_resolve();
	errno = saved;
}

static void activate_prepare(void)
{
	prefork();
	pthread_mutex_lock(&activate_lock);
}
static void activate_after(void) { pthread_mutex_unlock(&activate_lock); }
/* a fork child owns its per-process state, also when it maps the store
 * only later (setup_store's own handler takes over once it is mapped) */
static void activate_child(void)
{
	if (!__atomic_load_n(&ds__g.active, __ATOMIC_RELAXED))
		ds__g.pid = ds__raw_getpid();
	/* The lock activate_prepare took: this thread is the only one here.
	 * Made anew, as glibc does its own in a child (no call into libc: a
	 * child that execs at once touches one page less). */
	activate_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

int ds__activate(void)
{
	if (DS__LIKELY(__atomic_load_n(&ds__g.active, __ATOMIC_ACQUIRE)))
		return 1;
	if (!__atomic_load_n(&ds__pending, __ATOMIC_ACQUIRE) || ds__busy)
		return 0;
	int saved = errno;
	pthread_mutex_lock(&activate_lock);
	if (__atomic_load_n(&ds__pending, __ATOMIC_ACQUIRE)) {
		ds__busy++;
		setup_store();
		ds__busy--;
		__atomic_store_n(&ds__pending, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&activate_lock);
	errno = saved;
	return __atomic_load_n(&ds__g.active, __ATOMIC_ACQUIRE);
}

static void init_once_fn(void)
{
	int saved = errno;
	ds__busy++;
	ds__real_resolve();
	ds_log_set_cmd("shim");
	if (env("DSTAGE_LOG")) /* else the default level: no getenv */
		ds_log_init(0);
	setup();
	__atomic_store_n(&ds__ready, 1, __ATOMIC_RELEASE);
	ds__busy--;
	errno = saved;
}

void ds__init(void)
{
	int saved = errno;
	pthread_once(&init_once, init_once_fn);
	errno = saved;
}

__attribute__((constructor)) static void ds__ctor(void)
{
	ds__init();
}
