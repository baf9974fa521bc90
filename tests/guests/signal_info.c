/* What a signal carries and how signals queue, as Linux does it: si_code,
 * si_pid/si_uid of the sender, si_value of sigqueue and of timers, SIGCHLD's
 * child and status, real-time signals queued one per send and taken lowest
 * number first while standard ones coalesce, sigqueue refusing a forged
 * si_code sent to another process, and signalfd reads, poll and epoll.
 * Prints relations ("pid is the sender") rather than raw pids. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static const char *code_name(int code) {
    switch (code) {
    case SI_USER: return "SI_USER";
    case SI_KERNEL: return "SI_KERNEL";
    case SI_QUEUE: return "SI_QUEUE";
    case SI_TIMER: return "SI_TIMER";
    case SI_TKILL: return "SI_TKILL";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "code %d", code);
        return buf;
    }
    }
}

static const char *who(pid_t pid, pid_t sender) {
    if (pid == sender) return "the sender";
    if (pid == getpid()) return "this process";
    return "someone else";
}

/* Handlers record what they got; main prints it. */
static volatile int got_n;
static volatile int got_sig[16], got_code[16], got_val[16];
static volatile pid_t got_pid[16];
static volatile uid_t got_uid[16];

static void record(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (got_n < 16) {
        got_sig[got_n] = sig;
        got_code[got_n] = si->si_code;
        got_pid[got_n] = si->si_pid;
        got_uid[got_n] = si->si_uid;
        got_val[got_n] = si->si_value.sival_int;
        got_n++;
    }
}

static void on(int sig, int block_all) {
    struct sigaction sa = {0};
    sa.sa_sigaction = record;
    sa.sa_flags = SA_SIGINFO;
    if (block_all) sigfillset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* Standard signals by number, real-time ones from SIGRTMIN (35 in musl, 34 in glibc). */
static const char *sig_name(int sig) {
    static char buf[4][32];
    static int k;
    char *b = buf[k++ % 4];
    if (sig >= SIGRTMIN)
        snprintf(b, 32, "SIGRTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(b, 32, "%d", sig);
    return b;
}

static void print_got(const char *what, pid_t sender) {
    for (int i = 0; i < got_n; i++) {
        printf("%s: sig %s %s pid is %s, uid %s, value %d\n", what, sig_name(got_sig[i]),
               code_name(got_code[i]), who(got_pid[i], sender),
               got_uid[i] == getuid() ? "mine" : "other", got_val[i]);
    }
    got_n = 0;
}

static int queue(pid_t pid, int sig, int v) {
    union sigval val = {.sival_int = v};
    return sigqueue(pid, sig, val);
}

static void block(int sig) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_BLOCK, &s, NULL);
}

/* Takes every pending signal of `set` without waiting, printing each. */
static void drain(const char *what, const sigset_t *set, pid_t sender) {
    struct timespec zero = {0, 0};
    siginfo_t si;
    int sig;
    while ((sig = sigtimedwait(set, &si, &zero)) > 0) {
        printf("%s: sig %s %s pid is %s, value %d\n", what, sig_name(sig), code_name(si.si_code),
               who(si.si_pid, sender), si.si_value.sival_int);
    }
    printf("%s: then %s\n", what, errno_name(errno));
}

static sigjmp_buf jb;
static void *fault_addr;
static int fault_code;
static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    fault_addr = si->si_addr;
    fault_code = si->si_code;
    siglongjmp(jb, 1);
}

static void read_signalfd(int fd, const char *what, pid_t sender) {
    struct signalfd_siginfo r[8];
    ssize_t n = read(fd, r, sizeof r);
    if (n < 0) {
        printf("%s: read %s\n", what, errno_name(errno));
        return;
    }
    printf("%s: read %zd records (%zd bytes each)\n", what, n / (ssize_t)sizeof r[0], sizeof r[0]);
    for (ssize_t i = 0; i < n / (ssize_t)sizeof r[0]; i++) {
        printf("%s: sig %s %s pid is %s, uid %s, int %d, status %d\n", what,
               sig_name((int)r[i].ssi_signo), code_name(r[i].ssi_code), who((pid_t)r[i].ssi_pid, sender),
               r[i].ssi_uid == getuid() ? "mine" : "other", r[i].ssi_int, r[i].ssi_status);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t me = getpid();

    /* kill, raise (tgkill) and sigqueue to itself. */
    on(SIGUSR1, 0);
    kill(me, SIGUSR1);
    raise(SIGUSR1);
    queue(me, SIGUSR1, 42);
    print_got("self", me);

    /* A standard signal sent twice while blocked is delivered once; each
     * real-time one is queued with its value and taken lowest number first,
     * in the order sent within one number. */
    block(SIGUSR1);
    for (int i = 0; i < 3; i++) block(SIGRTMIN + i);
    /* Each handler blocks the others: Linux would otherwise stack the
     * frames of all of them at once and run the last one first. */
    on(SIGUSR1, 1);
    on(SIGRTMIN, 1);
    on(SIGRTMIN + 1, 1);
    on(SIGRTMIN + 2, 1);
    kill(me, SIGUSR1);
    kill(me, SIGUSR1);
    queue(me, SIGRTMIN + 2, 1);
    queue(me, SIGRTMIN, 2);
    queue(me, SIGRTMIN + 1, 3);
    queue(me, SIGRTMIN, 4);
    kill(me, SIGRTMIN + 1);
    sigset_t pend;
    sigpending(&pend);
    printf("pending: USR1 %d RTMIN %d RTMIN+1 %d RTMIN+2 %d RTMIN+3 %d\n", sigismember(&pend, SIGUSR1),
           sigismember(&pend, SIGRTMIN), sigismember(&pend, SIGRTMIN + 1),
           sigismember(&pend, SIGRTMIN + 2), sigismember(&pend, SIGRTMIN + 3));
    sigset_t all;
    sigemptyset(&all);
    sigaddset(&all, SIGUSR1);
    for (int i = 0; i < 3; i++) sigaddset(&all, SIGRTMIN + i);
    sigprocmask(SIG_UNBLOCK, &all, NULL);
    print_got("unblocked", me);

    /* The same, taken by sigtimedwait. */
    sigprocmask(SIG_BLOCK, &all, NULL);
    queue(me, SIGRTMIN + 1, 5);
    queue(me, SIGRTMIN, 6);
    queue(me, SIGRTMIN + 1, 7);
    kill(me, SIGUSR1);
    kill(me, SIGUSR1);
    drain("sigtimedwait", &all, me);

    /* rt_tgsigqueueinfo to its own thread, rt_sigqueueinfo with a code of
     * its own to itself (allowed), bad signal numbers. */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGRTMIN;
    si.si_code = SI_QUEUE;
    si.si_pid = me;
    si.si_uid = getuid();
    si.si_value.sival_int = 8;
    long r = syscall(SYS_rt_tgsigqueueinfo, me, (pid_t)syscall(SYS_gettid), SIGRTMIN, &si);
    printf("rt_tgsigqueueinfo to itself: %ld\n", r);
    si.si_code = SI_USER;
    si.si_value.sival_int = 9;
    r = syscall(SYS_rt_sigqueueinfo, me, SIGRTMIN, &si);
    printf("rt_sigqueueinfo SI_USER to itself: %ld\n", r);
    drain("own queueinfo", &all, me);
    errno = 0;
    r = syscall(SYS_rt_sigqueueinfo, me, 65, &si);
    printf("rt_sigqueueinfo signal 65: %ld %s\n", r, errno_name(errno));

    /* A fault keeps its own code and address. */
    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    if (sigsetjmp(jb, 1) == 0) {
        volatile int *volatile bad = (int *)16;
        *bad = 1;
    }
    printf("SIGSEGV: code %d, address %s\n", fault_code,
           fault_addr == (void *)16 ? "the faulting one" : "wrong");

    /* SIGALRM of an interval timer: SI_KERNEL. */
    block(SIGALRM);
    struct itimerval it = {{0, 0}, {0, 2000}};
    setitimer(ITIMER_REAL, &it, NULL);
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    int sig = sigwaitinfo(&alrm, &si);
    printf("setitimer: sig %d %s\n", sig, code_name(si.si_code));

    /* A POSIX timer's signal: SI_TIMER and its sigev_value. */
    block(SIGRTMIN + 4);
    struct sigevent sev = {0};
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGRTMIN + 4;
    sev.sigev_value.sival_int = 1234;
    timer_t timer;
    timer_create(CLOCK_MONOTONIC, &sev, &timer);
    struct itimerspec its = {{0, 0}, {0, 2000000}};
    timer_settime(timer, 0, &its, NULL);
    sigset_t tset;
    sigemptyset(&tset);
    sigaddset(&tset, SIGRTMIN + 4);
    sig = sigwaitinfo(&tset, &si);
    printf("timer: SIGRTMIN%+d %s value %d overrun %d\n", sig - SIGRTMIN, code_name(si.si_code),
           si.si_value.sival_int, si.si_overrun);
    timer_delete(timer);

    /* signalfd: records of the pending signals of its mask. */
    sigset_t fset;
    sigemptyset(&fset);
    sigaddset(&fset, SIGUSR2);
    sigaddset(&fset, SIGRTMIN + 2);
    sigaddset(&fset, SIGCHLD);
    sigprocmask(SIG_BLOCK, &fset, NULL);
    int sfd = signalfd(-1, &fset, SFD_NONBLOCK | SFD_CLOEXEC);
    printf("signalfd: %s, cloexec %d\n", sfd >= 0 ? "made" : errno_name(errno),
           (fcntl(sfd, F_GETFD) & FD_CLOEXEC) != 0);
    read_signalfd(sfd, "empty signalfd", me);
    struct pollfd pfd = {.fd = sfd, .events = POLLIN};
    printf("poll empty: %d\n", poll(&pfd, 1, 0));
    kill(me, SIGUSR2);
    queue(me, SIGRTMIN + 2, 10);
    queue(me, SIGRTMIN + 2, 11);
    int ready = poll(&pfd, 1, 0);
    printf("poll: %d revents %#x\n", ready, pfd.revents);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    struct epoll_event out;
    ready = epoll_wait(ep, &out, 1, 0);
    printf("epoll: %d data %u\n", ready, out.data.u32);
    read_signalfd(sfd, "signalfd", me);
    printf("epoll after the read: %d\n", epoll_wait(ep, &out, 1, 0));
    /* A short buffer: EINVAL. */
    char small[16];
    kill(me, SIGUSR2);
    ssize_t got = read(sfd, small, sizeof small);
    printf("read of 16 bytes: %zd %s\n", got, errno_name(errno));
    read_signalfd(sfd, "after it", me);

    /* Signals from other processes: kill and sigqueue from a child carry
     * the child's pid; SIGCHLD its status; a forged code is refused. */
    pid_t child = fork();
    if (child == 0) {
        pid_t parent = getppid();
        kill(parent, SIGUSR2);
        queue(parent, SIGRTMIN + 2, 77);
        memset(&si, 0, sizeof si);
        si.si_signo = SIGRTMIN + 2;
        si.si_code = SI_USER;
        errno = 0;
        long f = syscall(SYS_rt_sigqueueinfo, parent, SIGRTMIN + 2, &si);
        si.si_code = SI_KERNEL;
        long k = syscall(SYS_rt_sigqueueinfo, parent, SIGRTMIN + 2, &si);
        si.si_code = SI_QUEUE;
        si.si_uid = getuid();
        si.si_value.sival_int = 78;
        long q = syscall(SYS_rt_sigqueueinfo, parent, SIGRTMIN + 2, &si);
        printf("child: forged SI_USER %ld, SI_KERNEL %ld (%s), SI_QUEUE %ld\n", f, k,
               errno_name(errno), q);
        _exit(7);
    }
    int st;
    waitpid(child, &st, 0);
    int bfd = signalfd(sfd, &fset, 0); /* the same fd, now blocking */
    printf("signalfd on itself: %s\n", bfd == sfd ? "same fd" : errno_name(errno));
    fcntl(sfd, F_SETFL, 0);
    read_signalfd(sfd, "from the child", child);

    /* A child killed by a signal: CLD_KILLED. */
    child = fork();
    if (child == 0) {
        for (;;) pause();
    }
    kill(child, SIGTERM);
    waitpid(child, &st, 0);
    struct signalfd_siginfo rec;
    memset(&rec, 0, sizeof rec);
    ssize_t n = read(sfd, &rec, sizeof rec);
    printf("killed child: %zd bytes, sig %u code %s pid is %s, status %d\n", n, rec.ssi_signo,
           rec.ssi_code == CLD_KILLED ? "CLD_KILLED" : code_name(rec.ssi_code),
           who((pid_t)rec.ssi_pid, child), rec.ssi_status);

    /* A blocking read waits for a signal another process sends. */
    sigset_t rset;
    sigemptyset(&rset);
    sigaddset(&rset, SIGRTMIN + 2);
    int rfd = signalfd(-1, &rset, 0);
    child = fork();
    if (child == 0) {
        usleep(20000);
        queue(getppid(), SIGRTMIN + 2, 99);
        _exit(0);
    }
    n = read(rfd, &rec, sizeof rec);
    printf("blocking read: %zd bytes, %s value %d pid is %s\n", n, code_name(rec.ssi_code),
           rec.ssi_int, who((pid_t)rec.ssi_pid, child));
    waitpid(child, &st, 0);
    n = read(sfd, &rec, sizeof rec);
    printf("its SIGCHLD: sig %u code %s status %d\n", rec.ssi_signo,
           rec.ssi_code == CLD_EXITED ? "CLD_EXITED" : code_name(rec.ssi_code), rec.ssi_status);
    close(sfd);
    close(rfd);
    return 0;
}
