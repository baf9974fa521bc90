/* Calls pointer-taking syscalls with bad pointers, bad lengths and bad fds, printing one
 * line per call: "<label>: ok" or "<label>: -ENAME". Finishes with "survived".
 *
 * Usage: hostile DIR FILE [SECTION,...]
 *   DIR: a readable directory, FILE: a readable regular file of at least 16 bytes; under
 *   forkvm both must be inside an --allow-read root.
 *   SECTION: bad-writes, readonly-writes, bad-reads, lengths, values, fds (default: all), so
 *   that a sandbox failure in one section (e.g. the program's own code being overwritten)
 *   does not hide the results of the others.
 *
 * Every call goes through syscall(2) so libc does no checking or caching of its own. The
 * native results are the reference: Linux returns EFAULT for pointers into unmapped memory,
 * the kernel half, non-canonical addresses, ranges that wrap around, and for writes into
 * read-only memory (our own .text/.rodata). The guest-kernel addresses (GDT, IDT, page
 * tables at the bottom of forkvm's guest memory) are unmapped in a native process, so a
 * sandbox that lets the guest read or write them shows up as a difference. */
#define _GNU_SOURCE
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef STATX_BASIC_STATS
#define STATX_BASIC_STATS 0x7ffU
#endif
#define ARCH_GET_FS 0x1003

static void report(const char *label, long r, int err)
{
    printf("%s: ", label);
    if (r >= 0 || err == 0)
        printf("ok");
    else
        print_errno(stdout, err);
    printf("\n");
}

#define T(label, ...)                                                                              \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = syscall(__VA_ARGS__);                                                            \
        report(label, r_, errno);                                                                  \
    } while (0)

struct bad {
    const char *name;
    uintptr_t addr;
};

/* Addresses no process may read or write. */
static const struct bad BAD[] = {
    {"null", 0},
    {"gdt", 0x1000},
    {"idt", 0x2000},
    {"stub", 0x5000},
    {"pagetables", 0x10000},
    {"64MiB-4K", 0x3fff000},
    {"high", 0x7fff00000000ULL},
    {"noncanonical", 0x0000800000000000ULL},
    {"kernel", 0xffff800000000000ULL},
    {"wrap", 0xfffffffffffffff8ULL},
};
#define NBAD (sizeof BAD / sizeof BAD[0])

/* Readable but not writable memory of this very program. */
static const char rodata_block[4096] = {1, 2, 3};
static struct bad RO[2];
#define NRO (sizeof RO / sizeof RO[0])

static char bss_buf[4096];

/* The sections selected on the command line (NULL: all). */
static const char *sections;

static int section(const char *name)
{
    if (!sections)
        return 1;
    size_t n = strlen(name);
    for (const char *p = sections; (p = strstr(p, name)) != NULL; p += n) {
        if ((p == sections || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    }
    return 0;
}

static char label[256];
static const char *L(const char *fmt, const char *name)
{
    snprintf(label, sizeof label, fmt, name);
    return label;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: hostile DIR FILE [SECTION,...]\n");
        return 2;
    }
    const char *dir = argv[1];
    const char *file = argv[2];
    sections = argc > 3 ? argv[3] : NULL;
    RO[0].name = "text";
    RO[0].addr = (uintptr_t)&main;
    RO[1].name = "rodata";
    RO[1].addr = (uintptr_t)rodata_block;

    int fd = open(file, O_RDONLY);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || dfd < 0) {
        printf("setup failed: cannot open %s or %s\n", file, dir);
        return 2;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 16) {
        printf("setup failed: %s too small\n", file);
        return 2;
    }

    char stack_buf[512];
    struct stat sbuf;
    struct timespec ts = {0, 1000};
    sigset_t set;
    sigemptyset(&set);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    struct iovec iov;

    /* --- bad pointers the kernel must write into: unmapped ones, then our read-only memory --- */
    for (int pass = 0; pass < 2; pass++) {
        if (!section(pass == 0 ? "bad-writes" : "readonly-writes"))
            continue;
        const struct bad *list = pass == 0 ? BAD : RO;
        size_t n = pass == 0 ? NBAD : NRO;
        for (size_t i = 0; i < n; i++) {
            const char *nm = list[i].name;
            void *p = (void *)list[i].addr;
            lseek(fd, 0, SEEK_SET);
            T(L("read(fd, %s, 16)", nm), SYS_read, fd, p, 16);
            T(L("pread64(fd, %s, 16, 0)", nm), SYS_pread64, fd, p, 16, 0);
            iov.iov_base = p;
            iov.iov_len = 16;
            lseek(fd, 0, SEEK_SET);
            T(L("readv(fd, [{%s, 16}], 1)", nm), SYS_readv, fd, &iov, 1);
            T(L("fstat(fd, %s)", nm), SYS_fstat, fd, p);
            T(L("stat(dir, %s)", nm), SYS_stat, dir, p);
            T(L("lstat(dir, %s)", nm), SYS_lstat, dir, p);
            T(L("newfstatat(AT_FDCWD, dir, %s, 0)", nm), SYS_newfstatat, AT_FDCWD, dir, p, 0);
            T(L("statx(AT_FDCWD, dir, 0, BASIC, %s)", nm), SYS_statx, AT_FDCWD, dir, 0, STATX_BASIC_STATS,
              p);
            lseek(dfd, 0, SEEK_SET);
            T(L("getdents64(dirfd, %s, 4096)", nm), SYS_getdents64, dfd, p, 4096);
            T(L("getcwd(%s, 256)", nm), SYS_getcwd, p, 256);
            T(L("uname(%s)", nm), SYS_uname, p);
            T(L("sysinfo(%s)", nm), SYS_sysinfo, p);
            T(L("clock_gettime(MONOTONIC, %s)", nm), SYS_clock_gettime, CLOCK_MONOTONIC, p);
            T(L("gettimeofday(%s, NULL)", nm), SYS_gettimeofday, p, NULL);
            T(L("time(%s)", nm), SYS_time, p);
            T(L("getrandom(%s, 32, 0)", nm), SYS_getrandom, p, 32, 0);
            T(L("rt_sigaction(SIGUSR1, NULL, %s, 8)", nm), SYS_rt_sigaction, SIGUSR1, NULL, p, 8);
            T(L("rt_sigprocmask(SIG_BLOCK, NULL, %s, 8)", nm), SYS_rt_sigprocmask, SIG_BLOCK, NULL, p, 8);
            T(L("sigaltstack(NULL, %s)", nm), SYS_sigaltstack, NULL, p);
            T(L("prlimit64(0, NOFILE, NULL, %s)", nm), SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, p);
            T(L("getrlimit(NOFILE, %s)", nm), SYS_getrlimit, RLIMIT_NOFILE, p);
            T(L("sched_getaffinity(0, 128, %s)", nm), SYS_sched_getaffinity, 0, 128, p);
            T(L("pipe2(%s, 0)", nm), SYS_pipe2, p, 0);
            T(L("arch_prctl(ARCH_GET_FS, %s)", nm), SYS_arch_prctl, ARCH_GET_FS, p);
        }
    }

    /* --- bad pointers the kernel must read from --- */
    for (size_t i = 0; i < NBAD && section("bad-reads"); i++) {
        const char *nm = BAD[i].name;
        void *p = (void *)BAD[i].addr;
        T(L("write(1, %s, 16)", nm), SYS_write, 1, p, 16);
        iov.iov_base = p;
        iov.iov_len = 16;
        T(L("writev(1, [{%s, 16}], 1)", nm), SYS_writev, 1, &iov, 1);
        T(L("writev(1, %s, 1)", nm), SYS_writev, 1, p, 1);
        T(L("readv(fd, %s, 1)", nm), SYS_readv, fd, p, 1);
        T(L("open(%s, O_RDONLY)", nm), SYS_open, p, O_RDONLY);
        T(L("openat(AT_FDCWD, %s, O_RDONLY)", nm), SYS_openat, AT_FDCWD, p, O_RDONLY);
        T(L("stat(%s, buf)", nm), SYS_stat, p, &sbuf);
        T(L("lstat(%s, buf)", nm), SYS_lstat, p, &sbuf);
        T(L("newfstatat(AT_FDCWD, %s, buf, 0)", nm), SYS_newfstatat, AT_FDCWD, p, &sbuf, 0);
        T(L("statx(AT_FDCWD, %s, 0, BASIC, buf)", nm), SYS_statx, AT_FDCWD, p, 0, STATX_BASIC_STATS,
          bss_buf);
        T(L("access(%s, F_OK)", nm), SYS_access, p, F_OK);
        T(L("faccessat(AT_FDCWD, %s, F_OK, 0)", nm), SYS_faccessat, AT_FDCWD, p, F_OK, 0);
        T(L("readlink(%s, buf, 64)", nm), SYS_readlink, p, stack_buf, 64);
        T(L("readlinkat(AT_FDCWD, %s, buf, 64)", nm), SYS_readlinkat, AT_FDCWD, p, stack_buf, 64);
        T(L("nanosleep(%s, NULL)", nm), SYS_nanosleep, p, NULL);
        T(L("rt_sigaction(SIGUSR1, %s, NULL, 8)", nm), SYS_rt_sigaction, SIGUSR1, p, NULL, 8);
        T(L("rt_sigprocmask(SIG_BLOCK, %s, NULL, 8)", nm), SYS_rt_sigprocmask, SIG_BLOCK, p, NULL, 8);
        T(L("sigaltstack(%s, NULL)", nm), SYS_sigaltstack, p, NULL);
        T(L("prlimit64(0, NOFILE, %s, NULL)", nm), SYS_prlimit64, 0, RLIMIT_NOFILE, p, NULL);
        T(L("poll(%s, 1, 0)", nm), SYS_poll, p, 1, 0);
    }

    /* --- lengths --- */
    if (section("lengths")) {
        T("read(fd, NULL, 0)", SYS_read, fd, NULL, 0);
        T("write(1, NULL, 0)", SYS_write, 1, NULL, 0);
        T("getrandom(NULL, 0, 0)", SYS_getrandom, NULL, 0, 0);
        lseek(fd, 0, SEEK_SET);
        T("read(fd, stack_buf, 1<<40)", SYS_read, fd, stack_buf, 1ULL << 40);
        /* Only 5 bytes remain, so Linux copies just those: the huge length alone is no error. */
        T("pread64(fd, bss_buf, 1<<40, size-5)", SYS_pread64, fd, bss_buf, 1ULL << 40, st.st_size - 5);
        iov.iov_base = bss_buf;
        iov.iov_len = (size_t)-1;
        T("writev(1, [{bss_buf, -1}], 1)", SYS_writev, 1, &iov, 1);
        T("readv(fd, iov, 100000)", SYS_readv, fd, &iov, 100000);
        T("readv(fd, iov, -1)", SYS_readv, fd, &iov, -1);
        T("getcwd(buf, 1)", SYS_getcwd, stack_buf, 1);
        T("getcwd(buf, 0)", SYS_getcwd, stack_buf, 0);
        T("sched_getaffinity(0, 1, buf)", SYS_sched_getaffinity, 0, 1, stack_buf);
        T("poll(&pfd, 1<<30, 0)", SYS_poll, &pfd, 1UL << 30, 0);
    }

    /* --- bad values --- */
    if (section("values")) {
        T("clock_gettime(9999, buf)", SYS_clock_gettime, 9999, &ts);
        struct timespec bad_ts = {0, 2000000000L};
        T("nanosleep({0, 2e9}, NULL)", SYS_nanosleep, &bad_ts, NULL);
        struct timespec neg_ts = {-1, 0};
        T("nanosleep({-1, 0}, NULL)", SYS_nanosleep, &neg_ts, NULL);
        /* bss_buf is all zeros: a valid kernel sigaction with handler SIG_DFL */
        T("rt_sigaction(SIGKILL, act, NULL, 8)", SYS_rt_sigaction, SIGKILL, bss_buf, NULL, 8);
        T("rt_sigaction(SIGUSR1, NULL, NULL, 4)", SYS_rt_sigaction, SIGUSR1, NULL, NULL, 4);
        T("rt_sigaction(0, NULL, NULL, 8)", SYS_rt_sigaction, 0, NULL, NULL, 8);
        T("rt_sigaction(65, NULL, NULL, 8)", SYS_rt_sigaction, 65, NULL, NULL, 8);
        T("rt_sigprocmask(99, set, NULL, 8)", SYS_rt_sigprocmask, 99, &set, NULL, 8);
        T("arch_prctl(0x9999, 0)", SYS_arch_prctl, 0x9999, 0);
        T("getrandom(buf, 32, 0xffff)", SYS_getrandom, stack_buf, 32, 0xffff);
        T("prlimit64(0, 999, NULL, buf)", SYS_prlimit64, 0, 999, NULL, stack_buf);
        T("pipe2(buf, 0xdead0000)", SYS_pipe2, stack_buf, 0xdead0000);
        T("lseek(fd, -1, SEEK_SET)", SYS_lseek, fd, -1L, SEEK_SET);
        T("lseek(fd, 0, 99)", SYS_lseek, fd, 0, 99);
        T("set_tid_address(kernel) (no dereference)", SYS_set_tid_address, 0xffff800000000000ULL);
        T("syscall 999", 999);
        T("syscall 100000", 100000);
        T("syscall -1", -1L);
    }

    /* --- bad fds --- */
    if (section("fds")) {
        T("read(9999, buf, 16)", SYS_read, 9999, stack_buf, 16);
        T("read(-1, buf, 16)", SYS_read, -1, stack_buf, 16);
        T("read(0x7fffffff, buf, 16)", SYS_read, 0x7fffffff, stack_buf, 16);
        T("write(9999, buf, 16)", SYS_write, 9999, stack_buf, 16);
        T("write(fd opened O_RDONLY, buf, 1)", SYS_write, fd, stack_buf, 1);
        T("read(dirfd, buf, 16)", SYS_read, dfd, stack_buf, 16);
        T("pread64(9999, buf, 16, 0)", SYS_pread64, 9999, stack_buf, 16, 0);
        iov.iov_base = stack_buf;
        iov.iov_len = 16;
        T("readv(9999, iov, 1)", SYS_readv, 9999, &iov, 1);
        T("writev(9999, iov, 1)", SYS_writev, 9999, &iov, 1);
        T("fstat(9999, buf)", SYS_fstat, 9999, &sbuf);
        T("getdents64(9999, buf, 512)", SYS_getdents64, 9999, stack_buf, 512);
        T("getdents64(regular fd, buf, 512)", SYS_getdents64, fd, stack_buf, 512);
        T("newfstatat(9999, \"x\", buf, 0)", SYS_newfstatat, 9999, "x", &sbuf, 0);
        T("openat(9999, \"x\", O_RDONLY)", SYS_openat, 9999, "x", O_RDONLY);
        T("lseek(9999, 0, SEEK_SET)", SYS_lseek, 9999, 0, SEEK_SET);
        T("dup(9999)", SYS_dup, 9999);
        T("fcntl(9999, F_GETFD)", SYS_fcntl, 9999, F_GETFD);
        T("close(9999)", SYS_close, 9999);
        pfd.fd = 9999;
        T("poll([{9999}], 1, 0) (POLLNVAL, not an error)", SYS_poll, &pfd, 1, 0);
    }

    printf("survived\n");
    return 0;
}
