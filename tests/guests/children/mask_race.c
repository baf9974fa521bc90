/* A signal from another process that arrives while the receiver is in the
 * middle of blocking it must stay pending, not vanish: each round the
 * parent asks its child for a SIGUSR1, blocks every signal at once (the
 * signal lands before, during or after that call), then sigsuspends until
 * the handler has run. A lost signal hangs the round. Every other round
 * waits 2 ms first, so that the signal is there when the mask call starts. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_usr1(int s) { (void)s; got = 1; }

int main(void)
{
    int ask[2];
    pipe(ask);
    signal(SIGUSR1, on_usr1);
    pid_t parent = getpid();
    pid_t c = fork();
    if (c == 0) {
        char b;
        close(ask[1]);
        while (read(ask[0], &b, 1) == 1)
            kill(parent, SIGUSR1);
        _exit(0);
    }
    sigset_t all, none, old;
    sigfillset(&all);
    sigemptyset(&none);
    int rounds = 0;
    for (int i = 0; i < 200; i++) {
        got = 0;
        write(ask[1], "x", 1);
        /* Give the signal time to arrive before the mask call, most rounds. */
        if (i % 2) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do
                clock_gettime(CLOCK_MONOTONIC, &t1);
            while ((t1.tv_sec - t0.tv_sec) * 1000000000L + t1.tv_nsec - t0.tv_nsec < 2000000);
        }
        sigprocmask(SIG_SETMASK, &all, &old);
        while (!got)
            sigsuspend(&none);
        sigprocmask(SIG_SETMASK, &old, NULL);
        rounds++;
    }
    close(ask[1]);
    waitpid(c, NULL, 0);
    printf("%d rounds, every signal handled\n", rounds);
    return 0;
}
