/* Round trip of one byte between two processes over two pipes: the parent
 * writes, the child reads and writes back, the parent reads. Prints the
 * mean in microseconds. Usage: pipe_pingpong [rounds] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    int there[2], back[2];
    char c = 'x';
    if (n < 1 || pipe(there) || pipe(back)) return 1;
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        for (int i = 0; i < n; i++)
            if (read(there[0], &c, 1) != 1 || write(back[1], &c, 1) != 1) _exit(1);
        _exit(0);
    }
    double t0 = now_us();
    for (int i = 0; i < n; i++)
        if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) return 1;
    double t1 = now_us();
    int st;
    if (waitpid(child, &st, 0) != child || st != 0) return 1;
    printf("pipe round trip %.1f us\n", (t1 - t0) / n);
    return 0;
}
