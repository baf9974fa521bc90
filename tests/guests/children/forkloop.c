/* Cost of fork + _exit + waitpid, and of fork + exec (of /proc/self/exe,
 * which exits at once) + waitpid: microseconds per round.
 * Usage: forkloop [rounds] [heap MiB]: with a heap, the parent first fills
 * that much memory, which every fork must give the child. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (argc > 1 && strcmp(argv[1], "exit") == 0)
        return 0;
    int n = argc > 1 ? atoi(argv[1]) : 100;
    size_t heap = (size_t)(argc > 2 ? atoi(argv[2]) : 0) << 20;
    char *mem = heap ? malloc(heap) : NULL;
    if (heap && !mem) return 1;
    for (size_t i = 0; i < heap; i += 4096) mem[i] = (char)(i >> 12 | 1);
    int st;
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0) _exit(0);
        waitpid(c, &st, 0);
    }
    double t1 = now_us();
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0) {
            char *av[] = {argv[0], "exit", NULL};
            execv("/proc/self/exe", av);
            _exit(127);
        }
        waitpid(c, &st, 0);
    }
    double t2 = now_us();
    long sum = 0;
    for (size_t i = 0; i < heap; i += 4096 * 257) sum += mem[i];
    if (heap && sum == 0) return 1;
    printf("fork+exit+wait %.0f us, fork+exec+wait %.0f us\n", (t1 - t0) / n, (t2 - t1) / n);
    return 0;
}
