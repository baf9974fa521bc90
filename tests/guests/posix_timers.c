/* POSIX timers: timer_create with SIGEV_SIGNAL (a periodic timer
 * interrupting a busy loop, then sigwait-free pause), SIGEV_NONE (progress
 * seen through timer_gettime), timer_delete, bad ids, and a timer's default
 * action ending the process (SIGALRM, status 142). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t ticks;
static void on_usr1(int s) { (void)s; ticks++; }

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGUSR1, on_usr1);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGUSR1;
    timer_t t;
    if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0) { perror("timer_create"); return 1; }
    struct itimerspec its = { { 0, 20000000 }, { 0, 20000000 } };
    if (timer_settime(t, 0, &its, NULL) != 0) { perror("timer_settime"); return 1; }
    while (ticks < 3) { } /* busy: the timer must interrupt user code */
    struct itimerspec cur;
    timer_gettime(t, &cur);
    printf("periodic: ticks>=3, interval %ld ns, armed %d\n", cur.it_interval.tv_nsec,
           cur.it_value.tv_sec > 0 || cur.it_value.tv_nsec > 0);
    printf("overrun ok: %d\n", timer_getoverrun(t) >= 0);
    struct itimerspec off = { { 0, 0 }, { 0, 0 } }, old;
    timer_settime(t, 0, &off, &old);
    printf("disarmed; old interval %ld ns\n", old.it_interval.tv_nsec);
    timer_gettime(t, &cur);
    printf("now: %ld %ld\n", (long)cur.it_value.tv_sec, cur.it_value.tv_nsec);
    /* one shot, absolute, waited for with pause() */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    timer_t t2;
    if (timer_create(CLOCK_REALTIME, &sev, &t2) != 0) { perror("timer_create 2"); return 1; }
    int before = ticks;
    now.tv_nsec += 30000000;
    if (now.tv_nsec >= 1000000000) { now.tv_sec++; now.tv_nsec -= 1000000000; }
    struct itimerspec abs = { { 0, 0 }, now };
    timer_settime(t2, TIMER_ABSTIME, &abs, NULL);
    pause();
    printf("absolute one-shot woke pause: %d\n", ticks == before + 1);
    /* SIGEV_NONE: no signal, but the timer runs */
    struct sigevent none;
    memset(&none, 0, sizeof none);
    none.sigev_notify = SIGEV_NONE;
    timer_t t3;
    timer_create(CLOCK_MONOTONIC, &none, &t3);
    struct itimerspec long_one = { { 0, 0 }, { 100, 0 } };
    timer_settime(t3, 0, &long_one, NULL);
    timer_gettime(t3, &cur);
    printf("SIGEV_NONE running: %d\n", cur.it_value.tv_sec >= 98 && cur.it_value.tv_sec <= 100);
    printf("delete: %d %d\n", timer_delete(t), timer_delete(t3));
    errno = 0;
    int r = timer_delete(t);
    printf("delete again: %d %s\n", r, errno == EINVAL ? "EINVAL" : "?");
    errno = 0;
    r = timer_create(12345, &sev, &t);
    printf("bad clock: %d %s\n", r, errno == EINVAL ? "EINVAL" : "?");
    /* default action of SIGALRM (NULL sigevent) ends the process */
    timer_t t4;
    timer_create(CLOCK_MONOTONIC, NULL, &t4);
    struct itimerspec soon = { { 0, 0 }, { 0, 10000000 } };
    timer_settime(t4, 0, &soon, NULL);
    for (;;) pause();
}
