/* chmod, chown and utimensat of /proc/self/fd/N change the file or
 * directory open there, as on Linux (they were EPERM): glibc's fchmodat
 * with AT_SYMLINK_NOFOLLOW opens the path O_PATH and chmods
 * /proc/self/fd/N, and GNU tar -p sets directory modes that way. A symlink
 * opened O_PATH|O_NOFOLLOW cannot be chmodded (EOPNOTSUPP). Works in the
 * directory given as argv[1]. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-34s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-34s ok\n", what);
}

static void mode(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) { say(path, -1); return; }
    printf("%-34s %o\n", path, st.st_mode & 07777);
}

static char link_of[64];
static const char *fdpath(int fd) {
    snprintf(link_of, sizeof link_of, "/proc/self/fd/%d", fd);
    return link_of;
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) < 0) { perror("chdir"); return 1; }
    umask(022);
    close(open("file", O_WRONLY | O_CREAT | O_TRUNC, 0600));
    mkdir("dir", 0700);
    symlink("file", "link");

    int f = open("file", O_PATH);
    int d = open("dir", O_PATH | O_DIRECTORY);
    int l = open("link", O_PATH | O_NOFOLLOW);
    int r = open("file", O_RDONLY);
    say("chmod fd path of O_PATH file", chmod(fdpath(f), 0640));
    mode("file");
    say("chmod fd path of O_PATH dir", chmod(fdpath(d), 0751));
    mode("dir");
    say("chmod fd path of symlink", chmod(fdpath(l), 0700));
    mode("file");
    say("chmod /dev/fd of read-only fd", chmod(r == 3 ? "/dev/fd/3" : fdpath(r), 0604));
    mode("file");
    say("fchmodat NOFOLLOW file", fchmodat(AT_FDCWD, "file", 0644, AT_SYMLINK_NOFOLLOW));
    say("fchmodat NOFOLLOW dir", fchmodat(AT_FDCWD, "dir", 0755, AT_SYMLINK_NOFOLLOW));
    mode("file");
    mode("dir");
    say("chown fd path -1 -1", chown(fdpath(d), -1, -1));
    struct timespec ts[2] = {{1000000, 0}, {2000000, 0}};
    say("utimensat fd path", utimensat(AT_FDCWD, fdpath(d), ts, 0));
    struct stat st;
    stat("dir", &st);
    printf("dir times %ld %ld\n", (long)st.st_atime, (long)st.st_mtime);
    say("chmod fd path of closed fd", chmod("/proc/self/fd/99", 0600));
    return 0;
}
