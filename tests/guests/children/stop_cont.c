/* Stopping and continuing children: SIGSTOP and SIGCONT from the parent,
 * wait4 with WUNTRACED/WCONTINUED, waitid with WSTOPPED/WCONTINUED, the
 * SIGCHLD codes (and SA_NOCLDSTOP), SIGKILL to a stopped child, a child
 * stopping itself with SIGTSTP, and SIGTSTP with a handler (no stop). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stopped_codes, continued_codes, other_codes;

static void on_chld(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    if (si->si_code == CLD_STOPPED)
        stopped_codes++;
    else if (si->si_code == CLD_CONTINUED)
        continued_codes++;
    else
        other_codes++;
}

static void nap(int ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t))
        ;
}

static void describe(const char *what, int st)
{
    if (WIFSTOPPED(st))
        printf("%s: stopped by %d\n", what, WSTOPSIG(st));
    else if (WIFCONTINUED(st))
        printf("%s: continued\n", what);
    else if (WIFSIGNALED(st))
        printf("%s: killed by %d\n", what, WTERMSIG(st));
    else if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
}

static void on_tstp(int sig)
{
    (void)sig;
    static const char m[] = "child: SIGTSTP handled, not stopped\n";
    write(1, m, sizeof m - 1);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    volatile long *counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_chld;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);

    pid_t c = fork();
    if (c == 0) {
        for (;;) {
            (*counter)++;
            nap(1);
        }
    }
    nap(30);
    int st = 0;
    printf("not stopped yet (WNOHANG|WUNTRACED): %d\n", waitpid(c, &st, WNOHANG | WUNTRACED));
    kill(c, SIGSTOP);
    pid_t w = waitpid(c, &st, WUNTRACED);
    describe(w == c ? "wait4 WUNTRACED" : "wait4 failed", st);
    long frozen = *counter;
    nap(100);
    printf("counter frozen while stopped: %s\n", *counter == frozen ? "yes" : "no");
    printf("stop reported once (WNOHANG|WUNTRACED): %d\n", waitpid(c, &st, WNOHANG | WUNTRACED));
    kill(c, SIGCONT);
    w = waitpid(c, &st, WCONTINUED);
    describe(w == c ? "wait4 WCONTINUED" : "wait4 failed", st);
    long moving = *counter;
    for (int i = 0; i < 2000 && *counter == moving; i++)
        nap(1);
    printf("counter moves again: %s\n", *counter != moving ? "yes" : "no");

    kill(c, SIGSTOP);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    waitid(P_PID, c, &si, WSTOPPED);
    printf("waitid WSTOPPED: code %s, status %d, pid matches %s\n",
           si.si_code == CLD_STOPPED ? "CLD_STOPPED" : "other", si.si_status, si.si_pid == c ? "yes" : "no");
    kill(c, SIGCONT);
    memset(&si, 0, sizeof si);
    waitid(P_PID, c, &si, WCONTINUED);
    printf("waitid WCONTINUED: code %s, status %d\n", si.si_code == CLD_CONTINUED ? "CLD_CONTINUED" : "other",
           si.si_status);

    kill(c, SIGSTOP);
    waitpid(c, &st, WUNTRACED);
    kill(c, SIGKILL);
    w = waitpid(c, &st, 0);
    describe(w == c ? "killed while stopped" : "wait failed", st);
    printf("SIGCHLD codes: stopped %s, continued %s, other %s\n", stopped_codes >= 1 ? "yes" : "no",
           continued_codes >= 1 ? "yes" : "no", other_codes >= 1 ? "yes" : "no");

    /* SA_NOCLDSTOP: stops and continues send no SIGCHLD. */
    sa.sa_flags |= SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    stopped_codes = continued_codes = 0;
    c = fork();
    if (c == 0) {
        raise(SIGTSTP); /* default action: stop */
        printf("child: continued after SIGTSTP\n");
        _exit(7);
    }
    waitpid(c, &st, WUNTRACED);
    describe("child stopped itself", st);
    kill(c, SIGCONT);
    waitpid(c, &st, 0);
    describe("then", st);
    printf("with SA_NOCLDSTOP, SIGCHLD for stop/continue: %s\n", stopped_codes + continued_codes ? "yes" : "no");

    c = fork();
    if (c == 0) {
        signal(SIGTSTP, on_tstp);
        raise(SIGTSTP);
        _exit(0);
    }
    waitpid(c, &st, WUNTRACED);
    describe("child with a SIGTSTP handler", st);
    return 0;
}
