/* fork, exec, waitpid and friends: what a shell or a process supervisor does.
 * Prints only what must be the same natively and under forkvm (no pids). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static volatile sig_atomic_t chld_seen;
static void on_chld(int sig) { (void)sig; chld_seen = 1; }

static void show(const char *what, int st)
{
    if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("%s: killed by %d\n", what, WTERMSIG(st));
    else
        printf("%s: status %#x\n", what, st);
}

/* The program exec'd as "exec-child FD CLOEXECFD": reads its inherited pipe. */
static int exec_child(int argc, char **argv)
{
    if (argc < 4) return 100;
    int fd = atoi(argv[2]), cfd = atoi(argv[3]);
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    printf("exec child: read %zd '%s', cloexec fd %s\n", n, buf,
           fcntl(cfd, F_GETFD) == -1 && errno == EBADF ? "closed" : "open");
    printf("exec child: env FORKVM_T=%s\n", getenv("FORKVM_T") ? getenv("FORKVM_T") : "(none)");
    fflush(stdout);
    return 42;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
        return exec_child(argc, argv);
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_chld;
    sigaction(SIGCHLD, &sa, NULL);

    int st;
    int r0 = waitpid(-1, &st, WNOHANG);
    printf("no children: %d %s\n", r0, errno == ECHILD ? "ECHILD" : "?");

    /* Exit status, parent and pid, a copy of memory. */
    pid_t me = getpid();
    int shared = 1;
    pid_t c = fork();
    if (c == 0) {
        shared = 2;
        _exit(getppid() == me && getpid() != me ? 3 : 99);
    }
    printf("fork returned a pid: %s\n", c > 0 ? "yes" : "no");
    printf("waitpid returned it: %s\n", waitpid(c, &st, 0) == c ? "yes" : "no");
    show("child 1", st);
    printf("parent's memory unchanged: %d\n", shared);
    r0 = waitpid(c, &st, 0);
    printf("second wait: %d %s\n", r0, errno == ECHILD ? "ECHILD" : "?");

    /* Killed by a signal; WNOHANG while it runs. */
    int gate[2];
    if (pipe(gate)) return 1;
    c = fork();
    if (c == 0) {
        char b;
        close(gate[1]);
        while (read(gate[0], &b, 1) > 0) {}
        for (;;) pause();
    }
    close(gate[0]);
    printf("WNOHANG while running: %d\n", waitpid(c, &st, WNOHANG));
    kill(c, SIGTERM);
    waitpid(c, &st, 0);
    show("child 2", st);
    close(gate[1]);

    /* A pipe to a child: it counts bytes until EOF. */
    int p[2];
    if (pipe(p)) return 1;
    c = fork();
    if (c == 0) {
        close(p[1]);
        char buf[4096];
        long total = 0;
        ssize_t n;
        while ((n = read(p[0], buf, sizeof buf)) > 0) total += n;
        _exit(total % 251);
    }
    close(p[0]);
    char block[1000];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < 100; i++)
        if (write(p[1], block, sizeof block) != (ssize_t)sizeof block) return 1;
    close(p[1]);
    waitpid(c, &st, 0);
    show("pipe reader (100000 % 251)", st);

    /* fork + execve of ourselves with an inherited fd and a close-on-exec one. */
    if (pipe(p)) return 1;
    int cfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    c = fork();
    if (c == 0) {
        char a2[16], a3[16];
        snprintf(a2, sizeof a2, "%d", p[0]);
        snprintf(a3, sizeof a3, "%d", cfd);
        char *av[] = {argv[0], "exec-child", a2, a3, NULL};
        char *ev[] = {"FORKVM_T=exec", NULL};
        execve("/proc/self/exe", av, ev);
        execve(argv[0], av, ev);
        _exit(127);
    }
    if (write(p[1], "through exec", 12) != 12) return 1;
    waitpid(c, &st, 0);
    show("exec child", st);
    close(p[0]);
    close(p[1]);

    /* exec failures come back to the caller. */
    c = fork();
    if (c == 0) {
        char *av[] = {"x", NULL};
        execve("/nonexistent/program", av, environ);
        _exit(errno == ENOENT ? 20 : 21);
    }
    waitpid(c, &st, 0);
    show("exec of a missing file", st);

    /* posix_spawn (vfork/clone + exec inside libc). */
    char *sv[] = {argv[0], "exec-child", "0", "99", NULL};
    pid_t sp;
    int fds[2];
    if (pipe(fds)) return 1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    int r = posix_spawn(&sp, argv[0], &fa, NULL, sv, environ);
    printf("posix_spawn: %d\n", r);
    if (write(fds[1], "spawned", 7) != 7) return 1;
    close(fds[1]);
    waitpid(sp, &st, 0);
    show("spawned child", st);

    /* Process groups. */
    c = fork();
    if (c == 0) {
        setpgid(0, 0);
        _exit(getpgrp() == getpid() ? 0 : 1);
    }
    waitpid(c, &st, 0);
    show("own group", st);
    printf("SIGCHLD seen: %d\n", (int)chld_seen);
    return 0;
}
