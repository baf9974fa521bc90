/* forkvm guest API for C and C++.
 *
 * Generated from crates/forkvm-abi by `forkvm guest-header`; do not edit.
 *
 * A program initialises itself, then calls forkvm_ready(): forkvm freezes it
 * there as the master. The host then calls functions exported with
 * FORKVM_EXPORT in copy-on-write forks of it. Under plain `forkvm run` (or
 * natively) forkvm_ready() does nothing.
 */
#ifndef FORKVM_H
#define FORKVM_H

#define FORKVM_HYPERCALL_READY 0x666f0001L
#define FORKVM_HYPERCALL_CALL_RETURN 0x666f0002L

/* Keep a function and its symbol so the host can call it by name. */
#define FORKVM_EXPORT __attribute__((used, noinline, visibility("default")))

/* Tells forkvm the program is initialised. Returns 0 (also natively). */
static inline long forkvm_ready(void)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(FORKVM_HYPERCALL_READY)
                     : "rcx", "r11", "memory");
    /* Natively the kernel answers -ENOSYS: report success either way. */
    return ret < 0 ? 0 : ret;
}

#endif /* FORKVM_H */
