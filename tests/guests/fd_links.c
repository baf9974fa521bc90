/* readlink of /proc/self/fd/N for each kind of file, /proc/self/cwd (read
 * and followed), /proc/self/exe, /dev/stdin and a closed fd. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* The link of `path`, with the scratch directory shown as DIR. */
static void show(const char *what, const char *path) {
    char link[512] = {0};
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); return; }
    size_t d = strlen(dir);
    if (strncmp(link, dir, d) == 0) printf("%s: DIR%s\n", what, link + d);
    else printf("%s: %s\n", what, link);
}

static void show_fd(const char *what, int fd) {
    char at[64];
    snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
    show(what, at);
}

/* Whether fd's link reads "<kind>:[<its inode>]". */
static void by_inode(const char *what, int fd, const char *kind) {
    char at[64], link[128] = {0}, want[128];
    struct stat st;
    fstat(fd, &st);
    snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
    readlink(at, link, sizeof link - 1);
    snprintf(want, sizeof want, "%s:[%lu]", kind, (unsigned long)st.st_ino);
    printf("%s: %s\n", what, strcmp(link, want) == 0 ? "matches fstat" : link);
}

int main(void) {
    strcpy(dir, "/dev/shm/fdlinks_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char file[128];
    snprintf(file, sizeof file, "%s/file", dir);
    int f = open(file, O_CREAT | O_RDWR, 0600);
    show_fd("file", f);
    int d = open(dir, O_RDONLY | O_DIRECTORY);
    show_fd("directory", d);
    int pth = open(file, O_PATH);
    show_fd("O_PATH", pth);
    unlink(file);
    show_fd("deleted file", f);
    int p[2];
    pipe(p);
    by_inode("pipe read end", p[0], "pipe");
    by_inode("pipe write end", p[1], "pipe");
    int s[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, s);
    by_inode("socket", s[0], "socket");
    int null = open("/dev/null", O_RDONLY);
    show_fd("/dev/null", null);
    int ev = eventfd(0, 0);
    show_fd("eventfd", ev);
    show_fd("closed fd", 999);
    show("/dev/stdin", "/dev/stdin");
    show("/dev/fd", "/dev/fd");
    show("/dev/fd/5", "/dev/fd/5");

    /* /proc/self/cwd: the working directory, as a link and as a way in. */
    char cwd[512];
    getcwd(cwd, sizeof cwd);
    char link[512] = {0};
    readlink("/proc/self/cwd", link, sizeof link - 1);
    printf("cwd link is getcwd: %d\n", strcmp(link, cwd) == 0);
    chdir(dir);
    show("cwd after chdir", "/proc/self/cwd");
    close(open("x", O_CREAT | O_WRONLY, 0600));
    struct stat st;
    printf("stat /proc/self/cwd/x: %d\n", stat("/proc/self/cwd/x", &st) == 0 && S_ISREG(st.st_mode));
    printf("stat /proc/self/cwd is dir: %d\n", stat("/proc/self/cwd", &st) == 0 && S_ISDIR(st.st_mode));
    int x = open("/proc/self/cwd/x", O_RDONLY);
    printf("open /proc/self/cwd/x: %d\n", x >= 0);
    show_fd("opened through cwd", x);
    unlink("x");
    chdir("/");

    /* /proc/self/exe: the program (its name). */
    memset(link, 0, sizeof link);
    readlink("/proc/self/exe", link, sizeof link - 1);
    const char *base = strrchr(link, '/');
    printf("exe: %s\n", base ? base + 1 : link);
    printf("rmdir: %d\n", rmdir(dir));
    return 0;
}
