/* pidfds: pidfd_open of itself and of children, poll and epoll readiness
 * (readable once the child ended, hung up too once reaped), waitid(P_PIDFD)
 * blocking, with WNOHANG and with a non-blocking pidfd, pidfd_send_signal
 * to a running child (plain and with a siginfo), to an ended one and after
 * the reap, pidfd_getfd of its own descriptors, and the errors Linux gives. */
#define _GNU_SOURCE
#include "../common.h"
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x1000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#define PIDFD_NONBLOCK O_NONBLOCK

static int pidfd_open(pid_t pid, unsigned flags) { return (int)syscall(SYS_pidfd_open, pid, flags); }
static long pidfd_send(int fd, int sig, siginfo_t *info, unsigned flags) {
    return syscall(SYS_pidfd_send_signal, fd, sig, info, flags);
}

static void say(const char *what, long r) {
    if (r < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%s: %ld\n", what, r);
}

/* poll at once (or waiting `ms`): the revents. */
static int revents(int fd, int ms) {
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, ms);
    return n < 0 ? -1 : p.revents;
}

static long wait_fd(int fd, int options, siginfo_t *si) {
    memset(si, 0, sizeof *si);
    return syscall(SYS_waitid, P_PIDFD, fd, si, options, NULL);
}

static void show(const char *what, long r, const siginfo_t *si, pid_t child) {
    if (r < 0) { say(what, r); return; }
    printf("%s: 0 signo %d code %d is child %d status %d\n", what, si->si_signo, si->si_code,
           si->si_pid == child, si->si_status);
}

static volatile sig_atomic_t got_code, got_value;
static void on_usr1(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)ctx;
    got_code = si->si_code;
    got_value = si->si_value.sival_int;
}

int main(void) {
    siginfo_t si;
    /* Errors, and a pidfd of itself. */
    say("bad flags", pidfd_open(getpid(), 1));
    say("pid 0", pidfd_open(0, 0));
    say("pid -1", pidfd_open(-1, 0));
    say("no such pid", pidfd_open(INT_MAX, 0));
    int self = pidfd_open(getpid(), 0);
    say("self", self >= 0 ? 0 : -1);
    say("self cloexec", fcntl(self, F_GETFD));
    say("self accmode", fcntl(self, F_GETFL) & O_ACCMODE);
    say("self ready", revents(self, 0));
    say("self waitid", wait_fd(self, WEXITED | WNOHANG, &si));
    say("self signal 0", pidfd_send(self, 0, NULL, 0));
    say("signal bad flags", pidfd_send(self, 0, NULL, 8));
    say("signal two flags", pidfd_send(self, 0, NULL, 3));
    say("signal bad number", pidfd_send(self, 65, NULL, 0));
    say("signal not a pidfd", pidfd_send(0, 0, NULL, 0));
    say("signal bad fd", pidfd_send(99, 0, NULL, 0));
    say("signal bad siginfo", pidfd_send(self, 0, (siginfo_t *)8, 0));
    say("waitid not a pidfd", wait_fd(0, WEXITED, &si));
    say("waitid negative", wait_fd(-1, WEXITED, &si));
    char b[8];
    say("read", read(self, b, sizeof b));
    int dup = (int)syscall(SYS_pidfd_getfd, self, 1, 0);
    say("getfd own stdout", dup >= 0 ? 0 : -1);
    say("getfd cloexec", fcntl(dup, F_GETFD));
    say("getfd bad flags", syscall(SYS_pidfd_getfd, self, 1, 1));
    say("getfd bad target", syscall(SYS_pidfd_getfd, self, 99, 0));
    fflush(stdout);

    /* A child that exits with 3 when told: non-blocking pidfd, poll. */
    int go[2];
    pipe(go);
    pid_t a = fork();
    if (a == 0) {
        char c;
        read(go[0], &c, 1);
        _exit(3);
    }
    int fa = pidfd_open(a, PIDFD_NONBLOCK);
    say("child nonblock flag", (fcntl(fa, F_GETFL) & O_NONBLOCK) != 0);
    say("running ready", revents(fa, 0));
    say("running waitid nonblocking", wait_fd(fa, WEXITED, &si));
    show("running waitid WNOHANG", wait_fd(fa, WEXITED | WNOHANG, &si), &si, a);
    write(go[1], "x", 1);
    say("ended ready", revents(fa, 10000));
    show("ended waitid WNOWAIT", wait_fd(fa, WEXITED | WNOWAIT, &si), &si, a);
    say("still ready", revents(fa, 0));
    say("signal to ended", pidfd_send(fa, SIGTERM, NULL, 0));
    show("waitid reaps", wait_fd(fa, WEXITED, &si), &si, a);
    say("reaped ready", revents(fa, 0));
    say("signal to reaped", pidfd_send(fa, 0, NULL, 0));
    say("waitid reaped", wait_fd(fa, WEXITED, &si));
    say("open reaped", pidfd_open(a, 0));
    close(fa);

    /* A child that waits forever: epoll, SIGKILL, blocking waitid. */
    pid_t b2 = fork();
    if (b2 == 0) {
        for (;;)
            pause();
    }
    int fb = pidfd_open(b2, 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7};
    say("epoll add", epoll_ctl(ep, EPOLL_CTL_ADD, fb, &ev));
    struct epoll_event out[2];
    say("epoll running", epoll_wait(ep, out, 2, 0));
    siginfo_t fake;
    memset(&fake, 0, sizeof fake);
    fake.si_signo = SIGTERM;
    fake.si_code = SI_USER;
    say("claimed sender", pidfd_send(fb, SIGTERM, &fake, 0));
    say("signo mismatch", pidfd_send(fb, SIGINT, &fake, 0));
    say("kill", pidfd_send(fb, SIGKILL, NULL, 0));
    int n = epoll_wait(ep, out, 2, 10000);
    printf("epoll ended: %d events %#x data %llu\n", n, n > 0 ? out[0].events : 0,
           n > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
    show("waitid killed", wait_fd(fb, WEXITED, &si), &si, b2);
    close(fb);

    /* A child with a handler: a queued signal's siginfo reaches it. */
    int ready[2];
    pipe(ready);
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &old);
    pid_t c = fork();
    if (c == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_usr1;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGUSR1, &sa, NULL);
        write(ready[1], "r", 1);
        sigset_t none;
        sigemptyset(&none);
        while (!got_code)
            sigsuspend(&none);
        _exit(got_code == SI_QUEUE ? got_value : 1);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    char r;
    read(ready[0], &r, 1);
    int fc = pidfd_open(c, 0);
    siginfo_t q;
    memset(&q, 0, sizeof q);
    q.si_signo = SIGUSR1;
    q.si_code = SI_QUEUE;
    q.si_value.sival_int = 42;
    say("queued signal", pidfd_send(fc, SIGUSR1, &q, 0));
    show("waitid handled", wait_fd(fc, WEXITED, &si), &si, c);

    /* clone(CLONE_PIDFD): the pidfd where the parent's tid would go. */
    int cfd = -1;
    say("clone pidfd and settid", syscall(SYS_clone, CLONE_PIDFD | CLONE_PARENT_SETTID | SIGCHLD, 0, &cfd, 0, 0));
    say("clone pidfd, bad pointer", syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, 0, (int *)8, 0, 0));
    fflush(stdout);
    long d = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, 0, &cfd, 0, 0);
    if (d == 0)
        _exit(5);
    say("clone pidfd", cfd >= 0 ? 0 : -1);
    say("clone pidfd cloexec", fcntl(cfd, F_GETFD));
    show("waitid cloned", wait_fd(cfd, WEXITED, &si), &si, (pid_t)d);
    return 0;
}
