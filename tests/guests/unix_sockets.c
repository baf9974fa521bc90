/* AF_UNIX socket pairs inside one process: stream, datagram and seqpacket
 * transfers, non-blocking I/O, shutdown/close (EOF, EPIPE, SIGPIPE vs
 * MSG_NOSIGNAL), SCM_RIGHTS descriptor passing, socket options, poll,
 * select and epoll readiness, and a thread blocked in read(2) woken by
 * another thread's write; named (abstract) sockets: bind, listen, connect,
 * accept, names, readiness, errors, and an accept woken by a thread's
 * connect. Run natively and in forkvm: same output. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const char *ename(int e) {
    switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case EPIPE: return "EPIPE";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case EMSGSIZE: return "EMSGSIZE";
    case ENOTCONN: return "ENOTCONN";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case ESPIPE: return "ESPIPE";
    case ENOTSOCK: return "ENOTSOCK";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EADDRINUSE: return "EADDRINUSE";
    case EPROTOTYPE: return "EPROTOTYPE";
    case ENOENT: return "ENOENT";
    case EISCONN: return "EISCONN";
    default: { static char b[16]; snprintf(b, sizeof b, "E%d", e); return b; }
    }
}

/* result and errno of a call, printed in that order */
#define SHOW(label, call) do { errno = 0; long r_ = (long)(call); int e_ = errno; printf("%s: %ld %s\n", label, r_, ename(e_)); } while (0)

#define CHECK(x) do { if (!(x)) { printf("FAILED line %d: %s (errno %s)\n", __LINE__, #x, ename(errno)); return 1; } } while (0)

static int sigpipes;
static void on_pipe(int s) { (void)s; sigpipes++; }

static int stream(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(write(sv[0], "hello ", 6) == 6);
    CHECK(send(sv[0], "world", 5, 0) == 5);
    char buf[64] = {0};
    ssize_t n = recv(sv[1], buf, sizeof buf, MSG_PEEK);
    printf("stream peek %zd '%.*s'\n", n, (int)n, buf);
    n = read(sv[1], buf, 3);
    printf("stream read %zd '%.*s'\n", n, (int)n, buf);
    n = read(sv[1], buf, sizeof buf);
    printf("stream read %zd '%.*s'\n", n, (int)n, buf);
    /* both directions */
    CHECK(write(sv[1], "back", 4) == 4);
    n = read(sv[0], buf, sizeof buf);
    printf("stream back %zd '%.*s'\n", n, (int)n, buf);
    /* half close: EOF for the reader, the other way still works */
    CHECK(shutdown(sv[0], SHUT_WR) == 0);
    n = read(sv[1], buf, sizeof buf);
    printf("after SHUT_WR read=%zd\n", n);
    errno = 0;
    n = send(sv[0], "x", 1, MSG_NOSIGNAL);
    printf("send after SHUT_WR=%zd %s\n", n, ename(errno));
    CHECK(write(sv[1], "ok", 2) == 2);
    n = read(sv[0], buf, sizeof buf);
    printf("reverse still works %zd\n", n);
    /* close: EPIPE, SIGPIPE unless MSG_NOSIGNAL */
    close(sv[1]);
    signal(SIGPIPE, on_pipe);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    errno = 0;
    n = write(sv[0], "x", 1);
    printf("write to closed peer=%zd %s sigpipes=%d\n", n, ename(errno), sigpipes);
    errno = 0;
    n = send(sv[0], "x", 1, MSG_NOSIGNAL);
    printf("send MSG_NOSIGNAL=%zd %s sigpipes=%d\n", n, ename(errno), sigpipes);
    n = read(sv[0], buf, sizeof buf);
    printf("read from closed peer=%zd\n", n);
    close(sv[0]);
    return 0;
}

static int datagrams(int type, const char *name) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    printf("%s cloexec=%d nonblock=%d\n", name, fcntl(sv[0], F_GETFD) & FD_CLOEXEC,
           !!(fcntl(sv[1], F_GETFL) & O_NONBLOCK));
    CHECK(send(sv[0], "one", 3, 0) == 3);
    CHECK(send(sv[0], "three", 5, 0) == 5);
    CHECK(send(sv[0], "", 0, 0) == 0);
    char buf[8];
    ssize_t n = recv(sv[1], buf, sizeof buf, 0);
    printf("%s recv %zd '%.*s'\n", name, n, (int)n, buf);
    struct iovec iov = { buf, 4 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    n = recvmsg(sv[1], &mh, 0);
    printf("%s recvmsg %zd '%.*s' trunc=%d\n", name, n, (int)n, buf, !!(mh.msg_flags & MSG_TRUNC));
    n = recv(sv[1], buf, sizeof buf, 0);
    printf("%s empty datagram %zd\n", name, n);
    errno = 0;
    n = recv(sv[1], buf, sizeof buf, 0);
    printf("%s nothing left %zd %s\n", name, n, ename(errno));
    CHECK(send(sv[0], "abcdef", 6, 0) == 6);
    n = recv(sv[1], buf, 2, MSG_TRUNC);
    printf("%s MSG_TRUNC returns %zd\n", name, n);
    /* filling the queue ends with EAGAIN, and POLLOUT goes away */
    static char big[1024];
    int count = 0;
    while (send(sv[0], big, sizeof big, 0) == (ssize_t)sizeof big) count++;
    printf("%s full: %s (some sent: %d)\n", name, ename(errno), count > 10);
    struct pollfd pf = { sv[0], POLLOUT, 0 };
    printf("%s poll when full: %d\n", name, poll(&pf, 1, 0));
    static char huge[300000];
    errno = 0;
    n = send(sv[0], huge, sizeof huge, 0);
    printf("%s huge: %zd %s\n", name, n, ename(errno));
    close(sv[1]);
    errno = 0;
    n = send(sv[0], "x", 1, MSG_NOSIGNAL);
    printf("%s send to closed peer: %zd %s\n", name, n, ename(errno));
    close(sv[0]);
    return 0;
}

static int rights(void) {
    int sv[2], p[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(pipe(p) == 0);
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = { "F", 1 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &p[1], sizeof(int));
    CHECK(sendmsg(sv[0], &mh, 0) == 1);
    close(p[1]);
    char data[4];
    char rbuf[CMSG_SPACE(sizeof(int))];
    struct iovec riov = { data, sizeof data };
    struct msghdr rh = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = rbuf,
                         .msg_controllen = sizeof rbuf };
    ssize_t n = recvmsg(sv[1], &rh, MSG_CMSG_CLOEXEC);
    struct cmsghdr *rc = CMSG_FIRSTHDR(&rh);
    CHECK(n == 1 && rc && rc->cmsg_type == SCM_RIGHTS);
    int fd;
    memcpy(&fd, CMSG_DATA(rc), sizeof fd);
    printf("rights: got %zd byte, controllen=%zu, cloexec=%d\n", n, (size_t)rh.msg_controllen,
           fcntl(fd, F_GETFD) & FD_CLOEXEC);
    CHECK(write(fd, "via fd", 6) == 6);
    close(fd);
    char out[16];
    n = read(p[0], out, sizeof out);
    printf("rights: pipe got '%.*s'\n", (int)n, out);
    n = read(p[0], out, sizeof out);
    printf("rights: then EOF %zd\n", n);
    /* no room for the descriptor: MSG_CTRUNC */
    CHECK(pipe(p) == 0);
    memcpy(CMSG_DATA(c), &p[0], sizeof(int));
    CHECK(sendmsg(sv[0], &mh, 0) == 1);
    struct msghdr nh = { .msg_iov = &riov, .msg_iovlen = 1 };
    n = recvmsg(sv[1], &nh, 0);
    printf("rights: without control %zd ctrunc=%d\n", n, !!(nh.msg_flags & MSG_CTRUNC));
    /* a bad descriptor */
    int bad = 999;
    memcpy(CMSG_DATA(c), &bad, sizeof(int));
    errno = 0;
    n = sendmsg(sv[0], &mh, 0);
    printf("rights: bad fd %zd %s\n", n, ename(errno));
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
    return 0;
}

static int options(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    int v; socklen_t len = sizeof v;
    CHECK(getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &len) == 0);
    printf("SO_TYPE=%d len=%u\n", v, len);
    CHECK(getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &v, &len) == 0);
    printf("SO_ERROR=%d\n", v);
    CHECK(getsockopt(sv[0], SOL_SOCKET, SO_DOMAIN, &v, &len) == 0);
    printf("SO_DOMAIN=%d\n", v);
    v = 65536;
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof v) == 0);
    CHECK(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, &len) == 0);
    printf("SO_SNDBUF after 65536: %d\n", v);
    v = 1;
    CHECK(setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &v, sizeof v) == 0);
    CHECK(getsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &v, &len) == 0);
    printf("SO_PASSCRED=%d\n", v);
    struct timeval tv = { 0, 50000 };
    CHECK(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    char b[4];
    errno = 0;
    ssize_t n = recv(sv[1], b, sizeof b, 0);
    printf("recv with SO_RCVTIMEO: %zd %s\n", n, ename(errno));
    SHOW("bogus option", getsockopt(sv[0], SOL_SOCKET, 12345, &v, &len));
    struct stat st;
    CHECK(fstat(sv[0], &st) == 0);
    printf("fstat: socket=%d\n", S_ISSOCK(st.st_mode));
    struct sockaddr_un sa; len = sizeof sa;
    CHECK(getsockname(sv[0], (struct sockaddr *)&sa, &len) == 0);
    printf("getsockname len=%u family=%d\n", len, sa.sun_family);
    len = sizeof sa;
    CHECK(getpeername(sv[0], (struct sockaddr *)&sa, &len) == 0);
    printf("getpeername len=%u\n", len);
    SHOW("lseek", lseek(sv[0], 0, SEEK_SET));
    int pp[2];
    CHECK(pipe(pp) == 0);
    SHOW("getsockopt on a pipe", getsockopt(pp[0], SOL_SOCKET, SO_TYPE, &v, &len));
    SHOW("getsockopt on a closed fd", getsockopt(555, SOL_SOCKET, SO_TYPE, &v, &len));
    close(pp[0]);
    close(pp[1]);
    /* an unnamed socket */
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(s >= 0);
    len = sizeof sa;
    SHOW("unnamed getpeername", getpeername(s, (struct sockaddr *)&sa, &len));
    SHOW("unnamed send", send(s, "x", 1, MSG_NOSIGNAL));
    SHOW("unnamed listen", listen(s, 1));
    SHOW("unnamed accept", accept(s, NULL, NULL));
    SHOW("unnamed shutdown", shutdown(s, SHUT_RD));
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK(d >= 0);
    SHOW("unnamed dgram send", send(d, "x", 1, MSG_NOSIGNAL));
    close(d);
    close(s);
    close(sv[0]);
    close(sv[1]);
    return 0;
}

static int readiness(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    struct pollfd pf[2] = { { sv[0], POLLIN | POLLOUT, 0 }, { sv[1], POLLIN | POLLRDHUP, 0 } };
    int r = poll(pf, 2, 0);
    printf("poll idle: %d %#x %#x\n", r, pf[0].revents, pf[1].revents);
    CHECK(write(sv[0], "x", 1) == 1);
    r = poll(pf, 2, 0);
    printf("poll data: %d %#x %#x\n", r, pf[0].revents, pf[1].revents);
    fd_set rd; FD_ZERO(&rd); FD_SET(sv[1], &rd);
    struct timeval tv = {0, 0};
    printf("select: %d isset=%d\n", select(sv[1] + 1, &rd, NULL, NULL, &tv), FD_ISSET(sv[1], &rd));
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = 42 };
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev) == 0);
    struct epoll_event out[4];
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll data: %d events=%#x data=%llu\n", r, r > 0 ? out[0].events : 0,
           r > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
    char b[8];
    CHECK(read(sv[1], b, sizeof b) == 1);
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll drained: %d\n", r);
    SHOW("nonblocking empty read", read(sv[1], b, sizeof b));
    CHECK(shutdown(sv[0], SHUT_WR) == 0);
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll after peer SHUT_WR: %d events=%#x\n", r, r > 0 ? out[0].events : 0);
    close(sv[0]);
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll after peer close: %d events=%#x\n", r, r > 0 ? out[0].events : 0);
    r = poll(pf + 1, 1, 0);
    printf("poll after peer close: %d %#x\n", r, pf[1].revents);
    close(ep);
    close(sv[1]);
    return 0;
}

static int tsv[2];
static void *writer(void *arg) {
    (void)arg;
    usleep(20000);
    if (write(tsv[1], "wake", 4) != 4) return (void *)1;
    return NULL;
}

static int blocking(void) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, tsv) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
    char b[8];
    ssize_t n = read(tsv[0], b, sizeof b); /* blocks until the thread writes */
    printf("blocking read woke: %zd '%.*s'\n", n, (int)n, b);
    pthread_join(t, NULL);
    close(tsv[0]);
    close(tsv[1]);
    return 0;
}


/* An abstract name unique to this run (natively, other programs share the namespace). */
static socklen_t abstract_addr(struct sockaddr_un *a, const char *tag) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "forkvm-test-%s-%d", tag, (int)getpid());
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static struct sockaddr_un late_addr;
static socklen_t late_len;
static void *late_connect(void *arg) {
    usleep(20000);
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&late_addr, late_len) == 0) (void)!write(c, "late", 4);
    *(int *)arg = c;
    return NULL;
}

static int named(void) {
    struct sockaddr_un a, got;
    socklen_t len = abstract_addr(&a, "named");
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(l >= 0);
    SHOW("listen unbound", listen(l, 4));
    SHOW("bind abstract", bind(l, (struct sockaddr *)&a, len));
    SHOW("bind again", bind(l, (struct sockaddr *)&a, len));
    socklen_t gl = sizeof got;
    CHECK(getsockname(l, (struct sockaddr *)&got, &gl) == 0);
    printf("getsockname: len %s, same name %d\n", gl == len ? "same" : "differs",
           gl == len && memcmp(got.sun_path, a.sun_path, len - offsetof(struct sockaddr_un, sun_path)) == 0);
    int other = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("bind taken name", bind(other, (struct sockaddr *)&a, len));
    SHOW("connect before listen", connect(other, (struct sockaddr *)&a, len));
    SHOW("listen", listen(l, 4));
    SHOW("accept none waiting", accept(l, NULL, NULL));
    struct pollfd pl = { l, POLLIN, 0 };
    printf("poll listener idle: %d\n", poll(&pl, 1, 0));
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 }, out[2];
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) == 0);
    SHOW("connect", connect(other, (struct sockaddr *)&a, len));
    SHOW("connect again", connect(other, (struct sockaddr *)&a, len));
    int pr = poll(&pl, 1, 0);
    printf("poll listener: %d %#x\n", pr, pl.revents);
    int r = epoll_wait(ep, out, 2, 0);
    printf("epoll listener: %d data=%llu\n", r, r > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
    struct sockaddr_un peer;
    socklen_t pl_len = sizeof peer;
    int s = accept4(l, (struct sockaddr *)&peer, &pl_len, SOCK_CLOEXEC);
    printf("accept4: %s, peer address length %u\n", s >= 0 ? "ok" : ename(errno), (unsigned)pl_len);
    printf("epoll after accept: %d\n", epoll_wait(ep, out, 2, 0));
    gl = sizeof got;
    CHECK(getpeername(other, (struct sockaddr *)&got, &gl) == 0);
    printf("client's peer is the listener: %d\n", gl == len && memcmp(got.sun_path, a.sun_path, len - 2) == 0);
    gl = sizeof got;
    CHECK(getsockname(s, (struct sockaddr *)&got, &gl) == 0);
    printf("accepted socket's name is the listener's: %d\n", gl == len);
    CHECK(write(other, "ping", 4) == 4);
    char b[16] = {0};
    SHOW("server reads", read(s, b, sizeof b));
    printf("server got %s\n", b);
    CHECK(write(s, "pong", 4) == 4);
    memset(b, 0, sizeof b);
    SHOW("client reads", read(other, b, sizeof b));
    printf("client got %s\n", b);
    close(s);
    SHOW("client reads after server close", read(other, b, sizeof b));
    close(other);

    int sp = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    SHOW("seqpacket to a stream listener", connect(sp, (struct sockaddr *)&a, len));
    close(sp);
    struct sockaddr_un nobody;
    socklen_t nlen = abstract_addr(&nobody, "nobody");
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("connect to an unused name", connect(c, (struct sockaddr *)&nobody, nlen));
    struct sockaddr_un path = { .sun_family = AF_UNIX };
    snprintf(path.sun_path, sizeof path.sun_path, "/nonexistent-dir/forkvm-%d.sock", (int)getpid());
    SHOW("connect to a missing path", connect(c, (struct sockaddr *)&path, sizeof path));
    close(c);
    int ab = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un fam = { .sun_family = AF_UNIX };
    SHOW("autobind", bind(ab, (struct sockaddr *)&fam, sizeof(sa_family_t)));
    gl = sizeof got;
    CHECK(getsockname(ab, (struct sockaddr *)&got, &gl) == 0);
    printf("autobind name: len %u, abstract %d\n", (unsigned)gl, got.sun_path[0] == 0);
    close(ab);

    /* A blocking accept woken by another thread's connect. */
    int fl = fcntl(l, F_GETFL);
    CHECK(fcntl(l, F_SETFL, fl & ~O_NONBLOCK) == 0);
    late_addr = a;
    late_len = len;
    int late = -1;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, late_connect, &late) == 0);
    s = accept(l, NULL, NULL);
    memset(b, 0, sizeof b);
    SHOW("blocking accept, then read", read(s, b, 4));
    printf("got %s\n", b);
    pthread_join(t, NULL);
    close(late);
    close(s);
    close(ep);
    close(l);
    int again = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("bind the name after its listener closed", bind(again, (struct sockaddr *)&a, len));
    close(again);
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (stream() || datagrams(SOCK_DGRAM, "dgram") || datagrams(SOCK_SEQPACKET, "seqpacket") ||
        rights() || options() || readiness() || blocking() || named())
        return 1;
    signal(SIGPIPE, SIG_DFL);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    printf("dying of SIGPIPE\n");
    (void)!write(sv[0], "x", 1);
    printf("not reached\n");
    return 0;
}
