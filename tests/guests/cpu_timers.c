/* Interval timers on CPU time (ITIMER_VIRTUAL, ITIMER_PROF) and clocks by
 * number: CLOCK_TAI, the alarm clocks, CPU clocks named by pid and thread;
 * POSIX timers on the thread and process CPU clocks (a thread's clock stands
 * still while it sleeps: Go's profiler arms one per thread, and forkvm's
 * timers on elapsed time put samples in sleeping threads). */
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

static volatile sig_atomic_t thread_fires, process_fires, sleeper_done;
static void on_usr1(int s) { (void)s; thread_fires++; }
static void on_usr2(int s) { (void)s; process_fires++; }

/* A POSIX timer on the calling thread's CPU clock, SIGUSR1 to that thread
 * every 10 ms of its CPU time (as Go's profiler arms one per thread). */
static timer_t thread_timer(void)
{
    timer_t id;
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGUSR1;
#ifdef sigev_notify_thread_id
    ev.sigev_notify_thread_id = gettid(); /* musl */
#else
    ev._sigev_un._tid = gettid(); /* glibc */
#endif
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &id))
        printf("timer_create(CLOCK_THREAD_CPUTIME_ID): %s\n", strerror(errno));
    struct itimerspec v = {{0, 10000000}, {0, 10000000}};
    timer_settime(id, 0, &v, NULL);
    return id;
}

static double secs(struct timespec t) { return t.tv_sec + t.tv_nsec / 1e9; }

/* Sleeps 300 ms with a thread CPU timer armed while the main thread computes:
 * its clock stands still, so the timer never fires. */
static void *sleeper(void *arg)
{
    (void)arg;
    timer_t id = thread_timer();
    struct timespec start, now, cpu;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (secs(now) - secs(start) < 0.3);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    printf("sleeping thread's CPU time under 50 ms: %s\n", secs(cpu) < 0.05 ? "yes" : "no");
    timer_delete(id);
    sleeper_done = 1;
    return NULL;
}

static void posix_cpu_timers(void)
{
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, on_usr2);
    /* The computing thread's own timer fires. */
    timer_t id = thread_timer();
    spin_until(&thread_fires, 3);
    printf("thread CPU timer fired 3 times while computing: %s\n", thread_fires >= 3 ? "yes" : "no");
    struct itimerspec left;
    timer_gettime(id, &left);
    printf("  its interval: %ld ns, next in (0, 20 ms]: %s\n", left.it_interval.tv_nsec,
           left.it_value.tv_sec == 0 && left.it_value.tv_nsec > 0 && left.it_value.tv_nsec <= 20000000 ? "yes" : "no");
    timer_delete(id);

    /* A sleeping thread's timer does not fire while another thread computes. */
    thread_fires = 0;
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    spin_until(&sleeper_done, 1);
    pthread_join(t, NULL);
    printf("sleeping thread's CPU timer quiet: %s\n", thread_fires == 0 ? "yes" : "no");

    /* The process's CPU clock: quiet while the process sleeps, then fires. */
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR2;
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &id))
        printf("timer_create(CLOCK_PROCESS_CPUTIME_ID): %s\n", strerror(errno));
    struct itimerspec once = {{0, 0}, {0, 50000000}};
    timer_settime(id, 0, &once, NULL);
    struct timespec nap = {0, 200 * 1000 * 1000};
    nanosleep(&nap, NULL);
    printf("process CPU timer quiet while asleep: %s\n", process_fires == 0 ? "yes" : "no");
    spin_until(&process_fires, 1);
    printf("process CPU timer fired once computing: %s\n", process_fires == 1 ? "yes" : "no");
    timer_delete(id);
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
    posix_cpu_timers();
    return 0;
}
