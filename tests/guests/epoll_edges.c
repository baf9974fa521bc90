/* Edge-triggered epoll over the kinds of connection Go's netpoller uses
 * (loopback TCP, an AF_UNIX stream pair, a bound AF_UNIX datagram socket,
 * a pipe): each round drains the reader, the writer sends once more, and
 * epoll_wait must report the reader again although no look saw it drop.
 * The same for a listener: accept until EAGAIN, then one more connects. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int rounds(const char *kind, int a, int b, int dgram)
{
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};
    ev.data.fd = a;
    epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev);
    ev.data.fd = b;
    epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev);
    char buf[128] = {0};
    struct epoll_event out[8];
    epoll_wait(ep, out, 8, 100); /* the first EPOLLOUT edges */
    for (int i = 0; i < 200; i++) {
        if (read(a, buf, sizeof buf) != -1 || errno != EAGAIN) {
            printf("%s round %d: the reader was not empty\n", kind, i);
            return 1;
        }
        if (write(b, buf, sizeof buf) != sizeof buf) {
            printf("%s round %d: write: %s\n", kind, i, strerror(errno));
            return 1;
        }
        int n = epoll_wait(ep, out, 8, 5000), got = 0;
        for (int k = 0; k < n; k++)
            got |= out[k].data.fd == a && (out[k].events & EPOLLIN);
        if (!got) {
            printf("%s round %d: no EPOLLIN for the reader (%d events)\n", kind, i, n);
            return 1;
        }
        if (read(a, buf, sizeof buf) != sizeof buf) {
            printf("%s round %d: short read\n", kind, i);
            return 1;
        }
    }
    printf("%s: 200 rounds, every refill reported%s\n", kind, dgram ? " (datagrams)" : "");
    close(ep);
    return 0;
}

static int listener_rounds(void)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    bind(ls, (void *)&sa, sl);
    listen(ls, 16);
    getsockname(ls, (void *)&sa, &sl);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET}, out[4];
    ev.data.fd = ls;
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    connect(c, (void *)&sa, sl);
    if (epoll_wait(ep, out, 4, 5000) != 1) {
        printf("listener: the first connection was not reported\n");
        return 1;
    }
    for (int i = 0; i < 20; i++) {
        int a = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
        if (a < 0 || accept4(ls, NULL, NULL, SOCK_NONBLOCK) != -1 || errno != EAGAIN) {
            printf("listener round %d: accept until EAGAIN failed\n", i);
            return 1;
        }
        close(a);
        close(c);
        c = socket(AF_INET, SOCK_STREAM, 0);
        connect(c, (void *)&sa, sl);
        if (epoll_wait(ep, out, 4, 5000) != 1) {
            printf("listener round %d: the next connection was not reported\n", i);
            return 1;
        }
    }
    printf("listener: 20 rounds, every new connection reported\n");
    close(c);
    close(ls);
    close(ep);
    return 0;
}

int main(void)
{
    int bad = 0;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    bind(ls, (void *)&sa, sl);
    listen(ls, 1);
    getsockname(ls, (void *)&sa, &sl);
    int b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(b, (void *)&sa, sl);
    int a = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
    bad |= rounds("loopback TCP", a, b, 0);

    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    bad |= rounds("AF_UNIX stream pair", sv[0], sv[1], 0);

    struct sockaddr_un un = {.sun_family = AF_UNIX};
    strcpy(un.sun_path + 1, "forkvm-epoll-edges"); /* abstract: no file */
    socklen_t ul = offsetof(struct sockaddr_un, sun_path) + 1 + strlen("forkvm-epoll-edges");
    int r = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    bind(r, (void *)&un, ul);
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    connect(s, (void *)&un, ul);
    bad |= rounds("AF_UNIX datagram to a bound name", r, s, 1);

    int p[2];
    pipe2(p, O_NONBLOCK);
    bad |= rounds("pipe", p[0], p[1], 0);
    bad |= listener_rounds();
    return bad;
}
