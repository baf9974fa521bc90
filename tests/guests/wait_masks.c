/* Waits under a signal mask of their own (pselect, ppoll, epoll_pwait,
 * sigsuspend): SIGCHLD, blocked, is let through by the call's mask when a
 * child exits, ends the wait with EINTR and runs its handler; afterwards
 * the mask from before the call is back (SIGCHLD blocked again). This is
 * how GNU make's jobserver waits for its jobs. The other way round, a
 * signal the call's mask blocks (SIGUSR1, open before the call) that
 * arrives during the wait leaves it waiting: the call returns what became
 * ready, and the handler runs once the old mask is back. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static volatile sig_atomic_t got;
static void on_chld(int s) { (void)s; got++; }

static volatile sig_atomic_t usr1;
static void on_usr1(int s) { (void)s; usr1++; }

/* A child that sends its parent SIGUSR1 once it waits, then a byte on `w`. */
static void poke(int w) {
    pid_t parent = getpid();
    if (fork() == 0) {
        wait_until_asleep(parent);
        usleep(100000);
        kill(parent, SIGUSR1);
        usleep(50000);
        write(w, "x", 1);
        _exit(0);
    }
}

static void after_usr1(const char *what, int r, int e, int rd) {
    char c;
    printf("%s blocking SIGUSR1: %d %s, SIGUSR1 handler ran %d\n", what, r, r < 0 ? strerror(e) : "-", (int)usr1);
    read(rd, &c, 1);
    while (waitpid(-1, NULL, 0) > 0) {}
    usr1 = 0;
}

static void spawn(void) {
    if (fork() == 0) {
        usleep(50000);
        _exit(0);
    }
}

static void after(const char *what, int r, int e) {
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("%s: %d %s, handler ran %d, SIGCHLD blocked after: %s\n", what, r, r < 0 ? strerror(e) : "-", (int)got,
           sigismember(&now, SIGCHLD) ? "yes" : "no");
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    got = 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int p[2];
    if (pipe(p) != 0) return 1;
    struct sigaction sa = {0};
    sa.sa_handler = on_chld;
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t blocked, open;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGCHLD);
    sigprocmask(SIG_BLOCK, &blocked, &open);
    sigdelset(&open, SIGCHLD);

    spawn();
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(p[0], &rd);
    int r = pselect(p[0] + 1, &rd, NULL, NULL, NULL, &open);
    after("pselect", r, errno);

    spawn();
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    r = ppoll(&pf, 1, NULL, &open);
    after("ppoll", r, errno);

    spawn();
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = p[0]}, out;
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    r = epoll_pwait(ep, &out, 1, -1, &open);
    after("epoll_pwait", r, errno);

    spawn();
    r = sigsuspend(&open);
    after("sigsuspend", r, errno);

    /* A mask that keeps SIGCHLD blocked: the wait ends on its timeout. */
    spawn();
    struct timespec t = {0, 200000000};
    r = ppoll(&pf, 1, &t, &blocked);
    printf("ppoll keeping it blocked: %d, handler ran %d\n", r, (int)got);
    sigprocmask(SIG_UNBLOCK, &blocked, NULL);
    printf("unblocked: handler ran %d\n", (int)got);
    while (waitpid(-1, NULL, WNOHANG) > 0) {}

    /* SIGUSR1 is open before the calls and blocked by their masks
     * (SIGCHLD, blocked throughout, cannot end them either). */
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sigprocmask(SIG_BLOCK, &blocked, NULL);
    sigset_t no_usr1 = blocked;
    sigaddset(&no_usr1, SIGUSR1);

    FD_ZERO(&rd);
    FD_SET(p[0], &rd);
    poke(p[1]);
    r = pselect(p[0] + 1, &rd, NULL, NULL, NULL, &no_usr1);
    after_usr1("pselect", r, errno, p[0]);

    poke(p[1]);
    r = ppoll(&pf, 1, NULL, &no_usr1);
    after_usr1("ppoll", r, errno, p[0]);

    poke(p[1]);
    r = epoll_pwait(ep, &out, 1, -1, &no_usr1);
    after_usr1("epoll_pwait", r, errno, p[0]);
    return 0;
}
