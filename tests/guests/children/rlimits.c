/* Lowered resource limits are enforced: RLIMIT_NOFILE bounds new
 * descriptors (open, dup2, F_DUPFD, poll's count) and RLIMIT_CPU sends
 * SIGXCPU at the soft limit and SIGKILL at the hard one. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *err(int r) { return r < 0 ? strerror(errno) : "ok"; }

static void on_xcpu(int s)
{
    (void)s;
    static int once;
    if (!once++) {
        static const char m[] = "child: SIGXCPU at the soft limit\n";
        write(1, m, sizeof m - 1);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    /* Whatever descriptors the caller left open do not count. */
    for (int i = 3; i < 1024; i++)
        close(i);
    struct rlimit r = {16, 16};
    printf("lower NOFILE to 16: %s\n", err(setrlimit(RLIMIT_NOFILE, &r)));
    getrlimit(RLIMIT_NOFILE, &r);
    printf("now %lu/%lu\n", (unsigned long)r.rlim_cur, (unsigned long)r.rlim_max);
    int n = 0, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    printf("opened %d more, then %s\n", n, strerror(errno));
    printf("dup2 to 20: %s\n", err(dup2(0, 20)));
    printf("F_DUPFD from 16: %s\n", err(fcntl(0, F_DUPFD, 16)));
    struct pollfd pf[17];
    for (int i = 0; i < 17; i++) {
        pf[i].fd = 0;
        pf[i].events = 0;
    }
    printf("poll of 17: %s\n", err(poll(pf, 17, 0)));
    r.rlim_cur = 32;
    printf("soft above hard: %s\n", err(setrlimit(RLIMIT_NOFILE, &r)));
    r.rlim_cur = 8;
    r.rlim_max = 16;
    printf("soft 8: %s\n", err(setrlimit(RLIMIT_NOFILE, &r)));
    printf("an fd above it stays usable: %s\n", err(fcntl(12, F_GETFD)));
    close(3);
    printf("a new one below it: %d\n", open("/dev/null", O_RDONLY));
    close(3);
    for (int i = 4; i < 16; i++)
        close(i);

    pid_t c = fork();
    if (c == 0) {
        signal(SIGXCPU, on_xcpu);
        struct rlimit cpu = {1, 2};
        setrlimit(RLIMIT_CPU, &cpu);
        volatile unsigned long x = 0;
        for (;;)
            x++;
    }
    int st;
    waitpid(c, &st, 0);
    printf("child %s by %d\n", WIFSIGNALED(st) ? "killed" : "exited",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 0;
}
