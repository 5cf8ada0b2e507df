/* SPDX-License-Identifier: BSD-3-Clause */
/* owner.c: which process owns the shim's state (ds__owner, shim.h).
 *
 * A vfork child shares the shim's memory with its suspended parent, and a
 * child made without fork's handlers (clone, _Fork, a raw fork system call)
 * has a copy that still says it is the parent's: neither may change the
 * descriptor table.  Asking getpid at every open and close cost two system
 * calls per staged file (about 6% of a 4 KiB read-once).  Such a child can
 * only come from these entry points, so they raise ds__forked_raw first,
 * and only from then on does ds__owner ask the kernel:
 *   vfork, __vfork  (x86_64: a trampoline with no frame of its own, which
 *                    jumps to libc's; the child returns through the same
 *                    stack)
 *   clone, _Fork    (wrappers)
 *   syscall(SYS_clone, SYS_clone3, SYS_fork, SYS_vfork)  (syscall.c)
 * posix_spawn, system and popen make their child with libc's internal
 * clone, but that child runs libc's internal functions only (never a
 * wrapper; spawn.c prepares posix_spawn's in the parent).  fork() runs the handlers (init.c), so its child owns its copy.
 * A child made with an inline clone instruction is not seen (like every
 * other inline system call).  Elsewhere than x86_64, and in the test build
 * that links the wrappers statically (DS_LINK_WRAP), the flag starts raised:
 * getpid every time, as before. */
#include "shim.h"

#include <sched.h>
#include <stdarg.h>

#if defined(__x86_64__) && !defined(DS_LINK_WRAP)
#define DS__OWNER_HOOKS 1
_Atomic int ds__forked_raw;
#else
_Atomic int ds__forked_raw = 1;
#endif

void ds__forked_raw_note(void)
{
	atomic_store(&ds__forked_raw, 1);
}

#ifdef DS__OWNER_HOOKS
/* libc's vfork, clone and _Fork are not in DS__REAL_FUNCS (the test build
 * that links the wrappers statically has no hooks here): looked up the same
 * way, once, by init.c's ds__real_find (an ENOSYS function when missing). */
static void (*real_vfork)(void), (*real_clone)(void), (*real_fork_raw)(void);

static void (*real(void (**slot)(void), const char *name))(void)
{
	void (*f)(void) = __atomic_load_n(slot, __ATOMIC_RELAXED);
	return f ? f : ds__real_find(slot, name);
}

/* Called by the vfork trampoline: raise the flag, return libc's vfork. */
__attribute__((used, visibility("hidden"))) void *ds__vfork_prep(void);
void *ds__vfork_prep(void)
{
	ds__forked_raw_note();
	return (void *)real(&real_vfork, "vfork");
}

/* vfork and __vfork: keep the stack exactly as the caller left it (the
 * child returns from libc's vfork into our caller, then the parent does):
 * align, call the C half, restore, jump. */
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork,@function\n"
        ".globl __vfork\n"
        ".type __vfork,@function\n"
        "vfork:\n"
        "__vfork:\n"
        "\t.cfi_startproc\n"
        "\tendbr64\n"
        "\tsubq $8, %rsp\n"
        "\t.cfi_adjust_cfa_offset 8\n"
        "\tcall ds__vfork_prep\n"
        "\taddq $8, %rsp\n"
        "\t.cfi_adjust_cfa_offset -8\n"
        "\tjmp *%rax\n"
        "\t.cfi_endproc\n"
        ".size vfork, .-vfork\n"
        ".size __vfork, .-__vfork\n");

typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);

/* The child runs fn on its own stack and never returns through here. */
DS__EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	ds__forked_raw_note();
	clone_fn f = (clone_fn)real(&real_clone, "clone");
	return f(fn, stack, flags, arg, ptid, tls, ctid);
}

/* glibc 2.34's fork without the handlers: the child copies our memory. */
DS__EXPORT pid_t _Fork(void)
{
	ds__forked_raw_note();
	pid_t (*f)(void) = (pid_t(*)(void))real(&real_fork_raw, "_Fork");
	return f();
}
#endif
