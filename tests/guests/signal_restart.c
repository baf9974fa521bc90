/* A handler with SA_RESTART makes an interrupted blocking read go on (glibc's
 * signal() sets it); without it the read fails with EINTR. A signal a
 * handler raises again while it is blocked runs once the handler returns,
 * and the SIGTERM idiom (reset to SIG_DFL, raise again) ends the process.
 * SA_RESETHAND resets only the handler: SA_SIGINFO and the others stay. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2];
static volatile sig_atomic_t alarms, usr1;

static void on_alarm(int s) {
    (void)s;
    alarms++;
    if (write(go[1], "g", 1) != 1) _exit(3); /* now the child may write */
}

static void on_usr1(int s) {
    if (usr1++ == 0) raise(s); /* blocked here: runs after this returns */
}

static volatile int oneshot_flags = -1, oneshot_default;

static void on_oneshot(int s, siginfo_t *si, void *uc) {
    (void)si, (void)uc;
    struct sigaction now;
    sigaction(s, NULL, &now);
    oneshot_flags = now.sa_flags & (SA_SIGINFO | SA_RESTART | SA_RESETHAND);
    oneshot_default = now.sa_handler == SIG_DFL;
}

static void on_term(int s) {
    printf("term handler, raising again\n");
    fflush(stdout);
    signal(s, SIG_DFL);
    raise(s);
}

static void interrupted_read(int flags) {
    int data[2];
    if (pipe(data) != 0 || pipe(go) != 0) _exit(2);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sa.sa_flags = flags;
    sigaction(SIGALRM, &sa, NULL);
    pid_t c = fork();
    if (c == 0) {
        char x;
        if (read(go[0], &x, 1) == 1 && write(data[1], "y", 1) == 1) _exit(0);
        _exit(1);
    }
    struct itimerval it = {{0, 0}, {0, 50000}};
    setitimer(ITIMER_REAL, &it, NULL);
    char y = 0;
    ssize_t r = read(data[0], &y, 1);
    int e = errno;
    printf("%s: read = %zd %s, alarms %d\n", flags ? "SA_RESTART" : "no SA_RESTART", r,
           r < 0 ? strerror(e) : (y == 'y' ? "'y'" : "?"), (int)alarms);
    if (r < 0) {
        r = read(data[0], &y, 1);
        printf("  read again = %zd\n", r);
    }
    waitpid(c, NULL, 0);
    alarms = 0;
    close(data[0]), close(data[1]), close(go[0]), close(go[1]);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    interrupted_read(SA_RESTART);
    interrupted_read(0);
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    printf("SIGUSR1 handler ran %d times\n", (int)usr1);
    struct sigaction sa = {0};
    sa.sa_sigaction = on_oneshot;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_RESTART;
    sigaction(SIGUSR2, &sa, NULL);
    raise(SIGUSR2);
    printf("SA_RESETHAND: in the handler, default %d, SA_SIGINFO %d, SA_RESTART %d, SA_RESETHAND %d\n",
           oneshot_default, (oneshot_flags & SA_SIGINFO) != 0, (oneshot_flags & SA_RESTART) != 0,
           (oneshot_flags & SA_RESETHAND) != 0);
    signal(SIGTERM, on_term);
    raise(SIGTERM);
    printf("still alive\n");
    return 0;
}
