/* forkvm's vDSO: clock_gettime, gettimeofday, time, clock_getres and getcpu answered
 * inside the guest, from the time base the host keeps in the fast-path data page and the
 * TSC, so programs never make these system calls. Built by build.rs into a tiny shared
 * object (one read-only, executable segment) that the host places at a fixed guest
 * address and announces with AT_SYSINFO_EHDR.
 *
 * The data page is writable by the program: a program that overwrites it gets wrong
 * times, nothing else. Whenever the base does not cover the TSC now (not yet written,
 * or its piece of the time function has ended), the functions make the real system
 * call instead; the host answers from the same time function.
 *
 * FORKVM_TIME is the address of the time base (-D from build.rs, from forkvm-abi). */
#include <stdint.h>

#ifndef FORKVM_TIME
#error "build.rs passes -DFORKVM_TIME=<address>"
#endif

struct time_base {
    uint64_t generation;     /* nonzero once the host wrote the fields below */
    uint64_t tsc_start;      /* the piece of the time function covers */
    uint64_t tsc_end;        /* TSC values in [tsc_start, tsc_end) */
    uint64_t mono_ns;        /* CLOCK_MONOTONIC at tsc_start, in ns */
    int64_t real_minus_mono; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
    int64_t boot_minus_mono; /* CLOCK_BOOTTIME - CLOCK_MONOTONIC, ns */
    uint64_t mult;           /* ns = (tsc - tsc_start) * mult >> shift */
    uint64_t shift;
};

struct kts { int64_t sec; int64_t nsec; };
struct ktv { int64_t sec; int64_t usec; };

#define NSEC_PER_SEC 1000000000LL

static inline long sys2(long nr, long a, long b) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return r;
}

static inline long sys3(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

static inline uint64_t rdtsc(void) {
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* Monotonic ns now, or -1 when this piece of the time function does not cover
 * the TSC now (the host then answers, after starting the next piece). */
static int64_t mono_now(const volatile struct time_base *b) {
    if (!b->generation) return -1;
    uint64_t now = rdtsc(), start = b->tsc_start;
    if (now < start || now >= b->tsc_end) return -1;
    unsigned __int128 d = (unsigned __int128)(now - start) * b->mult;
    return (int64_t)(b->mono_ns + (uint64_t)(d >> (b->shift & 63)));
}

static void split(int64_t ns, struct kts *ts) {
    ts->sec = ns / NSEC_PER_SEC;
    ts->nsec = ns % NSEC_PER_SEC;
}

int __vdso_clock_gettime(int clk, struct kts *ts) {
    const volatile struct time_base *b = (const volatile struct time_base *)FORKVM_TIME;
    int64_t ns;
    switch (clk) {
    case 0: /* CLOCK_REALTIME */
    case 5: /* CLOCK_REALTIME_COARSE */
        ns = mono_now(b);
        if (ns < 0) break;
        split(ns + b->real_minus_mono, ts);
        return 0;
    case 1: /* CLOCK_MONOTONIC */
    case 6: /* CLOCK_MONOTONIC_COARSE */
        ns = mono_now(b);
        if (ns < 0) break;
        split(ns, ts);
        return 0;
    case 7: /* CLOCK_BOOTTIME */
        ns = mono_now(b);
        if (ns < 0) break;
        split(ns + b->boot_minus_mono, ts);
        return 0;
    }
    return (int)sys2(228, clk, (long)ts);
}

int __vdso_gettimeofday(struct ktv *tv, void *tz) {
    const volatile struct time_base *b = (const volatile struct time_base *)FORKVM_TIME;
    int64_t ns = mono_now(b);
    if (ns < 0 || tz) return (int)sys2(96, (long)tv, (long)tz);
    if (tv) {
        ns += b->real_minus_mono;
        tv->sec = ns / NSEC_PER_SEC;
        tv->usec = (ns % NSEC_PER_SEC) / 1000;
    }
    return 0;
}

long __vdso_time(long *t) {
    const volatile struct time_base *b = (const volatile struct time_base *)FORKVM_TIME;
    int64_t ns = mono_now(b);
    if (ns < 0) return sys2(201, (long)t, 0);
    long s = (long)((ns + b->real_minus_mono) / NSEC_PER_SEC);
    if (t) *t = s;
    return s;
}

int __vdso_clock_getres(int clk, struct kts *res) {
    switch (clk) {
    case 0: case 1: case 7:
        if (res) { res->sec = 0; res->nsec = 1; }
        return 0;
    }
    return (int)sys2(229, clk, (long)res);
}

/* One vCPU: every thread runs on CPU 0, node 0. */
long __vdso_getcpu(unsigned *cpu, unsigned *node, void *cache) {
    (void)cache;
    if (cpu) *cpu = 0;
    if (node) *node = 0;
    return 0;
}

/* The unprefixed names some libcs look up, as Linux's vDSO exports them. */
int clock_gettime(int, struct kts *) __attribute__((weak, alias("__vdso_clock_gettime")));
int gettimeofday(struct ktv *, void *) __attribute__((weak, alias("__vdso_gettimeofday")));
long time(long *) __attribute__((weak, alias("__vdso_time")));
int clock_getres(int, struct kts *) __attribute__((weak, alias("__vdso_clock_getres")));
long getcpu(unsigned *, unsigned *, void *) __attribute__((weak, alias("__vdso_getcpu")));

/* Keeps sys3 referenced for future calls without a warning. */
long __forkvm_vdso_syscall3(long nr, long a, long b, long c) __attribute__((visibility("hidden")));
long __forkvm_vdso_syscall3(long nr, long a, long b, long c) { return sys3(nr, a, b, c); }
