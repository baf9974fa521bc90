/* Waits under a signal mask of their own (pselect, ppoll, epoll_pwait,
 * sigsuspend): SIGCHLD, blocked, is let through by the call's mask when a
 * child exits, ends the wait with EINTR and runs its handler; afterwards
 * the mask from before the call is back (SIGCHLD blocked again). This is
 * how GNU make's jobserver waits for its jobs. */
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

static volatile sig_atomic_t got;
static void on_chld(int s) { (void)s; got++; }

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
    return 0;
}
