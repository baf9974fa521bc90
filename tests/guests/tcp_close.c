/* Loopback TCP after the peer closes, as Linux does it: poll reports
 * POLLIN|POLLRDHUP (no POLLHUP: only our side is still open) and read gives
 * 0; the first send after the close succeeds and draws a reset
 * (POLLERR|POLLHUP), the next one is EPIPE with SIGPIPE. Forkvm treated a
 * close as the end of both directions (POLLHUP, and EPIPE at once). Also a
 * half close each way, a close with unread data (a reset: ECONNRESET, then
 * EOF), a close with SO_LINGER on and 0 (a reset too: Go's
 * TestNotTemporaryRead) and SHUT_RD, which TCP does not tell the peer. Each step waits for
 * the state it shows (poll with a timeout), never for a time. */
#define _GNU_SOURCE
#include "common.h"
#include "tcp_pair.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig) {
    (void)sig;
    sigpipes++;
}

static const char *ename(int e) {
    switch (e) {
    case ECONNRESET: return "ECONNRESET";
    case ENOTCONN: return "ENOTCONN";
    default: return errno_name(e);
    }
}

/* getpeername's result: 0 or -1 with errno. */
static long peer_of(int fd) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    return getpeername(fd, (struct sockaddr *)&a, &n);
}

static void show(const char *what, long r) {
    if (r < 0)
        printf("%s: %s\n", what, ename(errno));
    else
        printf("%s: %ld\n", what, r);
}

/* A connected pair: *c the connecting end, *s the accepted one. */

/* Waits (up to 10 s) until `fd` shows one of `until` among the bits poll
 * gives for POLLIN|POLLOUT|POLLRDHUP, then prints them. */
static void poll_until(const char *what, int fd, short until) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    for (int i = 0; i < 1000; i++) {
        p.revents = 0;
        if (poll(&p, 1, 10) < 0) {
            printf("poll failed\n");
            exit(1);
        }
        if (p.revents & until)
            break;
    }
    printf("%s: poll %s%s%s%s%s\n", what, p.revents & POLLIN ? "IN " : "", p.revents & POLLOUT ? "OUT " : "",
           p.revents & POLLRDHUP ? "RDHUP " : "", p.revents & POLLHUP ? "HUP " : "",
           p.revents & POLLERR ? "ERR" : "");
    /* Only POLLIN asked: HUP and ERR come anyway. */
    struct pollfd q = {.fd = fd, .events = POLLIN};
    poll(&q, 1, 0);
    printf("%s: poll(POLLIN) %#x\n", what, q.revents);
}

static int so_error(int fd) {
    int e = -1;
    socklen_t l = sizeof e;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
    return e;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGPIPE, on_sigpipe);
    listen_on_loopback();
    char b[16];
    int c, s;

    printf("-- the peer closes\n");
    pair(&c, &s);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP}, got;
    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
    close(s);
    poll_until("after the close", c, POLLRDHUP);
    int k = epoll_wait(ep, &got, 1, 0);
    printf("epoll: %d %s%s%s\n", k, got.events & EPOLLIN ? "IN " : "", got.events & EPOLLRDHUP ? "RDHUP " : "",
           got.events & EPOLLHUP ? "HUP" : "");
    show("read", read(c, b, sizeof b));
    show("getpeername", peer_of(c));
    show("first send", send(c, "x", 1, 0));
    poll_until("after the first send", c, POLLERR);
    show("getpeername", peer_of(c));
    k = epoll_wait(ep, &got, 1, 0);
    printf("epoll: %d %s%s%s%s\n", k, got.events & EPOLLIN ? "IN " : "", got.events & EPOLLRDHUP ? "RDHUP " : "",
           got.events & EPOLLHUP ? "HUP " : "", got.events & EPOLLERR ? "ERR" : "");
    show("read", read(c, b, sizeof b));
    show("second send", send(c, "y", 1, 0));
    printf("SIGPIPE: %d\n", (int)sigpipes);
    show("SO_ERROR", so_error(c));
    poll_until("after the second send", c, POLLHUP);
    show("third send", send(c, "z", 1, MSG_NOSIGNAL));
    printf("SIGPIPE: %d\n", (int)sigpipes);
    show("read", read(c, b, sizeof b));
    close(ep);
    close(c);

    printf("-- the first write after the close\n");
    pair(&c, &s);
    close(s);
    poll_until("after the close", c, POLLRDHUP);
    show("write", write(c, "x", 1));
    poll_until("after the write", c, POLLERR);
    show("SO_ERROR", so_error(c));
    show("write", write(c, "y", 1));
    printf("SIGPIPE: %d\n", (int)sigpipes);
    close(c);

    printf("-- the peer shuts down its sending side\n");
    pair(&c, &s);
    shutdown(s, SHUT_WR);
    poll_until("peer SHUT_WR", c, POLLRDHUP);
    show("read", read(c, b, sizeof b));
    show("send", send(c, "abc", 3, 0));
    show("peer reads", recv(s, b, sizeof b, 0));
    shutdown(c, SHUT_WR);
    poll_until("both SHUT_WR", c, POLLHUP);
    poll_until("both SHUT_WR (peer)", s, POLLHUP);
    close(c);
    close(s);

    printf("-- the peer closes with data unread\n");
    pair(&c, &s);
    send(c, "unread", 6, 0);
    /* Wait until the peer has the bytes, so its close drops them. */
    struct pollfd p = {.fd = s, .events = POLLIN};
    poll(&p, 1, 10000);
    close(s);
    poll_until("after the close", c, POLLERR);
    show("getpeername", peer_of(c));
    show("read", read(c, b, sizeof b));
    poll_until("after the read", c, POLLHUP);
    show("read", read(c, b, sizeof b));
    show("send", send(c, "x", 1, MSG_NOSIGNAL));
    close(c);

    printf("-- the peer shuts down its reading side\n");
    pair(&c, &s);
    shutdown(s, SHUT_RD);
    show("send", send(c, "abc", 3, MSG_NOSIGNAL));
    p = (struct pollfd){.fd = s, .events = POLLIN};
    poll(&p, 1, 10000);
    poll_until("peer after SHUT_RD", s, POLLIN);
    show("peer reads", recv(s, b, sizeof b, MSG_DONTWAIT));
    show("peer reads", recv(s, b, sizeof b, MSG_DONTWAIT));
    close(c);
    close(s);

    printf("-- the peer closes with SO_LINGER on and 0 seconds\n");
    pair(&c, &s);
    struct linger lg = {.l_onoff = 1, .l_linger = 5}, got_lg;
    socklen_t lgn = sizeof got_lg;
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    lg.l_onoff = 0; /* off again: the time stays */
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    getsockopt(s, SOL_SOCKET, SO_LINGER, &got_lg, &lgn);
    printf("SO_LINGER after off: %d %d\n", got_lg.l_onoff, got_lg.l_linger);
    lg = (struct linger){.l_onoff = 1, .l_linger = 0};
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    lgn = sizeof got_lg;
    getsockopt(s, SOL_SOCKET, SO_LINGER, &got_lg, &lgn);
    printf("SO_LINGER: %d %d\n", got_lg.l_onoff, got_lg.l_linger);
    close(s);
    poll_until("after the abortive close", c, POLLERR);
    show("getpeername", peer_of(c));
    show("read", read(c, b, sizeof b));
    close(c);

    /* A reset ends the connection (getpeername: ENOTCONN, as python's ssl
     * module checks before a handshake) but what came before it stays
     * readable, ahead of the error. */
    printf("-- the peer sends, then closes with SO_LINGER on and 0 seconds\n");
    pair(&c, &s);
    send(s, "bye", 3, 0);
    poll_until("data", c, POLLIN);
    show("getpeername", peer_of(c));
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(s);
    poll_until("after the abortive close", c, POLLERR);
    show("getpeername", peer_of(c));
    show("read", read(c, b, sizeof b));
    show("read", read(c, b, sizeof b));
    show("read", read(c, b, sizeof b));
    show("getpeername", peer_of(c));
    close(c);
    printf("SIGPIPE: %d\n", (int)sigpipes);
    return 0;
}
