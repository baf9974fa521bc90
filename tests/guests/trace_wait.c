/* A read that waits for another thread's write: under --trace-syscalls it
 * shows once as waiting, then with its result (each look of the wait used
 * to be traced as `read(3, "", 1) = 0`, which reads as end of file). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static int fds[2];

static void *writer(void *arg) {
    (void)arg;
    usleep(50000);
    if (write(fds[1], "x", 1) != 1) return (void *)1;
    return NULL;
}

int main(void) {
    if (pipe(fds)) return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, writer, NULL)) return 1;
    char c = 0;
    long n = read(fds[0], &c, 1);
    pthread_join(t, NULL);
    printf("read %ld byte: %c\n", n, c);
    return 0;
}
