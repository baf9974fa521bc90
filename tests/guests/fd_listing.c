/* Reading /proc/self/fd while closing the descriptors found, as python's
 * subprocess does in a child before exec (close_fds with pass_fds): every
 * descriptor is found, however many close between two getdents64 calls
 * (a listing placed by index skipped as many entries as had closed). */
#define _GNU_SOURCE
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dent {
    unsigned long long ino;
    long long off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

int main(void) {
    int fds[12];
    for (int i = 0; i < 12; i++) fds[i] = open("/dev/null", O_RDONLY);
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
    if (dir < 0) { perror("open /proc/self/fd"); return 1; }
    /* A small buffer: a few entries per call. */
    char buf[80];
    for (;;) {
        long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
        if (n < 0) { perror("getdents64"); return 1; }
        if (n == 0) break;
        for (long at = 0; at < n;) {
            struct dent *d = (struct dent *)(buf + at);
            at += d->reclen;
            int fd = atoi(d->name);
            if (d->name[0] != '.' && fd > 2 && fd != dir) close(fd);
        }
    }
    close(dir);
    int left = 0;
    for (int i = 0; i < 12; i++)
        if (fcntl(fds[i], F_GETFD) >= 0) left++;
    printf("descriptors left open: %d\n", left);
    return 0;
}
