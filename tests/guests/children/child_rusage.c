/* A waited-for child's CPU time is reported: wait4's rusage, then
 * getrusage(RUSAGE_CHILDREN) and times' tms_cutime include it, and a
 * grandchild's the child waited for (they were always 0: GNU time printed
 * 0.00, bash's `times` showed no children's time). */
#define _GNU_SOURCE
#include "../common.h"
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <unistd.h>

static double secs(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }

static void burn(void) {
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 150000000ul; i++) x += i;
}

static double self_time(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return secs(ru.ru_utime) + secs(ru.ru_stime);
}

int main(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("no children's time yet: %d\n", secs(ru.ru_utime) + secs(ru.ru_stime) == 0);
    int fds[2];
    if (pipe(fds) < 0) return 1;
    pid_t c = fork();
    if (c == 0) {
        pid_t g = fork();
        if (g == 0) { burn(); _exit(0); }
        burn();
        int st;
        waitpid(g, &st, 0);
        struct rusage gc;
        getrusage(RUSAGE_CHILDREN, &gc);
        double own = self_time(), grand = secs(gc.ru_utime) + secs(gc.ru_stime);
        write(fds[1], &own, sizeof own);
        write(fds[1], &grand, sizeof grand);
        _exit(0);
    }
    double own = 0, grand = 0;
    read(fds[0], &own, sizeof own);
    read(fds[0], &grand, sizeof grand);
    int st;
    struct rusage w;
    if (wait4(c, &st, 0, &w) != c) { perror("wait4"); return 1; }
    double waited = secs(w.ru_utime) + secs(w.ru_stime);
    printf("child used CPU: %d, saw its child's: %d\n", own > 0.01, grand > 0.01);
    /* Tick rounding aside, the report covers the child and the grandchild. */
    printf("wait4 rusage covers both: %d\n", waited >= own + grand - 0.02);
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("RUSAGE_CHILDREN covers both: %d\n", secs(ru.ru_utime) + secs(ru.ru_stime) >= own + grand - 0.02);
    struct tms t;
    times(&t);
    long hz = sysconf(_SC_CLK_TCK);
    printf("tms_cutime covers both: %d\n", (double)(t.tms_cutime + t.tms_cstime) / hz >= own + grand - 0.05);
    return 0;
}
