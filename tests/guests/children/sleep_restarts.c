/* Signals with nothing to do do not end a sleep: Linux restarts nanosleep
 * and clock_nanosleep when no handler ran. A child's exit (SIGCHLD, ignored
 * by default), an ignored SIGUSR1, and a SIGSTOP then SIGCONT from a child
 * each come during a sleep, which must return 0 after its whole time (a
 * handler still ends one with EINTR: sleep_signals.c). Times are printed
 * only as "full"/"short" (a sleep never returns 0 before its time is up),
 * and the output is the same whenever the signals come. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void pause_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* Sleeps `ms` by nanosleep (or clock_nanosleep when `clock` is set) and
 * reports the result. */
static void sleep_and_report(const char *what, long ms, int clock)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem = {0, 0};
    double t0 = now();
    int r = clock ? clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem) : nanosleep(&req, &rem);
    if (clock && r != 0) {
        errno = r;
        r = -1;
    }
    int full = now() - t0 >= (double)ms / 1000.0 - 0.001;
    printf("%s: %d %s %s\n", what, r, r ? strerror(errno) : "ok", full ? "full" : "short");
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t me = getpid();

    /* A child that exits at once: SIGCHLD, default disposition. */
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    sleep_and_report("child exits", 400, 0);
    waitpid(c, NULL, 0);

    /* An ignored signal from a child. */
    signal(SIGUSR1, SIG_IGN);
    c = fork();
    if (c == 0) {
        pause_ms(100);
        kill(me, SIGUSR1);
        _exit(0);
    }
    sleep_and_report("ignored signal", 400, 1);
    waitpid(c, NULL, 0);

    /* Stopped and continued by a child mid-sleep. */
    c = fork();
    if (c == 0) {
        pause_ms(100);
        kill(me, SIGSTOP);
        pause_ms(100);
        kill(me, SIGCONT);
        _exit(0);
    }
    sleep_and_report("stopped and continued", 600, 0);
    waitpid(c, NULL, 0);

    /* The same in a child, stopped and continued by its parent. */
    c = fork();
    if (c == 0) {
        sleep_and_report("child stopped and continued", 600, 1);
        _exit(0);
    }
    pause_ms(100);
    kill(c, SIGSTOP);
    int st;
    waitpid(c, &st, WUNTRACED);
    printf("child stopped: %d\n", WIFSTOPPED(st));
    kill(c, SIGCONT);
    waitpid(c, &st, 0);
    printf("child exited: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);

    return 0;
}
