/* An HTTP/1.0 client written as any C client would be, for
 * crates/forkvm-cli/tests/outbound.rs (natively and under forkvm run).
 *
 *   fetch MODE IP PORT PATH
 *
 * MODE: "block" (blocking connect, read until EOF), "poll" (nonblocking
 * connect, poll for writable, SO_ERROR, poll for readable), "epoll" (the
 * same through epoll), "select". Prints the response, then "peer-port=N".
 * A failed connect prints "connect: ERRNO-NAME" and exits 1. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *ename(int e) {
    switch (e) {
    case ECONNREFUSED: return "ECONNREFUSED";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENETUNREACH: return "ENETUNREACH";
    default: return "other";
    }
}

/* Waits until fd is ready for `ev` (POLLIN or POLLOUT) by MODE's mechanism. */
static void wait_for(const char *mode, int fd, int ev) {
    if (!strcmp(mode, "poll")) {
        struct pollfd p = {fd, (short)ev, 0};
        if (poll(&p, 1, 20000) != 1) { puts("poll: not ready"); exit(3); }
    } else if (!strcmp(mode, "epoll")) {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event e = {.events = ev == POLLIN ? EPOLLIN : EPOLLOUT, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, 20000) != 1 || got.data.fd != fd) { puts("epoll: not ready"); exit(3); }
        close(ep);
    } else if (!strcmp(mode, "select")) {
        fd_set s;
        FD_ZERO(&s);
        FD_SET(fd, &s);
        struct timeval tv = {20, 0};
        int n = ev == POLLIN ? select(fd + 1, &s, NULL, NULL, &tv) : select(fd + 1, NULL, &s, NULL, &tv);
        if (n != 1) { puts("select: not ready"); exit(3); }
    }
}

int main(int argc, char **argv) {
    if (argc < 5) { fputs("usage: fetch MODE IP PORT PATH\n", stderr); return 2; }
    const char *mode = argv[1];
    int blocking = !strcmp(mode, "block");
    int v6 = strchr(argv[2], ':') != NULL;
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | (blocking ? 0 : SOCK_NONBLOCK), 0);
    if (fd < 0) { printf("socket: %s\n", ename(errno)); return 1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(atoi(argv[3]));
        inet_pton(AF_INET6, argv[2], &a->sin6_addr);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(atoi(argv[3]));
        inet_pton(AF_INET, argv[2], &a->sin_addr);
        len = sizeof *a;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        if (blocking || errno != EINPROGRESS) { printf("connect: %s\n", ename(errno)); return 1; }
        wait_for(mode, fd, POLLOUT);
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) { printf("connect: %s\n", ename(err)); return 1; }
        /* Linux: the first connect after completion returns 0, then EISCONN. */
        int c2 = connect(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : errno;
        int c3 = connect(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : errno;
        printf("again: %s %s\n", c2 == 0 ? "0" : c2 == EISCONN ? "EISCONN" : "other",
               c3 == 0 ? "0" : c3 == EISCONN ? "EISCONN" : "other");
    }
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) { puts("getpeername failed"); return 1; }
    int port = peer.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&peer)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&peer)->sin_port);
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: backend\r\n\r\n", argv[4]);
    for (int off = 0; off < n;) {
        ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN) { wait_for(mode, fd, POLLOUT); continue; }
        if (w < 0) { printf("send: %s\n", ename(errno)); return 1; }
        off += w;
    }
    shutdown(fd, SHUT_WR);
    char buf[4096];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EAGAIN) { wait_for(mode, fd, POLLIN); continue; }
        if (r < 0) { printf("read: %s\n", ename(errno)); return 1; }
        if (r == 0) break;
        fwrite(buf, 1, r, stdout);
    }
    printf("\npeer-port=%d\n", port);
    close(fd);
    return 0;
}
