/* TCP over loopback inside one program: a listening socket and clients that
 * connect to it (blocking and nonblocking: EINPROGRESS, then 0, then
 * EISCONN; IPv4 and IPv6 to a dual-stack listener), data both ways, names that agree on both ends, a refused port.
 * Prints only what is the same on any machine. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    return 1;
}

static int same(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(a, b, sizeof(struct sockaddr_in)) == 0;
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

/* Connects `c` to `to`, accepts on `l`, sends both ways, compares names. */
static int exchange(const char *name, int l, int c, const struct sockaddr *to, socklen_t tolen, int nonblocking) {
    if (nonblocking)
        fcntl(c, F_SETFL, O_NONBLOCK);
    int r = connect(c, to, tolen);
    if (r < 0 && !(nonblocking && errno == EINPROGRESS))
        return fail(name);
    if (nonblocking) {
        struct pollfd pfd = {.fd = c, .events = POLLOUT};
        int err = -1;
        socklen_t len = sizeof err;
        poll(&pfd, 1, 5000);
        getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len);
        printf("%s: writable %d, SO_ERROR %d\n", name, !!(pfd.revents & POLLOUT), err);
        /* Linux: EINPROGRESS even on loopback, then 0 for the connect that
         * finds it done, then EISCONN. */
        int again = connect(c, to, tolen) == 0 ? 0 : errno;
        int third = connect(c, to, tolen) == 0 ? 0 : errno;
        printf("%s: first %s, again %s, third %s\n", name, r == 0 ? "0" : strerror(EINPROGRESS),
               again ? strerror(again) : "0", third ? strerror(third) : "0");
        fcntl(c, F_SETFL, 0);
    }
    struct sockaddr_storage peer_seen, c_local, c_peer, a_local, a_peer;
    socklen_t len = sizeof peer_seen;
    int a = accept(l, (struct sockaddr *)&peer_seen, &len);
    if (a < 0)
        return fail("accept");
    len = sizeof c_local;
    getsockname(c, (struct sockaddr *)&c_local, &len);
    len = sizeof c_peer;
    getpeername(c, (struct sockaddr *)&c_peer, &len);
    len = sizeof a_local;
    getsockname(a, (struct sockaddr *)&a_local, &len);
    len = sizeof a_peer;
    getpeername(a, (struct sockaddr *)&a_peer, &len);
    printf("%s: accept's address is the client's name %d, accepted peer is client %d, "
           "client peer is accepted local %d, families %d/%d\n",
           name, same(&peer_seen, &a_peer), same(&a_peer, &c_local) || a_peer.ss_family != c_local.ss_family,
           same(&c_peer, &a_local) || c_peer.ss_family != a_local.ss_family, a_local.ss_family == AF_INET6,
           c_local.ss_family == AF_INET6);
    char buf[64] = {0};
    write(c, "ping", 4);
    read(a, buf, sizeof buf - 1);
    write(a, "pong", 4);
    char back[64] = {0};
    read(c, back, sizeof back - 1);
    printf("%s: server read %s, client read %s\n", name, buf, back);
    close(c);
    printf("%s: server reads %zd after the client closed\n", name, read(a, buf, sizeof buf));
    close(a);
    return 0;
}

int main(void) {
    int one = 1;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(l, (struct sockaddr *)&at, sizeof at) < 0 || listen(l, 8) < 0)
        return fail("listen");
    socklen_t len = sizeof at;
    getsockname(l, (struct sockaddr *)&at, &len);
    if (exchange("v4 blocking", l, socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&at, sizeof at, 0))
        return 1;
    if (exchange("v4 nonblocking", l, socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&at, sizeof at, 1))
        return 1;
    close(l);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    printf("closed port: %s\n", connect(c, (struct sockaddr *)&at, sizeof at) < 0 ? strerror(errno) : "connected");
    close(c);

    int l6 = socket(AF_INET6, SOCK_STREAM, 0);
    int off = 0;
    setsockopt(l6, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    struct sockaddr_in6 at6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
    if (bind(l6, (struct sockaddr *)&at6, sizeof at6) < 0 || listen(l6, 8) < 0)
        return fail("listen6");
    len = sizeof at6;
    getsockname(l6, (struct sockaddr *)&at6, &len);
    struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback, .sin6_port = at6.sin6_port};
    if (exchange("v6 to a dual-stack listener", l6, socket(AF_INET6, SOCK_STREAM, 0), (struct sockaddr *)&lo6, sizeof lo6, 0))
        return 1;
    struct sockaddr_in lo4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = at6.sin6_port};
    if (exchange("v4 to a dual-stack listener", l6, socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&lo4, sizeof lo4, 0))
        return 1;
    return 0;
}
