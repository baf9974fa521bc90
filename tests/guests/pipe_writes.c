/* One big blocking write (and writev) into a pipe whose reader is another
 * thread or a child process: each returns only when every byte is in. */
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
    return 0;
}
