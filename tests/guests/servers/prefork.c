/* A pre-fork server (crates/forkvm-cli/tests/servers.rs), natively and under
 * forkvm serve:
 *
 *   prefork PORT arbiter   the first process listens, forks one worker that
 *                          accepts, and watches it in a select() loop with a
 *                          timeout, as gunicorn's arbiter does
 *   prefork PORT sleeper   the same, the first process sleeping in sleep()
 *   prefork PORT daemon    the first process forks and exits; its child makes
 *                          a session, listens, forks the worker and waits
 *                          in sigsuspend, as a daemonising nginx does
 *
 * The worker remembers its pid and its parent's at start, as gunicorn's does,
 * and answers each request with how many it served, whether getpid and
 * getppid still give what it saved (a worker whose parent changed stops),
 * and whether the pipe its parent holds the other end of is still open (a
 * node cluster worker exits when its channel to the primary closes). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64)) { perror("listen"); exit(1); }
    return fd;
}

static long served;

/* Whether the pipe's write end is still open somewhere. */
static int pipe_open(int rd) {
    struct pollfd p = {.fd = rd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

static void worker(int ls, int from_parent) {
    pid_t me = getpid(), parent = getppid();
    /* Ready only once the parent waits (in select, sleep or sigsuspend). */
    usleep(200 * 1000);
    for (;;) {
        if (getppid() != parent) {
            fputs("worker: parent changed, stopping\n", stderr);
            exit(3);
        }
        fd_set r;
        FD_ZERO(&r);
        FD_SET(ls, &r);
        struct timeval tv = {.tv_sec = 1};
        if (select(ls + 1, &r, NULL, NULL, &tv) <= 0) continue;
        int c = accept(ls, NULL, NULL);
        if (c < 0) continue;
        char req[4096];
        size_t n = 0;
        while (n < sizeof req - 1) {
            ssize_t got = read(c, req + n, sizeof req - 1 - n);
            if (got <= 0) break;
            n += got;
            req[n] = 0;
            if (strstr(req, "\r\n\r\n")) break;
        }
        served++;
        char body[128], resp[256];
        int bl = snprintf(body, sizeof body, "count=%ld same_pid=%d same_parent=%d pipe_open=%d\n",
                          served, getpid() == me, getppid() == parent, pipe_open(from_parent));
        int rl = snprintf(resp, sizeof resp,
                          "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", bl,
                          body);
        write(c, resp, rl);
        close(c);
    }
}

/* Listens, forks the worker, and watches it until it ends. */
enum watch { BY_SELECT, BY_SLEEP, BY_SIGSUSPEND };

static void master(int port, enum watch how) {
    int ls = listen_on(port);
    int p[2];
    if (pipe(p)) { perror("pipe"); exit(1); }
    pid_t w = fork();
    if (w < 0) { perror("fork"); exit(1); }
    if (w == 0) {
        close(p[1]);
        worker(ls, p[0]);
    }
    close(p[0]);
    printf("listening on %d, worker started\n", port);
    fflush(stdout);
    for (;;) {
        int status;
        if (waitpid(w, &status, WNOHANG) == w) {
            fprintf(stderr, "master: worker ended (status %#x)\n", status);
            exit(1);
        }
        if (how == BY_SELECT) {
            struct timeval tv = {.tv_sec = 1};
            select(0, NULL, NULL, NULL, &tv);
        } else if (how == BY_SLEEP) {
            sleep(100);
        } else {
            sigset_t none;
            sigemptyset(&none);
            sigsuspend(&none);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) { fputs("usage: prefork PORT arbiter|sleeper|daemon\n", stderr); return 2; }
    int port = atoi(argv[1]);
    signal(SIGCHLD, SIG_DFL);
    if (!strcmp(argv[2], "arbiter")) {
        master(port, BY_SELECT);
    } else if (!strcmp(argv[2], "sleeper")) {
        master(port, BY_SLEEP);
    } else if (!strcmp(argv[2], "daemon")) {
        pid_t d = fork();
        if (d < 0) { perror("fork"); return 1; }
        if (d > 0) return 0;
        setsid();
        master(port, BY_SIGSUSPEND);
    }
    fputs("prefork: unknown mode\n", stderr);
    return 2;
}
