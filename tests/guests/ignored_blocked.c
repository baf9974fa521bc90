/* A blocked signal waits even when its action is SIG_IGN, as on Linux:
 * sigpending shows it, a signalfd reads it and sigwait takes it
 * (PostgreSQL's latches: SIGURG is ignored and blocked, and read from a
 * signalfd; another backend's kill must wake the epoll_wait on it).
 * Setting SIG_IGN drops a pending one; unblocking an ignored one drops it
 * without holding up a handled one pending with it. */
#define _GNU_SOURCE
#include "common.h"
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static void on_usr1(int sig) { handled = sig; }

static int pending(int sig) {
    sigset_t s;
    sigpending(&s);
    return sigismember(&s, sig);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    sigset_t urg;
    sigemptyset(&urg);
    sigaddset(&urg, SIGURG);
    signal(SIGURG, SIG_IGN);
    sigprocmask(SIG_BLOCK, &urg, NULL);

    /* From another process, read from a signalfd after poll. */
    int fd = signalfd(-1, &urg, SFD_NONBLOCK | SFD_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        usleep(20000);
        kill(parent, SIGURG);
        _exit(0);
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int n = poll(&pfd, 1, 10000);
    printf("poll on the signalfd: %d revents %#x\n", n, pfd.revents);
    struct signalfd_siginfo si;
    memset(&si, 0, sizeof si);
    ssize_t r = read(fd, &si, sizeof si);
    printf("read %zd: signo %u from the child %d\n", r, si.ssi_signo, (pid_t)si.ssi_pid == pid);
    waitpid(pid, NULL, 0);

    /* To itself: pending, taken by sigwait. */
    kill(getpid(), SIGURG);
    printf("pending while blocked and ignored: %d\n", pending(SIGURG));
    int sig = 0;
    sigwait(&urg, &sig);
    printf("sigwait took %d, pending now %d\n", sig, pending(SIGURG));

    /* SIG_IGN set while one is pending drops it; so does SIG_DFL for a
     * signal ignored by default. */
    signal(SIGURG, SIG_DFL);
    kill(getpid(), SIGURG);
    printf("pending under SIG_DFL: %d\n", pending(SIGURG));
    signal(SIGURG, SIG_IGN);
    printf("pending after SIG_IGN: %d\n", pending(SIGURG));
    signal(SIGURG, SIG_DFL);
    kill(getpid(), SIGURG);
    signal(SIGURG, SIG_DFL);
    printf("pending after SIG_DFL again: %d\n", pending(SIGURG));
    signal(SIGURG, SIG_IGN);

    /* Unblocking: the ignored one (SIGHUP, taken first by number) goes,
     * the handled one pending with it runs. */
    signal(SIGHUP, SIG_IGN);
    signal(SIGUSR1, on_usr1);
    sigset_t both;
    sigemptyset(&both);
    sigaddset(&both, SIGHUP);
    sigaddset(&both, SIGUSR1);
    sigprocmask(SIG_BLOCK, &both, NULL);
    kill(getpid(), SIGHUP);
    kill(getpid(), SIGUSR1);
    printf("both pending: %d %d\n", pending(SIGHUP), pending(SIGUSR1));
    sigprocmask(SIG_UNBLOCK, &both, NULL);
    printf("after unblocking: handled %d, pending %d %d\n", handled, pending(SIGHUP),
           pending(SIGUSR1));
    return 0;
}
