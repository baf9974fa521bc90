/* Shared helpers for the forkvm guest test programs. Header-only. */
#ifndef FORKVM_GUEST_COMMON_H
#define FORKVM_GUEST_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

/* Symbolic name of an errno value, so output does not depend on strerror() wording
 * (which differs between glibc and musl). */
static inline const char *errno_name(int e)
{
    switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case ENXIO: return "ENXIO";
    case E2BIG: return "E2BIG";
    case ENOEXEC: return "ENOEXEC";
    case EBADF: return "EBADF";
    case ECHILD: return "ECHILD";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case ENODEV: return "ENODEV";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case ENOTTY: return "ENOTTY";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case ESPIPE: return "ESPIPE";
    case EROFS: return "EROFS";
    case EPIPE: return "EPIPE";
    case EDOM: return "EDOM";
    case ERANGE: return "ERANGE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOSYS: return "ENOSYS";
    case ELOOP: return "ELOOP";
    case EOVERFLOW: return "EOVERFLOW";
    case ENOTSUP: return "ENOTSUP";
    case EADDRINUSE: return "EADDRINUSE";
    case ECONNREFUSED: return "ECONNREFUSED";
    default: return NULL;
    }
}

/* Print "-ENAME" (or "-E<number>" for names not in the table). */
static inline void print_errno(FILE *f, int e)
{
    const char *n = errno_name(e);
    if (n)
        fprintf(f, "-%s", n);
    else
        fprintf(f, "-E%d", e);
}

/* 64-bit FNV-1a, used as a stable checksum. */
static inline uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
#define FNV1A_INIT 0xcbf29ce484222325ULL

#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Waits (up to ~5 s) until process `pid` sleeps in a call: its state in
 * /proc/<pid>/stat is S. */
static inline void wait_until_asleep(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int tries = 0; tries < 5000; tries++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
        if (f) fclose(f);
        stat[n] = 0;
        char *close = strrchr(stat, ')');
        if (close && close[1] == ' ' && close[2] == 'S') return;
        usleep(1000);
    }
}

#endif
