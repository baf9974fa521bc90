/* UDP over loopback inside one run: bind, sendto/recvfrom both ways (the
 * sender bound on its first send, so the answer finds it), IPv4 and IPv6
 * (and IPv4 to a dual-stack IPv6 socket), connect and send/recv, names on
 * both ends, truncation and peeking, readiness, a connected socket that
 * hears only its peer, a port nothing listens on, ports in use (apart from
 * TCP's), socket options, and a datagram from a child process answered.
 * Prints only what is the same on any machine. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what) {
    printf("%s: %s\n", what, strerror(errno));
    return 1;
}

static struct sockaddr_in v4(uint16_t port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static uint16_t port_of(int fd) {
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return 0;
    return a.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                                  : ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
}

static const char *addr_text(const struct sockaddr_storage *a, char *buf) {
    if (a->ss_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, buf, 64);
    return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, buf, 64);
}

int main(void) {
    char buf[256], text[64];
    struct sockaddr_storage from;
    socklen_t flen;

    /* A server and an unbound client: the client gets a port on its first send. */
    int srv = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in at = v4(0);
    if (srv < 0 || bind(srv, (struct sockaddr *)&at, sizeof at) < 0)
        return fail("bind");
    uint16_t sport = port_of(srv);
    at = v4(sport);
    int cli = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
    printf("client port before send: %u\n", port_of(cli));
    if (sendto(cli, "ping", 4, 0, (struct sockaddr *)&at, sizeof at) != 4)
        return fail("sendto");
    flen = sizeof from;
    ssize_t n = recvfrom(srv, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
    printf("server got %zd '%.*s' from %s, port is the client's: %d, len %u\n", n, (int)n, buf,
           addr_text(&from, text), ntohs(((struct sockaddr_in *)&from)->sin_port) == port_of(cli),
           flen);
    if (sendto(srv, "pong", 4, 0, (struct sockaddr *)&from, flen) != 4)
        return fail("answer");
    n = recv(cli, buf, sizeof buf, 0);
    printf("client got %zd '%.*s'\n", n, (int)n, buf);

    /* Boundaries, truncation, peeking. */
    sendto(cli, "0123456789", 10, 0, (struct sockaddr *)&at, sizeof at);
    sendto(cli, "ab", 2, 0, (struct sockaddr *)&at, sizeof at);
    n = recv(srv, buf, 4, MSG_PEEK);
    printf("peek %zd '%.*s'\n", n, (int)n, buf);
    n = recv(srv, buf, 4, MSG_TRUNC);
    printf("truncated read says %zd\n", n);
    struct iovec iov = {.iov_base = buf, .iov_len = 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    n = recvmsg(srv, &mh, 0);
    printf("recvmsg %zd, MSG_TRUNC %d\n", n, (mh.msg_flags & MSG_TRUNC) != 0);

    /* Readiness: nothing, then a datagram; nonblocking reads. */
    struct pollfd pfd = {.fd = srv, .events = POLLIN | POLLOUT};
    int r = poll(&pfd, 1, 0);
    printf("poll empty: %d revents %#x\n", r, pfd.revents);
    fcntl(srv, F_SETFL, O_NONBLOCK);
    n = recv(srv, buf, 1, 0);
    printf("empty read: %zd %s\n", n, strerror(errno));
    sendto(cli, "x", 1, 0, (struct sockaddr *)&at, sizeof at);
    r = poll(&pfd, 1, 1000);
    printf("poll ready: %d revents %#x\n", r, pfd.revents);
    recv(srv, buf, sizeof buf, 0);

    /* connect: default destination, names, only the peer is heard. */
    int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in any = v4(0);
    bind(b, (struct sockaddr *)&any, sizeof any);
    struct sockaddr_in bat = v4(port_of(b));
    if (connect(a, (struct sockaddr *)&bat, sizeof bat) < 0)
        return fail("connect");
    struct sockaddr_in aat = v4(port_of(a));
    connect(b, (struct sockaddr *)&aat, sizeof aat);
    printf("connect bound it: %d\n", port_of(a) != 0);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    getpeername(a, (struct sockaddr *)&peer, &plen);
    printf("peer %s is b: %d\n", addr_text(&peer, text),
           ntohs(((struct sockaddr_in *)&peer)->sin_port) == port_of(b));
    sendto(cli, "stranger", 8, 0, (struct sockaddr *)&bat, sizeof bat);
    send(a, "friend", 6, 0);
    n = recv(b, buf, sizeof buf, 0);
    printf("b got '%.*s'\n", (int)n, buf);
    send(b, "back", 4, 0);
    n = recv(a, buf, sizeof buf, 0);
    printf("a got '%.*s'\n", (int)n, buf);
    /* The route chose a's source address; write and writev send too. */
    struct sockaddr_storage me;
    socklen_t mlen = sizeof me;
    getsockname(a, (struct sockaddr *)&me, &mlen);
    printf("a is %s\n", addr_text(&me, text));
    printf("write %zd\n", write(a, "written", 7));
    struct iovec parts[2] = {{"vec", 3}, {"tored", 5}};
    printf("writev %zd\n", writev(a, parts, 2));
    n = read(b, buf, sizeof buf);
    printf("b read '%.*s'\n", (int)n, buf);
    n = read(b, buf, sizeof buf);
    printf("b read '%.*s'\n", (int)n, buf);
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    r = connect(a, &unspec, sizeof unspec);
    printf("disconnect %d, ", r);
    plen = sizeof peer;
    r = getpeername(a, (struct sockaddr *)&peer, &plen);
    printf("getpeername %d %s\n", r, strerror(errno));
    mlen = sizeof me;
    getsockname(a, (struct sockaddr *)&me, &mlen);
    printf("a is %s again\n", addr_text(&me, text));
    printf("write unconnected %zd %s\n", write(a, "x", 1), strerror(errno));

    /* A port nothing listens on: a connected socket learns it. */
    int lone = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in nowhere = v4(9);
    connect(lone, (struct sockaddr *)&nowhere, sizeof nowhere);
    int refused = send(lone, "?", 1, 0) < 0 && errno == ECONNREFUSED;
    if (!refused) {
        struct pollfd lp = {.fd = lone, .events = POLLIN};
        poll(&lp, 1, 1000);
        refused = recv(lone, buf, 1, MSG_DONTWAIT) < 0 && errno == ECONNREFUSED;
    }
    printf("nothing there: refused %d\n", refused);
    printf("unconnected send there: %zd\n",
           sendto(cli, "lost", 4, 0, (struct sockaddr *)&nowhere, sizeof nowhere));

    /* Ports in use, and TCP's ports are apart. */
    int again = socket(AF_INET, SOCK_DGRAM, 0);
    r = bind(again, (struct sockaddr *)&at, sizeof at);
    printf("same port: %d %s\n", r, strerror(errno));
    /* A port TCP holds is free for UDP (the TCP one first: natively another
     * process may hold any TCP port, hardly the UDP one). */
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    bind(tcp, (struct sockaddr *)&any, sizeof any);
    struct sockaddr_in tat = v4(port_of(tcp));
    int utcp = socket(AF_INET, SOCK_DGRAM, 0);
    printf("udp on a tcp port: %d\n", bind(utcp, (struct sockaddr *)&tat, sizeof tat));
    r = bind(srv, (struct sockaddr *)&any, sizeof any);
    printf("bind twice: %d %s\n", r, strerror(errno));
    r = listen(srv, 1);
    printf("listen: %d %s\n", r, strerror(errno));

    /* Options. */
    int v = 0;
    socklen_t vl = sizeof v;
    getsockopt(srv, SOL_SOCKET, SO_PROTOCOL, &v, &vl);
    printf("SO_PROTOCOL %d", v);
    getsockopt(srv, SOL_SOCKET, SO_TYPE, &v, &vl);
    printf(" SO_TYPE %d", v);
    getsockopt(srv, SOL_SOCKET, SO_DOMAIN, &v, &vl);
    printf(" SO_DOMAIN %d", v);
    v = 1;
    printf(" SO_BROADCAST %d", setsockopt(srv, SOL_SOCKET, SO_BROADCAST, &v, sizeof v));
    printf(" IP_TOS %d", setsockopt(srv, IPPROTO_IP, IP_TOS, &v, sizeof v));
    printf(" TCP level %d\n", setsockopt(srv, IPPROTO_TCP, 1, &v, sizeof v) < 0);

    /* IPv6, and IPv4 to a dual-stack socket. */
    int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    if (bind(s6, (struct sockaddr *)&a6, sizeof a6) < 0)
        return fail("bind6");
    a6.sin6_port = htons(port_of(s6));
    a6.sin6_addr = in6addr_loopback;
    int c6 = socket(AF_INET6, SOCK_DGRAM, 0);
    sendto(c6, "six", 3, 0, (struct sockaddr *)&a6, sizeof a6);
    flen = sizeof from;
    n = recvfrom(s6, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
    printf("v6 got '%.*s' from %s\n", (int)n, buf, addr_text(&from, text));
    struct sockaddr_in to6 = v4(port_of(s6));
    sendto(cli, "four", 4, 0, (struct sockaddr *)&to6, sizeof to6);
    flen = sizeof from;
    n = recvfrom(s6, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
    printf("dual stack got '%.*s' from %s\n", (int)n, buf, addr_text(&from, text));

    /* A child sends; the parent answers to the port the child got. */
    fcntl(srv, F_SETFL, 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int c = socket(AF_INET, SOCK_DGRAM, 0);
        sendto(c, "child", 5, 0, (struct sockaddr *)&at, sizeof at);
        n = recv(c, buf, sizeof buf, 0);
        printf("child got '%.*s'\n", (int)n, buf);
        fflush(stdout);
        _exit(0);
    }
    flen = sizeof from;
    n = recvfrom(srv, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
    printf("parent got '%.*s'\n", (int)n, buf);
    fflush(stdout);
    sendto(srv, "hello child", 11, 0, (struct sockaddr *)&from, flen);
    int st;
    waitpid(pid, &st, 0);
    printf("child exited %d\n", WEXITSTATUS(st));
    return 0;
}
