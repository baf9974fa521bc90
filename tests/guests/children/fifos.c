/* Named FIFOs (mkfifo) with Linux's open semantics, in one process and
 * between a parent and its children: a non-blocking write-open without a
 * reader is ENXIO, a non-blocking read-open succeeds (EOF, no hang-up until
 * a writer came), O_RDWR never blocks, blocking opens wait for their
 * partner, and data flows as through a pipe, more than a pipe holds. */
#include "../common.h"
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64], path[96];

static void say(const char *what, long r) {
    if (r < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%s: %ld\n", what, r);
    fflush(stdout);
}

static int revents(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) < 0) return -1;
    return p.revents;
}

#define BIG (200 * 1000)

/* Writes BIG bytes (a pattern) to the FIFO, opened for writing (blocking). */
static void writer_child(void) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) _exit(10);
    static char buf[BIG];
    for (int i = 0; i < BIG; i++) buf[i] = (char)(i % 251);
    size_t done = 0;
    while (done < BIG) {
        ssize_t n = write(fd, buf + done, BIG - done);
        if (n <= 0) _exit(11);
        done += (size_t)n;
    }
    close(fd);
    _exit(0);
}

/* Reads the FIFO to EOF; returns the byte count, or -1 on a wrong byte. */
static long read_all(int fd) {
    static char buf[8192];
    long total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) return -2;
        if (n == 0) return total;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != (char)((total + i) % 251)) return -1;
        total += n;
    }
}

int main(void) {
    strcpy(dir, "/dev/shm/fifos_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(path, sizeof path, "%s/p", dir);
    say("mkfifo", mkfifo(path, 0600));
    struct stat st;
    say("stat", stat(path, &st));
    printf("is fifo: %d mode %o\n", S_ISFIFO(st.st_mode), st.st_mode & 0777);

    /* Alone: non-blocking opens. */
    say("write-open nonblock, no reader", open(path, O_WRONLY | O_NONBLOCK));
    int r = open(path, O_RDONLY | O_NONBLOCK);
    say("read-open nonblock", r >= 0 ? 0 : -1);
    char buf[64];
    say("read, no writer yet", read(r, buf, sizeof buf));
    printf("poll before a writer: %#x\n", revents(r));
    int w = open(path, O_WRONLY | O_NONBLOCK);
    say("write-open nonblock, with reader", w >= 0 ? 0 : -1);
    say("write", write(w, "hello", 5));
    printf("poll with data: %#x\n", revents(r));
    ssize_t n = read(r, buf, sizeof buf);
    printf("read: %.*s\n", (int)(n > 0 ? n : 0), buf);
    say("read, writer open and empty", read(r, buf, sizeof buf));
    struct stat fst;
    say("fstat", fstat(w, &fst));
    printf("same node: %d fifo %d\n", fst.st_ino == st.st_ino && fst.st_dev == st.st_dev, S_ISFIFO(fst.st_mode));
    close(w);
    printf("poll after the writer left: %#x\n", revents(r));
    say("read after the writer left", read(r, buf, sizeof buf));
    close(r);

    /* O_RDWR never blocks and is both ends. */
    int rw = open(path, O_RDWR);
    say("open O_RDWR", rw >= 0 ? 0 : -1);
    say("write rw", write(rw, "both", 4));
    n = read(rw, buf, sizeof buf);
    printf("read rw: %.*s\n", (int)(n > 0 ? n : 0), buf);
    /* A writer of its own: now a blocking read-open completes at once. */
    int r2 = open(path, O_RDONLY);
    say("blocking read-open with a writer", r2 >= 0 ? 0 : -1);
    close(r2);
    close(rw);
    say("open O_CREAT|O_EXCL", open(path, O_WRONLY | O_CREAT | O_EXCL, 0600));

    /* A child writes more than a pipe holds; the parent's blocking
     * read-open waits for it, the child's write-open for the parent. */
    pid_t c = fork();
    if (c == 0) writer_child();
    r = open(path, O_RDONLY);
    say("parent read-open", r >= 0 ? 0 : -1);
    say("parent read all", read_all(r));
    close(r);
    int status;
    waitpid(c, &status, 0);
    printf("writer child: exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    /* The other way round: the parent writes, opening first. */
    c = fork();
    if (c == 0) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) _exit(20);
        long got = read_all(fd);
        _exit(got == BIG ? 0 : 21);
    }
    int fd = open(path, O_WRONLY);
    say("parent write-open", fd >= 0 ? 0 : -1);
    static char big[BIG];
    for (int i = 0; i < BIG; i++) big[i] = (char)(i % 251);
    say("parent write", write(fd, big, BIG));
    close(fd);
    waitpid(c, &status, 0);
    printf("reader child: exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    say("unlink", unlink(path));
    say("rmdir", rmdir(dir));
    return 0;
}
