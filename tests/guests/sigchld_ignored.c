/* A parent that ignores SIGCHLD (or sets SA_NOCLDWAIT) leaves no zombies:
 * a wait for its children ends with ECHILD once they are gone; with the
 * default action the child's status is kept for waitpid. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void one(const char *how) {
    pid_t c = fork();
    if (c == 0) _exit(3);
    int st = 0;
    pid_t r = waitpid(c, &st, 0);
    if (r == c)
        printf("%s: waitpid got the child, status %d\n", how, WEXITSTATUS(st));
    else
        printf("%s: waitpid = %d (%s)\n", how, (int)r, strerror(errno));
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGCHLD, SIG_IGN);
    one("SIG_IGN");
    struct sigaction sa = {0};
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = SA_NOCLDWAIT;
    sigaction(SIGCHLD, &sa, NULL);
    one("SA_NOCLDWAIT");
    signal(SIGCHLD, SIG_DFL);
    one("SIG_DFL");
    return 0;
}
