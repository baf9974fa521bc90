/* A tiny HTTP server whose every request forks a child that sleeps (it
 * would outlive the request), then answers with what fork returned:
 *   "forked\n" (fork worked) or "fork: <error>\n".
 * Under `forkvm serve` the child must end with the request's reset.
 * GET /spawn instead answers what posix_spawn of a missing program
 * returned and what a vfork child stored: "spawn 2, vfork store 42\n";
 * GET /hang vforks a child that never execs (no answer: its parent waits).
 * GET /wait forks a child that sleeps 200 ms and exits with 7, waits for
 * it, and answers "waited 7\n".
 *   fork_server [PORT]   listens on 127.0.0.1:PORT (default 8080) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static volatile int stored;

/* posix_spawn of a missing program, and a vfork child's store. */
static void spawn_and_vfork(char *body, size_t size)
{
    pid_t pid;
    char *av[] = {"no-such-program", NULL};
    int r = posix_spawn(&pid, "/nonexistent/no-such-program", NULL, NULL, av, environ);
    if (r == 0)
        waitpid(pid, NULL, 0);
    stored = 0;
    pid = vfork();
    if (pid == 0) {
        stored = 42;
        _exit(0);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
    snprintf(body, size, "spawn %d, vfork store %d\n", r, stored);
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 8080;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 64)) {
        perror("listen");
        return 1;
    }
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0) continue;
        char req[4096];
        size_t got = 0;
        while (got < sizeof req - 1) {
            ssize_t n = read(c, req + got, sizeof req - 1 - got);
            if (n <= 0) break;
            got += n;
            req[got] = 0;
            if (strstr(req, "\r\n\r\n")) break;
        }
        char body[128];
        if (strncmp(req, "GET /hang ", 10) == 0 && vfork() == 0)
            for (;;)
                pause();
        if (strncmp(req, "GET /wait ", 10) == 0) {
            pid_t w = fork();
            if (w == 0) {
                struct timespec d = {0, 200000000};
                nanosleep(&d, NULL);
                _exit(7);
            }
            int st = 0;
            pid_t r = waitpid(w, &st, 0);
            if (r == w && WIFEXITED(st))
                snprintf(body, sizeof body, "waited %d\n", WEXITSTATUS(st));
            else
                snprintf(body, sizeof body, "wait: %s\n", strerror(errno));
            goto answer;
        }
        if (strncmp(req, "GET /spawn ", 11) == 0) {
            spawn_and_vfork(body, sizeof body);
            goto answer;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(c);
            close(ls);
            sleep(60);
            _exit(0);
        }
        if (pid < 0)
            snprintf(body, sizeof body, "fork: %s\n", strerror(errno));
        else
            snprintf(body, sizeof body, "forked\n");
    answer:;
        char head[256];
        int hn = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                          strlen(body));
        if (write(c, head, hn) != hn || write(c, body, strlen(body)) < 0) {}
        close(c);
    }
}
