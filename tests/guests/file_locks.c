/* File locks between processes, as on Linux: flock and POSIX record locks
 * taken in one process are seen by its children, a process never conflicts
 * with itself, closing any descriptor of a file drops its POSIX locks, a
 * waiting lock (F_SETLKW, flock without LOCK_NB) is granted when released,
 * and OFD locks belong to the open file description. Four children add to
 * a counter under flock: the total is exact only if the lock excludes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

static char path[4096], counter[4096];

static int setlk(int fd, int cmd, short type, off_t start, off_t len) {
    struct flock l = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    return fcntl(fd, cmd, &l) == 0 ? 0 : errno;
}

static void child_view(const char *when, pid_t parent) {
    int fd = open(path, O_RDWR);
    int e = setlk(fd, F_SETLK, F_WRLCK, 5, 1);
    struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    fcntl(fd, F_GETLK, &q);
    int fl = flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    printf("%s: child setlk %s, getlk %s by %s [%lld,+%lld), flock %s\n", when, e ? strerror(e) : "granted",
           q.l_type == F_UNLCK ? "unlocked" : q.l_type == F_WRLCK ? "write-locked" : "read-locked",
           q.l_type == F_UNLCK ? "-" : (q.l_pid == parent ? "parent" : "someone else"),
           (long long)(q.l_type == F_UNLCK ? 0 : q.l_start), (long long)(q.l_type == F_UNLCK ? 0 : q.l_len),
           fl ? strerror(fl) : "granted");
    fflush(stdout);
    _exit(0);
}

static void in_child(void (*f)(const char *, pid_t), const char *when) {
    pid_t parent = getpid();
    pid_t c = fork();
    if (c == 0) f(when, parent);
    waitpid(c, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    setvbuf(stdout, NULL, _IONBF, 0); /* children print too */
    snprintf(path, sizeof path, "%s/locked", argv[1]);
    snprintf(counter, sizeof counter, "%s/counter", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "0123456789", 10) != 10) return perror("open"), 1;

    in_child(child_view, "nothing held");
    int posix = setlk(fd, F_SETLK, F_WRLCK, 0, 10);
    int whole = flock(fd, LOCK_EX | LOCK_NB);
    printf("parent setlk [0,10): %d, flock: %d\n", posix, whole);
    in_child(child_view, "both held");

    /* The same process through another descriptor: no conflict. */
    int fd2 = open(path, O_RDWR);
    printf("same process, other fd: setlk %s\n", setlk(fd2, F_SETLK, F_WRLCK, 2, 3) ? "refused" : "granted");
    /* Closing that other descriptor drops every POSIX lock of the process. */
    close(fd2);
    flock(fd, LOCK_UN);
    in_child(child_view, "after closing another fd and LOCK_UN");

    /* OFD locks: two descriptions of one process conflict. */
    int a = open(path, O_RDWR), b = open(path, O_RDWR);
    int first = setlk(a, F_OFD_SETLK, F_WRLCK, 0, 1);
    int second = setlk(b, F_OFD_SETLK, F_WRLCK, 0, 1);
    printf("ofd: first %s, second %s\n", first ? "refused" : "granted", second == EAGAIN ? "EAGAIN" : "granted");
    close(a);
    close(b);

    /* A waiting lock is granted once the holder lets go. */
    setlk(fd, F_SETLK, F_WRLCK, 0, 1);
    int ready[2];
    if (pipe(ready) != 0) return 1;
    pid_t w = fork();
    if (w == 0) {
        int c = open(path, O_RDWR);
        char x;
        if (read(ready[0], &x, 1) != 1) _exit(3);
        int e = setlk(c, F_SETLKW, F_WRLCK, 0, 1);
        int f = flock(c, LOCK_EX);
        printf("waiter: setlkw %s, flock %s\n", e ? strerror(e) : "granted", f ? strerror(errno) : "granted");
        _exit(0);
    }
    flock(fd, LOCK_EX);
    if (write(ready[1], "x", 1) != 1) return 1;
    usleep(50000);
    setlk(fd, F_SETLK, F_UNLCK, 0, 0);
    flock(fd, LOCK_UN);
    waitpid(w, NULL, 0);

    /* Four processes add to one counter under flock. */
    int cf = open(counter, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (cf < 0 || pwrite(cf, "0\n", 2, 0) != 2) return 1;
    close(cf);
    for (int k = 0; k < 4; k++) {
        if (fork() == 0) {
            int f = open(counter, O_RDWR);
            for (int i = 0; i < 300; i++) {
                char buf[32] = {0};
                flock(f, LOCK_EX);
                if (pread(f, buf, 31, 0) < 0) _exit(1);
                int n = snprintf(buf, sizeof buf, "%d\n", atoi(buf) + 1);
                if (pwrite(f, buf, n, 0) != n) _exit(1);
                flock(f, LOCK_UN);
            }
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {}
    char buf[32] = {0};
    cf = open(counter, O_RDONLY);
    if (read(cf, buf, 31) < 0) return 1;
    printf("counter: %s", buf);
    return 0;
}
