/* Waiting for signals synchronously (sigwait, sigwaitinfo, sigtimedwait), as
 * daemons with a signal-handling thread and python's signal.sigwait do: a
 * signal already pending, one sent by another thread while waiting, one from
 * a timer, a timeout, and a signal outside the set left pending. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static pthread_t main_thread;

static void *sender(void *arg) {
    (void)arg;
    usleep(20000);
    pthread_kill(main_thread, SIGUSR2);
    return NULL;
}

int main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGALRM);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    int sig = 0;
    raise(SIGUSR1);
    sigwait(&set, &sig);
    printf("pending before the wait: %s\n", strsignal(sig));

    main_thread = pthread_self();
    pthread_t t;
    pthread_create(&t, NULL, sender, NULL);
    siginfo_t info;
    memset(&info, 0, sizeof info);
    sig = sigwaitinfo(&set, &info);
    printf("sent by a thread while waiting: %s, si_signo %s\n", strsignal(sig), strsignal(info.si_signo));
    pthread_join(t, NULL);

    struct itimerval it = {.it_value = {.tv_usec = 30000}};
    setitimer(ITIMER_REAL, &it, NULL);
    sigwait(&set, &sig);
    printf("from a timer: %s\n", strsignal(sig));

    struct timespec ts = {.tv_nsec = 50 * 1000 * 1000};
    sigset_t only_term;
    sigemptyset(&only_term);
    sigaddset(&only_term, SIGTERM);
    int r = sigtimedwait(&only_term, NULL, &ts);
    printf("timed out: %d %s\n", r, r < 0 ? strerror(errno) : "");
    struct timespec zero = {0};
    r = sigtimedwait(&only_term, NULL, &zero);
    printf("a poll: %d %s\n", r, r < 0 ? strerror(errno) : "");

    /* A signal outside the waited set stays pending for later. */
    kill(getpid(), SIGUSR1);
    r = sigtimedwait(&only_term, NULL, &zero);
    printf("another signal pending, none of the set: %d %s\n", r, r < 0 ? strerror(errno) : "");
    sigset_t pending;
    sigpending(&pending);
    printf("SIGUSR1 still pending: %d\n", sigismember(&pending, SIGUSR1));
    sigwait(&set, &sig);
    printf("then taken: %s\n", strsignal(sig));
    return 0;
}
