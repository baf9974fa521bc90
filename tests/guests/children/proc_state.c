/* The state another process shows in /proc/<pid>/stat: 'R' while it
 * computes, 'S' while it waits in a call. A parent that waits for its
 * child to be 'S' before signalling it (LTP's TST_PROCESS_STATE_WAIT)
 * then interrupts the child's wait (EINTR); with 'S' shown always, the
 * signal came before the wait began and the wait went on. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char state_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close = strrchr(buf, ')');
    return close && close[1] == ' ' ? close[2] : '?';
}

/* Waits up to 5 s for `pid` to show `want`; says whether it did. */
static int wait_for_state(pid_t pid, char want)
{
    for (int i = 0; i < 5000; i++) {
        if (state_of(pid) == want)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void on_usr1(int s) { (void)s; }

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    volatile int *go = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int p[2];
    pipe(p);
    pid_t c = fork();
    if (c == 0) {
        while (!__atomic_load_n(go, __ATOMIC_SEQ_CST)) {
        }
        char b;
        read(p[0], &b, 1);
        _exit(0);
    }
    printf("computing: %c\n", state_of(c));
    __atomic_store_n(go, 1, __ATOMIC_SEQ_CST);
    printf("reading a pipe shows S: %s\n", wait_for_state(c, 'S') ? "yes" : "no");
    write(p[1], "x", 1);
    waitpid(c, NULL, 0);

    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    c = fork();
    if (c == 0) {
        int ep = epoll_create1(0);
        struct epoll_event ev;
        int r = epoll_wait(ep, &ev, 1, 5000);
        printf("child's epoll_wait: %d %s\n", r, r < 0 ? strerror(errno) : "-");
        _exit(0);
    }
    if (wait_for_state(c, 'S'))
        kill(c, SIGUSR1);
    waitpid(c, NULL, 0);
    return 0;
}
