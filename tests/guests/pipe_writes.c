/* One big blocking write (and writev) into a pipe whose reader is another
 * thread or a child process: each returns only when every byte is in.
 * Then F_GETPIPE_SZ/F_SETPIPE_SZ size a pipe's buffer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
static int fds[2];
static void *reader(void *arg) {
    (void)arg;
    char buf[65536];
    long total = 0, sum = 0;
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) sum += (unsigned char)buf[i];
        total += n;
    }
    printf("reader got %ld bytes, sum %ld\n", total, sum);
    return NULL;
}
int main(void) {
    size_t len = 3 << 20;
    char *big = malloc(len);
    for (size_t i = 0; i < len; i++) big[i] = (char)(i * 7);
    pipe(fds);
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    ssize_t w = write(fds[1], big, len);
    printf("write returned %zd of %zu\n", w, len);
    struct iovec iov[2] = {{big, 100000}, {big + 100000, 900000}};
    w = writev(fds[1], iov, 2);
    printf("writev returned %zd\n", w);
    close(fds[1]);
    pthread_join(t, NULL);
    /* The same to a child process reading the pipe. */
    pipe(fds);
    pid_t c = fork();
    if (c == 0) { close(fds[1]); reader(NULL); fflush(stdout); _exit(0); }
    close(fds[0]);
    w = write(fds[1], big, len);
    printf("write to a child returned %zd\n", w);
    close(fds[1]);
    waitpid(c, NULL, 0);

    /* A pipe's size: rounded up to a power-of-two number of pages, never
     * below what it holds; a non-blocking write fills exactly that much. */
    pipe2(fds, O_NONBLOCK);
    printf("pipe size %d\n", fcntl(fds[1], F_GETPIPE_SZ));
    printf("set 5000 -> %d\n", fcntl(fds[1], F_SETPIPE_SZ, 5000));
    printf("set 0 -> %d\n", fcntl(fds[0], F_SETPIPE_SZ, 0));
    printf("non-blocking write of 10000 takes %zd\n", write(fds[1], big, 10000));
    w = write(fds[1], big, 1);
    printf("then another byte: %zd (%s)\n", w, w < 0 && errno == EAGAIN ? "EAGAIN" : "?");
    printf("set 100 while it holds 4096 -> %d\n", fcntl(fds[1], F_SETPIPE_SZ, 100));
    printf("set 100000 -> %d\n", fcntl(fds[1], F_SETPIPE_SZ, 100000));
    printf("size now %d\n", fcntl(fds[0], F_GETPIPE_SZ));
    printf("now a write takes %zd\n", write(fds[1], big, 200000));
    int r = fcntl(fds[1], F_SETPIPE_SZ, 65536);
    printf("set 65536 while it holds 131072: %d (%s)\n", r, r < 0 && errno == EBUSY ? "EBUSY" : "?");
    return 0;
}
