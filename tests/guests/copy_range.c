/* copy_file_range: between files in /dev/shm and between memfds, with and
 * without offset pointers, at the end, overlapping in one file, and the
 * errors Linux gives (flags, bad descriptors, directions, O_APPEND, pipes,
 * directories, across filesystems, bad pointers, negative offsets). */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_copy_file_range
#define SYS_copy_file_range 326
#endif

static long cfr(int in, long long *off_in, int out, long long *off_out, size_t len, unsigned flags) {
    return syscall(SYS_copy_file_range, in, off_in, out, off_out, len, flags);
}

static void say(const char *what, long r) {
    if (r < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%s: %ld\n", what, r);
}

static long offset(int fd) { return (long)lseek(fd, 0, SEEK_CUR); }

static void show(const char *what, int fd) {
    char buf[64] = {0};
    long n = pread(fd, buf, sizeof buf - 1, 0);
    printf("%s: %ld \"%s\"\n", what, n, buf);
}

int main(void) {
    char dir[64];
    strcpy(dir, "/dev/shm/copy_range_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char a[128], b[128], c[128];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    snprintf(c, sizeof c, "%s/c", dir);
    int src = open(a, O_RDWR | O_CREAT | O_EXCL, 0600);
    write(src, "0123456789", 10);
    lseek(src, 0, SEEK_SET);
    int dst = open(b, O_RDWR | O_CREAT | O_EXCL, 0600);

    say("null offsets", cfr(src, NULL, dst, NULL, 4, 0));
    printf("offsets %ld %ld\n", offset(src), offset(dst));
    long long oi = 8, oo = 1;
    say("given offsets, past the end", cfr(src, &oi, dst, &oo, 100, 0));
    printf("pointers %lld %lld, offsets %ld %ld\n", oi, oo, offset(src), offset(dst));
    show("dst", dst);
    say("at the end", cfr(src, &oi, dst, NULL, 100, 0));
    oi = 1000;
    say("beyond the end", cfr(src, &oi, dst, NULL, 1, 0));
    say("zero length", cfr(src, NULL, dst, NULL, 0, 0));
    long long x = 0, y = 2;
    say("same file, overlapping", cfr(dst, &x, dst, &y, 3, 0));
    y = 5;
    say("same file, apart", cfr(dst, &x, dst, &y, 2, 0));
    show("dst", dst);
    say("same fd, own offset", cfr(dst, NULL, dst, NULL, 1, 0));

    /* A bigger copy, several host chunks. */
    int big = open(c, O_RDWR | O_CREAT | O_EXCL, 0600);
    char *chunk = malloc(300000);
    for (int i = 0; i < 300000; i++) chunk[i] = (char)(i * 7 + i / 251);
    write(big, chunk, 300000);
    lseek(big, 0, SEEK_SET);
    ftruncate(dst, 0);
    lseek(dst, 0, SEEK_SET);
    long total = 0, r;
    while ((r = cfr(big, NULL, dst, NULL, 1 << 30, 0)) > 0) total += r;
    say("big copy end", r);
    printf("big total %ld\n", total);
    char *back = malloc(300000);
    printf("big same %d\n", pread(dst, back, 300000, 0) == 300000 && memcmp(back, chunk, 300000) == 0);

    /* Errors. */
    say("flags", cfr(src, NULL, dst, NULL, 1, 1));
    say("bad in", cfr(77, NULL, dst, NULL, 1, 0));
    say("bad out", cfr(src, NULL, 77, NULL, 1, 0));
    int ro = open(a, O_RDONLY), wo = open(b, O_WRONLY), app = open(b, O_WRONLY | O_APPEND);
    say("to read-only", cfr(src, NULL, ro, NULL, 1, 0));
    say("from write-only", cfr(wo, NULL, dst, NULL, 1, 0));
    say("to append", cfr(src, NULL, app, NULL, 1, 0));
    int pfd[2];
    pipe(pfd);
    write(pfd[1], "pipe", 4);
    say("from a pipe", cfr(pfd[0], NULL, dst, NULL, 4, 0));
    say("to a pipe", cfr(ro, NULL, pfd[1], NULL, 4, 0));
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    say("from a directory", cfr(d, NULL, dst, NULL, 4, 0));
    int path = open(a, O_PATH);
    say("from O_PATH", cfr(path, NULL, dst, NULL, 4, 0));
    say("bad pointer in", cfr(ro, (long long *)8, dst, NULL, 4, 0));
    say("bad pointer out", cfr(ro, NULL, dst, (long long *)8, 4, 0));
    long long neg = -1;
    say("negative offset", cfr(ro, &neg, dst, NULL, 4, 0));
    say("negative offset, no length", cfr(ro, &neg, dst, NULL, 0, 0));
    long long one = 1;
    say("wrapping offset", cfr(ro, NULL, dst, &one, (size_t)-1, 0));

    /* memfds: between two of them; a memfd and a /dev/shm file are on
     * different filesystems. */
    int m1 = (int)syscall(SYS_memfd_create, "one", 0), m2 = (int)syscall(SYS_memfd_create, "two", 0);
    write(m1, "memfd data", 10);
    lseek(m1, 0, SEEK_SET);
    say("memfd to memfd", cfr(m1, NULL, m2, NULL, 64, 0));
    show("m2", m2);
    say("memfd to /dev/shm", cfr(m1, &x, dst, NULL, 64, 0));

    unlink(a);
    unlink(b);
    unlink(c);
    rmdir(dir);
    return 0;
}
