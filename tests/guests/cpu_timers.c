/* Interval timers on CPU time (ITIMER_VIRTUAL, ITIMER_PROF) and clocks by
 * number: CLOCK_TAI, the alarm clocks, CPU clocks named by pid and thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t counts[2];
static void on_vtalrm(int s) { (void)s; counts[0]++; }
static void on_prof(int s) { (void)s; counts[1]++; }

/* Computes (no system calls) until `n` reaches `want`, or 20 s pass. */
static void spin_until(volatile sig_atomic_t *n, int want)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile unsigned long x = 0;
    while (*n < want) {
        for (int i = 0; i < 100000; i++)
            x += i;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 20)
            break;
    }
}

static void cpu_timer(int which, const char *name, int sig, void (*handler)(int), volatile sig_atomic_t *n)
{
    struct itimerval v = {0}, old;
    getitimer(which, &old);
    printf("%s unarmed: %ld.%06ld %ld.%06ld\n", name, (long)old.it_interval.tv_sec,
           (long)old.it_interval.tv_usec, (long)old.it_value.tv_sec, (long)old.it_value.tv_usec);
    signal(sig, handler);
    v.it_interval.tv_usec = 10000;
    v.it_value.tv_usec = 10000;
    if (setitimer(which, &v, NULL))
        printf("%s setitimer: %s\n", name, strerror(errno));
    getitimer(which, &old);
    printf("%s armed: interval %ld us, value in (0, 20 ms]: %s\n", name, (long)old.it_interval.tv_usec,
           old.it_value.tv_sec == 0 && old.it_value.tv_usec > 0 && old.it_value.tv_usec <= 20000 ? "yes" : "no");
    spin_until(n, 3);
    printf("%s fired 3 times while computing: %s\n", name, *n >= 3 ? "yes" : "no");
    memset(&v, 0, sizeof v);
    setitimer(which, &v, &old);
    printf("%s disarmed, its interval was %ld us\n", name, (long)old.it_interval.tv_usec);

    /* One shot of 50 ms of CPU time: a sleeping process spends none. */
    int before = *n;
    v.it_value.tv_usec = 50000;
    setitimer(which, &v, NULL);
    struct timespec nap = {0, 200 * 1000 * 1000};
    nanosleep(&nap, NULL);
    printf("%s quiet while asleep: %s\n", name, *n == before ? "yes" : "no");
    memset(&v, 0, sizeof v);
    setitimer(which, &v, NULL);
}

int main(void)
{
    cpu_timer(ITIMER_VIRTUAL, "ITIMER_VIRTUAL", SIGVTALRM, on_vtalrm, &counts[0]);
    cpu_timer(ITIMER_PROF, "ITIMER_PROF", SIGPROF, on_prof, &counts[1]);
    struct itimerval v = {0};
    printf("setitimer(5): %s\n", setitimer(5, &v, NULL) ? strerror(errno) : "ok");
    printf("getitimer(-1): %s\n", getitimer(-1, &v) ? strerror(errno) : "ok");

    struct timespec tai, real;
    clock_gettime(CLOCK_REALTIME, &real);
    int r = clock_gettime(CLOCK_TAI, &tai);
    long off = tai.tv_sec - real.tv_sec;
    printf("CLOCK_TAI: %s, within 100 s of CLOCK_REALTIME: %s\n", r ? strerror(errno) : "ok",
           off >= 0 && off <= 100 ? "yes" : "no");

    clockid_t c;
    struct timespec t;
    printf("clock_getcpuclockid(self): %s\n", strerror(clock_getcpuclockid(getpid(), &c)));
    printf("  read: %s\n", clock_gettime(c, &t) ? strerror(errno) : "ok");
    printf("  resolution: %s\n", clock_getres(c, &t) ? strerror(errno) : "ok");
    printf("pthread_getcpuclockid(self): %s\n", strerror(pthread_getcpuclockid(pthread_self(), &c)));
    printf("  read: %s\n", clock_gettime(c, &t) ? strerror(errno) : "ok");
    printf("clock_getcpuclockid(no such pid): %s\n", strerror(clock_getcpuclockid(999999, &c)));
    return 0;
}
