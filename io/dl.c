/* SPDX-License-Identifier: BSD-3-Clause */
/* dl.c: dlopen and dlmopen of a shared object in the mount.
 *
 * The dynamic loader opens and maps objects with its own system calls, which
 * no preload sees, so a staged path must become a real file first.  Two ways
 * were possible:
 *   - a sealed memfd holding the bytes, opened as /proc/self/fd/N: simple,
 *     nothing on disk, but the object's $ORIGIN becomes /proc/self/fd, so a
 *     Python extension's RUNPATH=$ORIGIN/../pkg.libs, or a plugin next to its
 *     helper libraries, cannot find its siblings;
 *   - a private cache that mirrors the tree: DSTAGE_STORE/dl/<name in the
 *     mount>, in the job directory (0700, the user's own), each file written
 *     to a temporary name and renamed, its CRC-32C checked against the index
 *     as the bytes come out.  $ORIGIN then points into the mirror, where the
 *     siblings the object needs are materialised the same way.
 * The mirror is used.  Before the object itself, its DT_NEEDED libraries
 * that resolve to staged files (through $ORIGIN or an absolute RPATH/RUNPATH
 * entry in the mount) are materialised and loaded first, so the loader finds
 * them already loaded by their soname whatever the search path says.  A
 * file already in the cache with the entry's size and mtime is used as it is
 * (a new stage recreates the job directory, and the cache with it).
 *
 * A name without '/' is the loader's search (LD_LIBRARY_PATH, RUNPATH of the
 * caller), passed on by a tail call so the loader still sees the real
 * caller; a staged path that does not resolve goes to the loader too, which
 * reports its usual "cannot open shared object file".  dladdr and
 * dl_iterate_phdr report the cache name (DSTAGE_STORE/dl/<name>). */
#include "shim.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define DL_DIR DS_DL_NAME
#define DL_MAXDEPTH 8

static _Atomic unsigned tmp_seq;

/* Entry id (a regular file of ours) as a real file: its cache name into out.
 * 0 or -errno. */
static int materialise(int64_t id, char *out, size_t outlen)
{
	char name[PATH_MAX];
	int nl = ds_ix_path(&ds__g.ix, (uint32_t)id, name, sizeof(name));
	struct stat es, st;
	if (nl < 0 || ds_name_check(name, (size_t)nl, NULL))
		return -EIO; /* becomes a real path: only a safe name */
	ds_index_stat(&ds__g.ix, (uint32_t)id, &es);
	if (!S_ISREG(es.st_mode))
		return -ENOEXEC;
	int n = snprintf(out, outlen, "%s/" DL_DIR "/%.*s", ds__g.jobdir, nl, name);
	if (n < 0 || (size_t)n >= outlen - 32)
		return -ENAMETOOLONG;
	if (DS__REAL(stat)(out, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == es.st_size &&
	    st.st_mtim.tv_sec == es.st_mtim.tv_sec && st.st_mtim.tv_nsec == es.st_mtim.tv_nsec)
		return 0;

	char tmp[PATH_MAX + 64];
	memcpy(tmp, out, n + 1);
	*strrchr(tmp, '/') = 0;
	ds__busy++; /* mkdir_p's own calls: libc's */
	int rc = ds_mkdir_p(tmp, 0700);
	ds__busy--;
	if (rc)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s.%ld.%u.tmp", out, (long)getpid(), atomic_fetch_add(&tmp_seq, 1));

	struct ds__res r = {.ours = 1, .id = id};
	int sfd = ds__open_res(&r, O_RDONLY | O_CLOEXEC, 0);
	if (sfd < 0)
		return sfd;
	int dfd = DS__REAL(open)(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	if (dfd < 0) {
		rc = -errno;
		DS__WRAP(close)(sfd);
		return rc;
	}
	char buf[1 << 16];
	uint64_t off = 0;
	uint32_t crc = 0;
	while (rc == 0 && off < (uint64_t)es.st_size) {
		ssize_t k = DS__WRAP(pread64)(sfd, buf, sizeof(buf), (off64_t)off);
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			break;
		}
		crc = ds_crc32c(crc, buf, (size_t)k);
		for (ssize_t w = 0; w < k;) {
			ssize_t m = write(dfd, buf + w, k - w);
			if (m < 0) {
				if (errno == EINTR)
					continue;
				rc = -errno;
				break;
			}
			w += m;
		}
		off += (uint64_t)k;
	}
	DS__WRAP(close)(sfd);
	if (rc == 0 && crc != ds_ix_crc(&ds__g.ix, (uint32_t)id))
		rc = -EIO; /* never map bytes that are not the staged ones */
	struct timespec ts[2] = {es.st_atim, es.st_mtim};
	if (rc == 0 && futimens(dfd, ts) < 0)
		rc = -errno;
	if (close(dfd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, out) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* ---- the dynamic section of a materialised object ------------------------ */
struct elfview {
	const unsigned char *m;
	size_t len;
	const Elf64_Phdr *ph;
	unsigned phn;
};

/* File offset of virtual address va (a PT_LOAD maps it), or -1. */
static long va_off(const struct elfview *v, uint64_t va)
{
	for (unsigned i = 0; i < v->phn; i++) {
		const Elf64_Phdr *p = &v->ph[i];
		if (p->p_type == PT_LOAD && va >= p->p_vaddr && va < p->p_vaddr + p->p_filesz)
			return (long)(p->p_offset + (va - p->p_vaddr));
	}
	return -1;
}

/* A string of the dynamic string table, bounded by the file, or NULL. */
static const char *dstr(const struct elfview *v, long strtab, uint64_t off)
{
	if (strtab < 0 || (uint64_t)strtab + off >= v->len)
		return NULL;
	const char *s = (const char *)v->m + strtab + off;
	return memchr(s, 0, v->len - strtab - off) ? s : NULL;
}

static int load_deps(const char *cache, int64_t id, int depth, Lmid_t lmid, int ns);

/* Needed library `need` of the object staged as entry id: a staged file in
 * one of the search directories?  Load it (its own deps first). */
static void load_one(const char *need, const char *paths, int64_t id, int depth, Lmid_t lmid,
                     int ns)
{
	char dir[PATH_MAX], cand[PATH_MAX * 2], origin[PATH_MAX];
	int on = ds__abs_name(id, NULL, origin, sizeof(origin));
	if (on < 0)
		return;
	*strrchr(origin, '/') = 0;
	for (const char *p = paths; p && *p;) {
		size_t l = strcspn(p, ":");
		size_t dl = 0;
		for (size_t i = 0; i < l && dl < sizeof(dir) - PATH_MAX / 2;) {
			if (!strncmp(p + i, "$ORIGIN", 7) || !strncmp(p + i, "${ORIGIN}", 9)) {
				size_t ol = strlen(origin);
				if (dl + ol >= sizeof(dir))
					break;
				memcpy(dir + dl, origin, ol);
				dl += ol;
				i += p[i + 1] == '{' ? 9 : 7;
			} else {
				dir[dl++] = p[i++];
			}
		}
		dir[dl] = 0;
		p += l + (p[l] == ':');
		snprintf(cand, sizeof(cand), "%s/%s", dir, need);
		struct ds__res r;
		if (!ds__maybe_ours(cand) || ds__resolve(AT_FDCWD, cand, DS__RES_FOLLOW, &r) ||
		    !r.ours || r.v.kind != DS__V_NONE ||
		    !S_ISREG(ds_ix_mode(&ds__g.ix, (uint32_t)r.id)))
			continue;
		char path[PATH_MAX];
		if (materialise(r.id, path, sizeof(path)) || load_deps(path, r.id, depth + 1, lmid, ns))
			return;
		/* loaded now, found by its soname when the object asks */
		if (ns)
			DS__REAL(dlmopen)(lmid, path, RTLD_LAZY | RTLD_LOCAL);
		else
			DS__REAL(dlopen)(path, RTLD_LAZY | RTLD_LOCAL);
		return;
	}
}

/* Materialise and load the staged DT_NEEDED of the object cached at
 * `cache` (entry id).  Errors are left to the loader, which reports them
 * when it cannot find a library. */
static int load_deps(const char *cache, int64_t id, int depth, Lmid_t lmid, int ns)
{
	if (depth > DL_MAXDEPTH)
		return 0;
	int fd = DS__REAL(open)(cache, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return 0;
	if (DS__REAL(fstat)(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return 0;
	}
	struct elfview v = {.len = (size_t)st.st_size};
	void *m = DS__REAL(mmap)(NULL, v.len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return 0;
	v.m = m;
	const Elf64_Ehdr *eh = m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > v.len ||
	    (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > v.len - eh->e_phoff)
		goto out;
	v.ph = (const Elf64_Phdr *)(v.m + eh->e_phoff);
	v.phn = eh->e_phnum;
	const Elf64_Dyn *dyn = NULL;
	size_t ndyn = 0;
	for (unsigned i = 0; i < v.phn; i++)
		if (v.ph[i].p_type == PT_DYNAMIC && v.ph[i].p_offset < v.len &&
		    v.ph[i].p_filesz <= v.len - v.ph[i].p_offset) {
			dyn = (const Elf64_Dyn *)(v.m + v.ph[i].p_offset);
			ndyn = v.ph[i].p_filesz / sizeof(Elf64_Dyn);
		}
	long strtab = -1;
	const char *rpath = NULL, *runpath = NULL;
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++)
		if (dyn[i].d_tag == DT_STRTAB)
			strtab = va_off(&v, dyn[i].d_un.d_ptr);
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		if (dyn[i].d_tag == DT_RPATH)
			rpath = dstr(&v, strtab, dyn[i].d_un.d_val);
		else if (dyn[i].d_tag == DT_RUNPATH)
			runpath = dstr(&v, strtab, dyn[i].d_un.d_val);
	}
	const char *paths = runpath ? runpath : rpath;
	for (size_t i = 0; paths && i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		const char *need;
		if (dyn[i].d_tag == DT_NEEDED && (need = dstr(&v, strtab, dyn[i].d_un.d_val)) &&
		    !strchr(need, '/'))
			load_one(need, paths, id, depth, lmid, ns);
	}
out:
	munmap(m, v.len);
	return 0;
}

/* A staged object: its cache name into path (1), not ours (0), or -errno. */
static int staged(const char *file, char *path, size_t len, Lmid_t lmid, int ns)
{
	if (!file || !strchr(file, '/') || !ds__maybe_ours(file))
		return 0;
	struct ds__res r;
	int rc = ds__resolve(AT_FDCWD, file, DS__RES_FOLLOW, &r);
	if (rc || !r.ours || r.v.kind != DS__V_NONE)
		return 0; /* missing, or not ours after all: the loader says so */
	rc = materialise(r.id, path, len);
	if (rc)
		return rc;
	/* a new namespace does not exist yet: its objects find their staged
	 * siblings through $ORIGIN in the cache only */
	if (!ns || lmid != LM_ID_NEWLM)
		load_deps(path, r.id, 0, lmid, ns);
	return 1;
}

/* A staged object that cannot be made a real file: dlerror() cannot be set
 * from outside, so the loader is asked for a name that cannot exist (under
 * the mount) and carries the reason: "NAME (dstage: REASON): cannot open
 * shared object file: ...". */
static void *dl_fail(const char *file, int err, Lmid_t lmid, int ns)
{
	char name[PATH_MAX + 128];
	snprintf(name, sizeof(name), "%s (dstage: %s)", file, strerror(err));
	return ns ? DS__REAL(dlmopen)(lmid, name, RTLD_LAZY) : DS__REAL(dlopen)(name, RTLD_LAZY);
}

static __attribute__((noinline)) void *dlopen_staged(const char *file, int flags, Lmid_t lmid, int ns)
{
	char path[PATH_MAX];
	int rc = staged(file, path, sizeof(path), lmid, ns);
	if (rc < 0)
		return dl_fail(file, -rc, lmid, ns);
	/* rc 0: missing or not ours, the loader's answer (a name with '/'
	 * needs no caller's search path) */
	const char *use = rc ? path : file;
	return ns ? DS__REAL(dlmopen)(lmid, use, flags) : DS__REAL(dlopen)(use, flags);
}

/* The wrappers themselves keep no frame, so that a name that is not ours
 * reaches the loader by a tail call: the loader finds the caller by the
 * return address (its RUNPATH, its namespace) and must see the program's,
 * not the shim's. */
DS__EXPORT void *DS__WRAP(dlopen)(const char *file, int flags)
{
	ds__ensure_init();
	if (DS__UNLIKELY(!DS__REAL(dlopen))) /* called from inside init */
		return ((void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen"))(file, flags);
	if (DS__LIKELY(ds__null(file) || !strchr(file, '/') || !ds__maybe_ours(file)))
		return DS__REAL(dlopen)(file, flags);
	return dlopen_staged(file, flags, 0, 0);
}

DS__EXPORT void *DS__WRAP(dlmopen)(Lmid_t lmid, const char *file, int flags)
{
	ds__ensure_init();
	if (DS__UNLIKELY(!DS__REAL(dlmopen))) /* called from inside init */
		return ((void *(*)(Lmid_t, const char *, int))dlsym(RTLD_NEXT, "dlmopen"))(lmid, file, flags);
	if (DS__LIKELY(ds__null(file) || !strchr(file, '/') || !ds__maybe_ours(file)))
		return DS__REAL(dlmopen)(lmid, file, flags);
	return dlopen_staged(file, flags, lmid, 1);
}
