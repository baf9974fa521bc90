/* ioctl FICLONE and FICLONERANGE between files in /dev/shm (tmpfs, which
 * cannot share extents): EOPNOTSUPP after Linux's checks, in its order: a
 * bad source descriptor (EBADF), a bad range pointer (EFAULT), files on
 * different filesystems (EXDEV), a directory (EISDIR), a pipe (EXDEV), a
 * write-only source, a read-only destination or O_APPEND (EBADF). It was
 * ENOTTY for all, which node's COPYFILE_FICLONE_FORCE reported. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define FICLONE_ 0x40049409
#define FICLONERANGE_ 0x4020940d

struct clone_range { int64_t src_fd; uint64_t src_offset, src_length, dest_offset; };

static void say(const char *what, long r) {
    printf("%-30s ", what);
    if (r < 0) print_errno(stdout, errno); else printf("%ld", r);
    printf("\n");
}

static long range(int dst, int src) {
    struct clone_range r = { src, 0, 0, 0 };
    return ioctl(dst, FICLONERANGE_, &r);
}

int main(void) {
    char dir[64], a[128], b[128], c[128];
    strcpy(dir, "/dev/shm/file_clone_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    snprintf(c, sizeof c, "%s/c", dir);
    int src = open(a, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (write(src, "0123456789", 10) != 10) return 1;
    int dst = open(b, O_RDWR | O_CREAT | O_EXCL, 0600);

    say("FICLONE", ioctl(dst, FICLONE_, src));
    say("FICLONERANGE", range(dst, src));
    say("FICLONE same file", ioctl(src, FICLONE_, src));
    say("FICLONE bad source", ioctl(dst, FICLONE_, 999));
    say("FICLONE bad destination", ioctl(999, FICLONE_, src));
    say("FICLONERANGE bad pointer", ioctl(dst, FICLONERANGE_, (void *)8));
    say("FICLONERANGE bad source", range(dst, 999));
    int mem = memfd_create("m", 0);
    say("FICLONE across filesystems", ioctl(dst, FICLONE_, mem));
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    say("FICLONE from a directory", ioctl(dst, FICLONE_, d));
    int p[2];
    if (pipe(p) < 0) return 1;
    say("FICLONE from a pipe", ioctl(dst, FICLONE_, p[0]));
    say("FICLONE into a pipe", ioctl(p[1], FICLONE_, src));
    int wo = open(a, O_WRONLY);
    say("FICLONE write-only source", ioctl(dst, FICLONE_, wo));
    int ro = open(b, O_RDONLY);
    say("FICLONE read-only destination", ioctl(ro, FICLONE_, src));
    int ap = open(b, O_WRONLY | O_APPEND);
    say("FICLONE O_APPEND destination", ioctl(ap, FICLONE_, src));
    int dst2 = open(c, O_WRONLY | O_CREAT | O_EXCL, 0600);
    say("FICLONE write-only destination", ioctl(dst2, FICLONE_, src));

    unlink(a);
    unlink(b);
    unlink(c);
    rmdir(dir);
    return 0;
}
