/* stat, lstat, fstatat, statx, access and faccessat of /proc's generated
 * files and directories, /etc files and devices, compared with Linux field
 * by field where the values are stable: the file type, /proc's permission
 * bits and sizes, device numbers, access() results, what /proc/self lists.
 * Devices are also reached through "." and "//" and a symlink (made in
 * /dev/shm), and opened to fstat. */
#define _GNU_SOURCE
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* statx's mode, by the raw call (older musl has no statx()). */
static int statx_mode(const char *path, unsigned *mode) {
    unsigned char buf[256];
    if (syscall(SYS_statx, AT_FDCWD, path, 0, 0x7ff, buf) < 0) return -1;
    *mode = buf[28] | buf[29] << 8;
    return 0;
}

static const char *type(mode_t m) {
    if (S_ISREG(m)) return "reg";
    if (S_ISDIR(m)) return "dir";
    if (S_ISLNK(m)) return "lnk";
    if (S_ISCHR(m)) return "chr";
    return "other";
}

static void err(const char *what) {
    printf("%s: ", what);
    print_errno(stdout, errno);
    printf("\n");
}

/* A generated /proc file: a read-only regular file of size 0. */
static void proc_file(const char *path) {
    struct stat st, lst, at;
    unsigned sx;
    if (stat(path, &st) < 0) { err(path); return; }
    if (lstat(path, &lst) < 0) { err(path); return; }
    if (fstatat(AT_FDCWD, path, &at, 0) < 0) { err(path); return; }
    if (statx_mode(path, &sx) < 0) { err(path); return; }
    printf("%s: %s %o size %lld, lstat %s %o, fstatat %s, statx %s %o, R_OK %d X_OK %d faccessat %d\n",
           path, type(st.st_mode), st.st_mode & 07777, (long long)st.st_size,
           type(lst.st_mode), lst.st_mode & 07777, type(at.st_mode), type(sx), sx & 07777, access(path, R_OK), access(path, X_OK),
           faccessat(AT_FDCWD, path, R_OK, 0));
    int fd = open(path, O_RDONLY);
    struct stat fst;
    if (fd < 0 || fstat(fd, &fst) < 0) { err(path); return; }
    char buf[64];
    printf("  fstat %s %o size %lld, reads %d\n", type(fst.st_mode), fst.st_mode & 07777,
           (long long)fst.st_size, read(fd, buf, sizeof buf) > 0);
    close(fd);
}

/* An /etc file: its type and access (its mode and size are the host's). */
static void etc_file(const char *path) {
    struct stat st;
    if (stat(path, &st) < 0) { err(path); return; }
    printf("%s: %s, R_OK %d\n", path, type(st.st_mode), access(path, R_OK));
}

static void dir(const char *path) {
    struct stat st, lst;
    if (stat(path, &st) < 0 || lstat(path, &lst) < 0) { err(path); return; }
    printf("%s: %s, lstat %s, R_OK|X_OK %d\n", path, type(st.st_mode), type(lst.st_mode),
           access(path, R_OK | X_OK));
}

static void device(const char *path, int open_it) {
    struct stat st;
    if (stat(path, &st) < 0) { err(path); return; }
    printf("%s: %s %u,%u", path, type(st.st_mode), major(st.st_rdev), minor(st.st_rdev));
    if (open_it) {
        int fd = open(path, O_RDWR);
        struct stat fst;
        if (fd < 0 || fstat(fd, &fst) < 0) { printf("\n"); err(path); return; }
        printf(", fstat %s %u,%u", type(fst.st_mode), major(fst.st_rdev), minor(fst.st_rdev));
        close(fd);
    }
    printf("\n");
}

/* Whether each of `names` is listed in `path`. */
static void lists(const char *path, const char *const *names) {
    DIR *d = opendir(path);
    if (!d) { err(path); return; }
    char seen[32] = {0};
    struct dirent *e;
    while ((e = readdir(d))) {
        for (int i = 0; names[i]; i++)
            if (strcmp(e->d_name, names[i]) == 0) seen[i] = 1;
    }
    printf("%s lists:", path);
    for (int i = 0; names[i]; i++) printf(" %s=%d", names[i], seen[i]);
    printf("\n");
    closedir(d);
}

int main(void) {
    const char *procs[] = {"/proc/self/status", "/proc/self/maps", "/proc/self/stat",
                           "/proc/self/statm", "/proc/meminfo", "/proc/cpuinfo", "/proc/stat"};
    for (size_t i = 0; i < sizeof procs / sizeof *procs; i++) proc_file(procs[i]);
    const char *etcs[] = {"/etc/hosts", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"};
    for (size_t i = 0; i < sizeof etcs / sizeof *etcs; i++) etc_file(etcs[i]);
    const char *dirs[] = {"/proc", "/proc/self", "/proc/self/fd", "/proc/self/task",
                          "/proc/thread-self", "/dev/fd"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) dir(dirs[i]);

    const char *self[] = {"status", "maps", "stat", "statm", "fd", "task", "exe", "cwd", ".", "..", NULL};
    lists("/proc/self", self);
    const char *top[] = {"self", "thread-self", "meminfo", "cpuinfo", "stat", NULL};
    lists("/proc", top);
    const char *fds[] = {"0", "1", "2", NULL};
    lists("/proc/self/fd", fds);

    device("/dev/null", 1);
    device("/dev/zero", 1);
    device("/dev/urandom", 1);
    device("/dev/random", 0);
    device("/dev/./null", 1);
    device("//dev//zero", 1);
    char link[64];
    snprintf(link, sizeof link, "/dev/shm/synthetic_stat_%d", getpid());
    if (symlink("/dev/null", link) < 0) { err("symlink"); return 1; }
    struct stat st;
    if (stat(link, &st) < 0) { err("link"); return 1; }
    printf("through a link: %s %u,%u\n", type(st.st_mode), major(st.st_rdev), minor(st.st_rdev));
    struct stat lst;
    lstat(link, &lst);
    printf("link lstat: %s\n", type(lst.st_mode));
    int fd = open(link, O_WRONLY);
    printf("write through link: %zd\n", write(fd, "abc", 3));
    close(fd);
    unlink(link);
    lstat("/dev/stdin", &lst);
    printf("/dev/stdin lstat: %s\n", type(lst.st_mode));
    return 0;
}
