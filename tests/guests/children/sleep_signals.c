/* A signal from another process ends a sleep (EINTR) and its handler has
 * run by the time the sleep returns, as on Linux: in the first process
 * (SIGCHLD, and a kill from a child) and in a child (a kill from its
 * parent), for nanosleep, clock_nanosleep (relative and absolute) and
 * sleep(3). Times are printed only as "short"/"full", never measured
 * against a bound. */
#define _GNU_SOURCE
#include "../common.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void handler(int sig) { got = sig; }

static void on(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigaction(sig, &sa, NULL);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Sleeps 5 s by `how`; prints the result, whether the sleep was cut short
 * and which signal's handler had run when it returned. */
static void sleep_by(const char *who, int how)
{
    got = 0;
    double t0 = now();
    long r;
    errno = 0;
    struct timespec req = { 5, 0 }, rem = { 0, 0 };
    const char *name;
    switch (how) {
    case 0:
        name = "nanosleep";
        r = nanosleep(&req, &rem);
        break;
    case 1:
        name = "clock_nanosleep";
        r = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem);
        if (r > 0) {
            errno = (int)r;
            r = -1;
        }
        break;
    case 2: {
        name = "clock_nanosleep abs";
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_sec += 5;
        r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
        if (r > 0) {
            errno = (int)r;
            r = -1;
        }
        break;
    }
    default:
        name = "sleep";
        r = (long)sleep(5) > 0 ? 1 : 0;
        break;
    }
    int sig = got;
    printf("%s: %s: %ld", who, name, r);
    if (r < 0) {
        printf(" ");
        print_errno(stdout, errno);
    }
    printf(", %s, handler ran for %s, rem set %d\n", now() - t0 < 4.0 ? "short" : "full",
           sig == SIGCHLD ? "SIGCHLD" : sig == SIGUSR1 ? "SIGUSR1" : sig ? "other" : "none",
           how < 2 && r < 0 ? (rem.tv_sec > 0 || rem.tv_nsec > 0) : 0);
    fflush(stdout);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    on(SIGCHLD);
    on(SIGUSR1);
    /* The first process: a child's exit (SIGCHLD) and a child's kill. */
    for (int how = 0; how < 4; how++) {
        pid_t c = fork();
        if (c == 0) {
            usleep(200000);
            _exit(0);
        }
        sleep_by("parent, child exits", how);
        waitpid(c, NULL, 0);
    }
    signal(SIGCHLD, SIG_DFL);
    for (int how = 0; how < 4; how++) {
        pid_t parent = getpid();
        pid_t c = fork();
        if (c == 0) {
            /* Again and again: one that lands before the sleep is lost to it. */
            for (int i = 0; i < 20; i++) {
                usleep(200000);
                kill(parent, SIGUSR1);
            }
            _exit(0);
        }
        sleep_by("parent, child kills", how);
        kill(c, SIGKILL);
        waitpid(c, NULL, 0);
    }
    /* A child: its parent's kill; the child reports by its exit status too. */
    for (int how = 0; how < 4; how++) {
        pid_t c = fork();
        if (c == 0) {
            sleep_by("child, parent kills", how);
            _exit(got == SIGUSR1 ? 42 : 1);
        }
        int st;
        /* Until it ends: one that lands before the sleep is lost to it. */
        do {
            usleep(200000);
            kill(c, SIGUSR1);
        } while (waitpid(c, &st, WNOHANG) == 0);
        printf("child exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    return 0;
}
