/* A signal ends another thread's sleep at once, as on Linux: nanosleep and
 * a relative clock_nanosleep return EINTR with the time left, whether the
 * signal was sent to the thread (pthread_kill) or to the process while the
 * other threads block it. Under forkvm the sleep ran to its end and
 * returned 0, then the handler ran: 100 s late here. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int handled;
static void on_usr1(int s) {
    (void)s;
    handled++;
}

static void report(const char *what, int r, int err, struct timespec *rem) {
    printf("%s: %s, handler ran %d, time left over 50 s: %s\n", what,
           r == 0 ? "slept it all" : strerror(err), handled, rem->tv_sec >= 50 ? "yes" : "no");
}

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec req = {100, 0}, rem = {0, 0};
    int r = nanosleep(&req, &rem);
    report("nanosleep", r, errno, &rem);
    rem.tv_sec = 0;
    r = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem);
    report("clock_nanosleep", r ? -1 : 0, r, &rem);
    rem.tv_sec = 0;
    r = nanosleep(&req, &rem);
    report("nanosleep, signal for the process", r, errno, &rem);
    return NULL;
}

int main(void) {
    signal(SIGUSR1, on_usr1);
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    usleep(100000);
    pthread_kill(t, SIGUSR1);
    usleep(100000);
    pthread_kill(t, SIGUSR1);
    usleep(100000);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    kill(getpid(), SIGUSR1);
    pthread_join(t, NULL);
    return 0;
}
