/* splice, tee and vmsplice as Linux answers them: the bytes moved, where
 * offsets end up, which side may block, and the errors for what cannot be
 * spliced. Argument: a writable directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcp_pair.h"

static const char *err(long r) { return r < 0 ? strerror(errno) : "ok"; }

static void show(const char *what, long r) {
    if (r < 0)
        printf("%s: -1 %s\n", what, strerror(errno));
    else
        printf("%s: %ld\n", what, r);
}

/* Reads what is in a pipe now (non-blocking) and prints it. */
static void drain(const char *what, int fd) {
    char b[256];
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    ssize_t n = read(fd, b, sizeof b - 1);
    fcntl(fd, F_SETFL, fl);
    if (n < 0) {
        printf("%s: empty (%s)\n", what, strerror(errno));
        return;
    }
    b[n] = 0;
    printf("%s: \"%s\"\n", what, b);
}

static int sigpipes;
static void on_sigpipe(int s) {
    (void)s;
    sigpipes++;
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) != 0) {
        printf("usage: splice DIR\n");
        return 1;
    }
    int f = open("data", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f < 0 || write(f, "0123456789abcdefghij", 20) != 20) return 1;
    int p[2], q[2];
    if (pipe(p) || pipe(q)) return 1;

    /* A file into a pipe: with an offset pointer the file's position stays. */
    loff_t off = 5;
    show("file->pipe at 5", splice(f, &off, p[1], NULL, 4, 0));
    printf("offset now %lld, position %lld\n", (long long)off, (long long)lseek(f, 0, SEEK_CUR));
    drain("pipe", p[0]);
    lseek(f, 16, SEEK_SET);
    show("file->pipe from position 16, 100 asked", splice(f, NULL, p[1], NULL, 100, 0));
    printf("position %lld\n", (long long)lseek(f, 0, SEEK_CUR));
    show("file->pipe at end of file", splice(f, NULL, p[1], NULL, 100, 0));
    drain("pipe", p[0]);

    /* A pipe into a file: at an offset, then at the position. */
    write(p[1], "XY", 2);
    off = 2;
    show("pipe->file at 2", splice(p[0], NULL, f, &off, 10, 0));
    printf("offset now %lld\n", (long long)off);
    write(p[1], "ZZZ", 3);
    lseek(f, 18, SEEK_SET);
    show("pipe->file at position 18", splice(p[0], NULL, f, NULL, 3, 0));
    printf("size %lld\n", (long long)lseek(f, 0, SEEK_END));
    char all[32] = {0};
    pread(f, all, sizeof all - 1, 0);
    printf("file: \"%s\"\n", all);

    /* Only part of what a pipe holds: the rest stays. */
    write(p[1], "abcdef", 6);
    show("pipe->file 2 of 6", splice(p[0], NULL, f, NULL, 2, 0));
    drain("left in pipe", p[0]);

    /* Pipe to pipe, and tee, which leaves the bytes where they were. */
    write(p[1], "moved", 5);
    show("pipe->pipe", splice(p[0], NULL, q[1], NULL, 64, 0));
    drain("first pipe", p[0]);
    drain("second pipe", q[0]);
    write(p[1], "copied", 6);
    show("tee", tee(p[0], q[1], 64, 0));
    drain("first pipe after tee", p[0]);
    drain("second pipe after tee", q[0]);
    show("tee 3 of 6", (write(p[1], "copied", 6), tee(p[0], q[1], 3, 0)));
    drain("first pipe", p[0]);
    drain("second pipe", q[0]);

    /* What cannot be spliced. */
    int g = open("other", O_RDWR | O_CREAT | O_TRUNC, 0600);
    show("file->file", splice(f, NULL, g, NULL, 4, 0));
    show("length 0 on a bad fd", splice(99, NULL, 98, NULL, 0, 0));
    show("bad fd", splice(99, NULL, p[1], NULL, 4, 0));
    show("unknown flag", splice(f, NULL, p[1], NULL, 4, 0x100));
    off = 0;
    show("offset on the pipe side", splice(f, NULL, p[1], &off, 4, 0));
    show("write end as input", splice(p[1], NULL, f, NULL, 4, 0));
    show("read end as output", splice(f, NULL, p[0], NULL, 4, 0));
    show("pipe into itself", splice(p[0], NULL, p[1], NULL, 4, 0));
    show("tee of a file", tee(f, p[1], 4, 0));
    show("tee into itself", tee(p[0], p[1], 4, 0));
    off = -1;
    show("negative offset", splice(f, &off, p[1], NULL, 4, 0));
    int app = open("other", O_WRONLY | O_APPEND);
    write(p[1], "x", 1);
    show("into O_APPEND", splice(p[0], NULL, app, NULL, 1, 0));
    drain("pipe", p[0]);
    int efd = open("/dev/null", O_WRONLY);
    write(p[1], "discard", 7);
    show("pipe->/dev/null", splice(p[0], NULL, efd, NULL, 64, 0));
    drain("pipe", p[0]);

    /* Readiness: an empty pipe, a full pipe, a pipe with no reader. */
    show("empty pipe, SPLICE_F_NONBLOCK", splice(p[0], NULL, f, NULL, 4, SPLICE_F_NONBLOCK));
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    show("empty pipe, O_NONBLOCK", splice(p[0], NULL, f, NULL, 4, 0));
    fcntl(p[0], F_SETFL, 0);
    /* (Linux's pipe holds pages: a splice needs a whole free one, so only
     * an empty or a full pipe answers the same in both.) */
    fcntl(q[1], F_SETPIPE_SZ, 4096);
    char fill[4096];
    memset(fill, 'f', sizeof fill);
    int big = open("big", O_RDWR | O_CREAT | O_TRUNC, 0600);
    for (int i = 0; i < 3; i++) write(big, fill, sizeof fill);
    off = 0;
    show("file->pipe of one page, 10000 asked", splice(big, &off, q[1], NULL, 10000, 0));
    show("file->full pipe, SPLICE_F_NONBLOCK", splice(big, &off, q[1], NULL, 1000, SPLICE_F_NONBLOCK));
    printf("offset now %lld\n", (long long)off);
    show("read the page back", read(q[0], fill, sizeof fill));
    signal(SIGPIPE, on_sigpipe);
    int r[2];
    pipe(r);
    close(r[0]);
    show("file->pipe without reader", splice(f, &off, r[1], NULL, 4, 0));
    printf("SIGPIPE %d\n", sigpipes);
    close(r[1]);
    pipe(r);
    close(r[1]);
    show("pipe without writer", splice(r[0], NULL, f, NULL, 4, 0));
    close(r[0]);

    /* A blocking splice waits for a writer in another process. */
    pipe(r);
    pid_t pid = fork();
    if (pid == 0) {
        usleep(50000);
        write(r[1], "late", 4);
        _exit(0);
    }
    close(r[1]);
    show("waits for the writer", splice(r[0], NULL, g, NULL, 64, 0));
    show("then end of file", splice(r[0], NULL, g, NULL, 64, 0));
    waitpid(pid, NULL, 0);
    close(r[0]);

    /* TCP: socket to pipe, pipe to socket, end of stream. */
    listen_on_loopback();
    int c, s;
    pair(&c, &s);
    write(c, "over tcp", 8);
    usleep(10000);
    show("socket->pipe", splice(s, NULL, p[1], NULL, 64, 0));
    show("pipe->socket", splice(p[0], NULL, s, NULL, 64, 0));
    char b[64] = {0};
    show("client reads", read(c, b, sizeof b - 1));
    printf("client got \"%s\"\n", b);
    fcntl(s, F_SETFL, O_NONBLOCK);
    show("empty non-blocking socket", splice(s, NULL, p[1], NULL, 64, 0));
    off = 0;
    show("offset on a socket", splice(s, &off, p[1], NULL, 64, 0));
    shutdown(c, SHUT_WR);
    usleep(10000);
    show("socket at end of stream", splice(s, NULL, p[1], NULL, 64, 0));
    close(c);
    usleep(10000);
    write(p[1], "to a closed peer", 16);
    long sent = splice(p[0], NULL, s, NULL, 64, 0);
    printf("to a closed peer: %s\n", err(sent));

    /* vmsplice: guest memory into a pipe and out of it. */
    struct iovec iov[2] = {{"vm", 2}, {"splice", 6}};
    show("vmsplice into a pipe", vmsplice(p[1], iov, 2, 0));
    char x[3] = {0}, y[8] = {0};
    struct iovec out[2] = {{x, 2}, {y, 7}};
    show("vmsplice out of a pipe", vmsplice(p[0], out, 2, 0));
    printf("got \"%s\" \"%s\"\n", x, y);
    show("vmsplice of a file", vmsplice(f, iov, 2, 0));
    show("vmsplice from an empty pipe, non-blocking", vmsplice(p[0], out, 2, SPLICE_F_NONBLOCK));
    return 0;
}
