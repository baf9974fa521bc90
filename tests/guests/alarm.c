/* Interval timers: alarm + pause, a periodic setitimer interrupting a busy
 * loop, and the default action of SIGALRM ending the process (status 142). */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/time.h>
static volatile int ticks;
static void on_alrm(int s) { (void)s; ticks++; }
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);

    signal(SIGALRM, on_alrm);
    alarm(1);
    pause();
    printf("after pause: ticks=%d\n", ticks);
    struct itimerval it = { {0, 20000}, {0, 20000} };
    setitimer(ITIMER_REAL, &it, NULL);
    while (ticks < 4) { }   /* busy: the timer must interrupt user code */
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("busy loop interrupted: ticks=%d\n", ticks);
    alarm(1);
    printf("alarm left: %u\n", alarm(0));
    signal(SIGALRM, SIG_DFL);
    alarm(1);
    for (;;) pause();
}
