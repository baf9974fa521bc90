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
#define FORKVM_HYPERCALL_RESPOND 0x666f0003L

/* The request a handler receives (forkvm serve). Strings are not
 * NUL-terminated: use the lengths. Headers are "Name: value" lines
 * separated by '\n'. Valid until the handler returns. */
struct forkvm_request {
    const char *method;  unsigned long method_len;
    const char *path;    unsigned long path_len;
    const char *query;   unsigned long query_len;
    const char *headers; unsigned long headers_len;
    const char *body;    unsigned long body_len;
};
_Static_assert(sizeof(struct forkvm_request) == 80, "forkvm_request layout");

typedef void (*forkvm_handler)(const struct forkvm_request *req);

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

static inline long forkvm_hypercall5(long nr, long a, long b, long c, long d, long e)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

/* Says ready and registers the request handler for `forkvm serve`.
 * Natively (or under `forkvm run`) it returns at once. */
static inline long forkvm_serve(forkvm_handler handler)
{
    long ret = forkvm_hypercall5(FORKVM_HYPERCALL_READY, (long)handler, 0, 0, 0, 0);
    return ret < 0 ? 0 : ret;
}

/* Answers the current request. `headers` holds "Name: value" lines
 * separated by '\n' (may be empty). Returns 0, or a negative errno. */
static inline long forkvm_respond(int status, const char *headers, unsigned long headers_len,
                                  const void *body, unsigned long body_len)
{
    return forkvm_hypercall5(FORKVM_HYPERCALL_RESPOND, status, (long)headers, (long)headers_len,
                             (long)body, (long)body_len);
}

/* Stops here for a debugger: an `int3`. Under `forkvm serve --gdb ADDR` the
 * request waits for gdb on ADDR and continues after it when gdb says so;
 * under gdb natively it is a SIGTRAP stop; with no debugger at all it kills
 * the program with SIGTRAP, as any int3 does. */
static inline void forkvm_breakpoint(void)
{
    __asm__ volatile("int3" ::: "memory");
}

#endif /* FORKVM_H */
