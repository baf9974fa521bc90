/* sync, syncfs and sync_file_range (coreutils' `sync -f FILE` failed: they
 * were ENOSYS), in the directory given as argv[1]: on a file, a directory,
 * a pipe, a socket and /dev/null, and Linux's errors and their order (a bad
 * or O_PATH descriptor is EBADF before bad flags or range are EINVAL, and a
 * pipe is ESPIPE only once those pass). */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_syncfs
#define SYS_syncfs 306
#endif
#ifndef SYS_sync_file_range
#define SYS_sync_file_range 277
#endif

static void say(const char *what, long r) {
    if (r < 0) { printf("%-32s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-32s %ld\n", what, r);
}

static long sfr(int fd, long long off, long long n, unsigned long flags) {
    return syscall(SYS_sync_file_range, fd, off, n, flags);
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) < 0) { perror("chdir"); return 1; }
    say("sync", syscall(SYS_sync));
    int f = open("data", O_RDWR | O_CREAT | O_TRUNC, 0600);
    say("write", write(f, "hello", 5));
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    int path = open("data", O_PATH);
    int null = open("/dev/null", O_WRONLY);
    int p[2], s[2];
    if (pipe(p) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, s) < 0) { perror("pipe"); return 1; }

    say("syncfs file", syscall(SYS_syncfs, f));
    say("syncfs dir", syscall(SYS_syncfs, dir));
    say("syncfs pipe", syscall(SYS_syncfs, p[1]));
    say("syncfs socket", syscall(SYS_syncfs, s[0]));
    say("syncfs /dev/null", syscall(SYS_syncfs, null));
    say("syncfs O_PATH", syscall(SYS_syncfs, path));
    say("syncfs bad fd", syscall(SYS_syncfs, 999));
    say("syncfs -1", syscall(SYS_syncfs, -1));

    say("sfr file", sfr(f, 0, 0, 7));
    say("sfr file range", sfr(f, 1, 3, 2));
    say("sfr file no flags", sfr(f, 0, 100, 0));
    say("sfr dir", sfr(dir, 0, 0, 2));
    say("sfr bad flags", sfr(f, 0, 0, 8));
    say("sfr high flag bits", sfr(f, 0, 0, 0x100000000ul | 2));
    say("sfr negative offset", sfr(f, -1, 0, 2));
    say("sfr negative length", sfr(f, 10, -5, 2));
    say("sfr end overflows", sfr(f, INT64_MAX, 1, 2));
    say("sfr pipe", sfr(p[0], 0, 0, 2));
    say("sfr pipe bad flags", sfr(p[0], 0, 0, 8));
    say("sfr socket", sfr(s[1], 0, 0, 2));
    say("sfr /dev/null", sfr(null, 0, 0, 2));
    say("sfr O_PATH", sfr(path, 0, 0, 2));
    say("sfr O_PATH bad flags", sfr(path, 0, 0, 8));
    say("sfr bad fd bad flags", sfr(999, -1, 0, 8));
    say("fsync O_PATH", fsync(path));
    say("fdatasync file", fdatasync(f));
    return 0;
}
