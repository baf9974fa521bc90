/* Writes to a pipe whose reader is gone raise SIGPIPE, as on Linux: ignored
 * (EPIPE), caught (the handler runs, then EPIPE), in a child at its default
 * (the child dies of it), and at last in this process at its default. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t caught;
static void on_pipe(int sig) { caught = sig; }

static int broken_pipe(void) {
    int p[2];
    if (pipe(p) != 0) return -1;
    close(p[0]);
    return p[1];
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    int w = broken_pipe();
    ssize_t r = write(w, "x", 1);
    printf("ignored: write=%zd %s\n", r, strerror(errno));
    struct iovec iov = {.iov_base = "yz", .iov_len = 2};
    r = writev(w, &iov, 1);
    printf("ignored: writev=%zd %s\n", r, strerror(errno));

    signal(SIGPIPE, on_pipe);
    r = write(w, "x", 1);
    printf("caught: write=%zd %s, handler saw %d\n", r, strerror(errno), (int)caught);
    fflush(stdout);

    signal(SIGPIPE, SIG_DFL);
    pid_t pid = fork();
    if (pid == 0) {
        write(w, "x", 1);
        printf("child: not killed\n");
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child: signalled=%d sig=%d\n", WIFSIGNALED(st), WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    fflush(stdout);

    write(w, "x", 1);
    printf("parent: not killed\n");
    return 0;
}
