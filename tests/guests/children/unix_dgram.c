/* AF_UNIX datagram sockets addressed by name, as syslog clients, Python's
 * logging DatagramHandler/SysLogHandler and sd_notify use them: sendto() a
 * socket bound to a path or an abstract name (it was ECONNREFUSED), from an
 * unbound or a bound socket, in one process and between the run's
 * processes. recvfrom() names the sender (nothing for an unbound one),
 * connect() sets the default destination, a full queue is EAGAIN or waits,
 * boundaries are kept, and the errors are Linux's. Scratch files go in
 * /dev/shm; abstract names carry the pid (the host's namespace is shared
 * when run natively) and are printed without it. */
#define _GNU_SOURCE
#include "../common.h"
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/dev/shm/forkvm-dgram-XXXXXX";

#define CHECK(x)                                                     \
    do {                                                             \
        if (!(x)) {                                                  \
            printf("FAILED line %d: %s (%s)\n", __LINE__, #x,        \
                   errno_name(errno));                               \
            exit(1);                                                 \
        }                                                            \
    } while (0)

/* errno names common.h does not know. */
static const char *ename(int e) {
    switch (e) {
    case ENOTCONN: return "ENOTCONN";
    case EPROTOTYPE: return "EPROTOTYPE";
    case EMSGSIZE: return "EMSGSIZE";
    case ECONNREFUSED: return "ECONNREFUSED";
    default: return errno_name(e);
    }
}

/* A call's result, or its errno's name. */
static void show(const char *what, long r) {
    if (r < 0)
        printf("%s: %s\n", what, ename(errno));
    else
        printf("%s: %ld\n", what, r);
}

static socklen_t path_addr(struct sockaddr_un *a, const char *name) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path, sizeof a->sun_path, "%s/%s", dir, name);
    return (socklen_t)sizeof *a;
}

static socklen_t abstract_addr(struct sockaddr_un *a, const char *name, int pid) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "forkvm-dgram-%s-%d", name, pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int dgram(void) {
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK(s >= 0);
    return s;
}

/* Describes a sender's address as recvfrom gave it. */
static void show_from(const char *what, const struct sockaddr_un *a, socklen_t len) {
    size_t base = offsetof(struct sockaddr_un, sun_path);
    if (len == 0) {
        printf("%s: from nobody (addrlen 0)\n", what);
    } else if (len <= base) {
        printf("%s: addrlen %u family %d\n", what, (unsigned)len, a->sun_family);
    } else if (a->sun_path[0] == 0) {
        /* Abstract: print up to the pid. */
        const char *name = a->sun_path + 1;
        const char *dash = memrchr(name, '-', len - base - 1);
        int n = dash ? (int)(dash - name) : (int)(len - base - 1);
        printf("%s: from @%.*s\n", what, n, name);
    } else {
        const char *rel = strncmp(a->sun_path, dir, strlen(dir)) == 0 ? a->sun_path + strlen(dir) + 1 : a->sun_path;
        printf("%s: from %s (addrlen %s)\n", what, rel,
               len == base + strlen(a->sun_path) + 1 ? "path+NUL" : "odd");
    }
}

static void recv_show(const char *what, int s, int flags) {
    char b[64];
    struct sockaddr_un from;
    memset(&from, 0x55, sizeof from);
    socklen_t len = sizeof from;
    ssize_t r = recvfrom(s, b, sizeof b - 1, flags, (struct sockaddr *)&from, &len);
    if (r < 0) {
        printf("%s: %s\n", what, ename(errno));
        return;
    }
    b[r] = 0;
    printf("%s: \"%s\" (%zd)\n", what, b, r);
    show_from(what, &from, len);
}

static int pollbits(int s) {
    struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT};
    CHECK(poll(&p, 1, 0) >= 0);
    return p.revents;
}

static void one_process(void) {
    struct sockaddr_un srv_a, cli_a, x_a, a;
    socklen_t srv_l = path_addr(&srv_a, "srv.sock");
    socklen_t cli_l = path_addr(&cli_a, "cli.sock");
    socklen_t x_l = path_addr(&x_a, "x.sock");
    int srv = dgram(), cli = dgram(), other = dgram();
    CHECK(bind(srv, (struct sockaddr *)&srv_a, srv_l) == 0);

    printf("-- unbound sender\n");
    show("sendto", sendto(cli, "hello", 5, 0, (struct sockaddr *)&srv_a, srv_l));
    printf("poll srv: %#x\n", pollbits(srv));
    int n = -1;
    CHECK(ioctl(srv, FIONREAD, &n) == 0);
    printf("FIONREAD: %d\n", n);
    recv_show("recvfrom", srv, MSG_PEEK);
    recv_show("recvfrom", srv, 0);
    recv_show("recvfrom empty", srv, MSG_DONTWAIT);
    show("send unconnected", send(cli, "x", 1, 0));

    printf("-- boundaries\n");
    sendto(cli, "a", 1, 0, (struct sockaddr *)&srv_a, srv_l);
    sendto(cli, "bb", 2, 0, (struct sockaddr *)&srv_a, srv_l);
    sendto(cli, "", 0, 0, (struct sockaddr *)&srv_a, srv_l);
    sendto(cli, "cccc", 4, 0, (struct sockaddr *)&srv_a, srv_l);
    char b[8];
    for (int i = 0; i < 3; i++)
        show("recv", recv(srv, b, sizeof b, 0));
    struct iovec iov = {.iov_base = b, .iov_len = 2};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    show("recvmsg into 2 bytes", recvmsg(srv, &m, 0));
    printf("MSG_TRUNC: %d\n", (m.msg_flags & MSG_TRUNC) != 0);

    printf("-- bound sender, reply to its address\n");
    CHECK(bind(cli, (struct sockaddr *)&cli_a, cli_l) == 0);
    show("sendto", sendto(cli, "ping", 4, 0, (struct sockaddr *)&srv_a, srv_l));
    struct sockaddr_un from;
    socklen_t from_l = sizeof from;
    ssize_t r = recvfrom(srv, b, sizeof b, 0, (struct sockaddr *)&from, &from_l);
    show("recvfrom", r);
    show_from("recvfrom", &from, from_l);
    show("reply", sendto(srv, "pong", 4, 0, (struct sockaddr *)&from, from_l));
    recv_show("client", cli, 0);
    /* recvmsg names the sender too, cut to the room given. */
    sendto(cli, "msg", 3, 0, (struct sockaddr *)&srv_a, srv_l);
    iov.iov_len = sizeof b;
    memset(&from, 0, sizeof from);
    m = (struct msghdr){.msg_name = &from, .msg_namelen = 5, .msg_iov = &iov, .msg_iovlen = 1};
    show("recvmsg", recvmsg(srv, &m, 0));
    printf("recvmsg: namelen %s, %.3s\n",
           m.msg_namelen == offsetof(struct sockaddr_un, sun_path) + strlen(cli_a.sun_path) + 1 ? "full" : "odd",
           from.sun_path);

    printf("-- connect sets the default destination\n");
    CHECK(connect(cli, (struct sockaddr *)&srv_a, srv_l) == 0);
    a = (struct sockaddr_un){0};
    socklen_t al = sizeof a;
    show("getpeername", getpeername(cli, (struct sockaddr *)&a, &al));
    printf("peer is srv.sock: %d\n", strcmp(a.sun_path, srv_a.sun_path) == 0);
    show("send", send(cli, "via connect", 11, 0));
    show("write", write(cli, "by write", 8));
    recv_show("srv", srv, 0);
    show("read", read(srv, b, sizeof b));

    printf("-- a receiver connected elsewhere takes from its peer only\n");
    CHECK(bind(other, (struct sockaddr *)&x_a, x_l) == 0);
    show("connect srv to x", connect(srv, (struct sockaddr *)&x_a, x_l));
    show("send from cli", send(cli, "z", 1, 0));
    show("sendto from x", sendto(other, "from x", 6, 0, (struct sockaddr *)&srv_a, srv_l));
    recv_show("srv", srv, MSG_DONTWAIT);
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    show("disconnect srv", connect(srv, &unspec, sizeof unspec));
    show("send from cli", send(cli, "z", 1, 0));
    recv_show("srv", srv, MSG_DONTWAIT);
    show("sendto another while connected", sendto(cli, "w", 1, 0, (struct sockaddr *)&x_a, x_l));
    recv_show("x", other, MSG_DONTWAIT);

    printf("-- a full queue\n");
    int k = 0;
    while (send(cli, "q", 1, MSG_DONTWAIT) == 1)
        k++;
    printf("sent some (%d), then %s\n", k > 0, ename(errno));
    printf("poll cli: %#x\n", pollbits(cli));
    show("sendto from x", sendto(other, "q", 1, MSG_DONTWAIT, (struct sockaddr *)&srv_a, srv_l));
    CHECK(fcntl(other, F_SETFL, O_NONBLOCK) == 0);
    show("sendto nonblocking", sendto(other, "q", 1, 0, (struct sockaddr *)&srv_a, srv_l));
    show("recv one", recv(srv, b, sizeof b, 0));
    printf("poll cli: %#x\n", pollbits(cli));
    int drained = 0;
    while (recv(srv, b, sizeof b, MSG_DONTWAIT) >= 0)
        drained++;
    printf("drained the rest: %d\n", drained == k - 1);

    printf("-- errors\n");
    struct sockaddr_un st_a, reg_a, none_a;
    socklen_t st_l = path_addr(&st_a, "stream.sock");
    socklen_t reg_l = path_addr(&reg_a, "regular");
    socklen_t none_l = path_addr(&none_a, "none.sock");
    int st = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(st >= 0 && bind(st, (struct sockaddr *)&st_a, st_l) == 0 && listen(st, 1) == 0);
    int fd = open(reg_a.sun_path, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
    int lone = dgram();
    show("sendto a stream socket", sendto(lone, "q", 1, 0, (struct sockaddr *)&st_a, st_l));
    show("connect to a stream socket", connect(lone, (struct sockaddr *)&st_a, st_l));
    int sc = socket(AF_UNIX, SOCK_STREAM, 0);
    show("stream connect to a datagram socket", connect(sc, (struct sockaddr *)&srv_a, srv_l));
    close(sc);
    struct sockaddr_un quiet_a;
    socklen_t quiet_l = path_addr(&quiet_a, "quiet.sock");
    int quiet = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(quiet >= 0 && bind(quiet, (struct sockaddr *)&quiet_a, quiet_l) == 0);
    sc = socket(AF_UNIX, SOCK_STREAM, 0);
    show("stream connect to a bound stream socket not listening",
         connect(sc, (struct sockaddr *)&quiet_a, quiet_l));
    close(sc);
    close(quiet);
    show("sendto a regular file", sendto(lone, "q", 1, 0, (struct sockaddr *)&reg_a, reg_l));
    show("sendto no file", sendto(lone, "q", 1, 0, (struct sockaddr *)&none_a, none_l));
    socklen_t nobody_l = abstract_addr(&a, "nobody", getpid());
    show("sendto an unbound abstract name", sendto(lone, "q", 1, 0, (struct sockaddr *)&a, nobody_l));
    show("sendto family only", sendto(lone, "q", 1, 0, (struct sockaddr *)&a, sizeof(sa_family_t)));
    static char big[300000];
    show("sendto too big", sendto(lone, big, sizeof big, 0, (struct sockaddr *)&srv_a, srv_l));
    show("shutdown x SHUT_RD", shutdown(other, SHUT_RD));
    show("sendto x", sendto(lone, "q", 1, 0, (struct sockaddr *)&x_a, x_l));
    close(srv);
    show("send to closed srv", send(cli, "a", 1, 0));
    show("send again", send(cli, "a", 1, 0));
    show("getpeername", getpeername(cli, (struct sockaddr *)&a, &al));
    show("sendto closed srv", sendto(lone, "q", 1, 0, (struct sockaddr *)&srv_a, srv_l));

    printf("-- abstract names and autobind\n");
    int ab = dgram();
    socklen_t ab_l = abstract_addr(&a, "abstract", getpid());
    CHECK(bind(ab, (struct sockaddr *)&a, ab_l) == 0);
    show("sendto abstract", sendto(lone, "to abstract", 11, 0, (struct sockaddr *)&a, ab_l));
    recv_show("abstract", ab, 0);
    int au = dgram();
    struct sockaddr_un fam = {.sun_family = AF_UNIX};
    CHECK(bind(au, (struct sockaddr *)&fam, sizeof(sa_family_t)) == 0);
    show("sendto from autobound", sendto(au, "auto", 4, 0, (struct sockaddr *)&a, ab_l));
    from_l = sizeof from;
    show("recvfrom", recvfrom(ab, b, sizeof b, 0, (struct sockaddr *)&from, &from_l));
    printf("autobound name: addrlen %u, abstract %d\n", (unsigned)from_l, from.sun_path[0] == 0);
    show("reply to autobound", sendto(ab, "back", 4, 0, (struct sockaddr *)&from, from_l));
    recv_show("autobound", au, 0);

    printf("-- descriptors travel with a datagram\n");
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    CHECK(write(pfd[1], "through the pipe", 16) == 16);
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } c;
    memset(&c, 0, sizeof c);
    iov = (struct iovec){.iov_base = "fd", .iov_len = 2};
    m = (struct msghdr){.msg_name = &a, .msg_namelen = ab_l, .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &pfd[0], sizeof(int));
    show("sendmsg with a descriptor", sendmsg(lone, &m, 0));
    close(pfd[0]);
    close(pfd[1]);
    memset(&c, 0, sizeof c);
    iov = (struct iovec){.iov_base = b, .iov_len = sizeof b};
    m = (struct msghdr){.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    show("recvmsg", recvmsg(ab, &m, 0));
    h = CMSG_FIRSTHDR(&m);
    CHECK(h && h->cmsg_type == SCM_RIGHTS);
    int got;
    memcpy(&got, CMSG_DATA(h), sizeof got);
    char pb[32] = {0};
    show("read the passed pipe", read(got, pb, sizeof pb - 1));
    printf("it says: %s\n", pb);
    close(got);

    close(cli);
    close(other);
    close(st);
    close(lone);
    close(ab);
    close(au);
    unlink(srv_a.sun_path);
    unlink(cli_a.sun_path);
    unlink(x_a.sun_path);
    unlink(st_a.sun_path);
    unlink(reg_a.sun_path);
}

/* sd_notify and syslog between processes: the parent's socket, bound
 * before the fork, and a socket the child binds after it. */
static void two_processes(void) {
    printf("-- between processes\n");
    struct sockaddr_un notify_a, child_a, ab_a;
    socklen_t notify_l = path_addr(&notify_a, "notify.sock");
    socklen_t child_l = path_addr(&child_a, "child.sock");
    int parent = getpid();
    socklen_t ab_l = abstract_addr(&ab_a, "log", parent);
    int notify = dgram(), log = dgram();
    CHECK(bind(notify, (struct sockaddr *)&notify_a, notify_l) == 0);
    CHECK(bind(log, (struct sockaddr *)&ab_a, ab_l) == 0);
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
        close(notify);
        close(log);
        close(ready[0]);
        /* sd_notify: an unbound socket, sendto the path. */
        int s = dgram();
        if (sendto(s, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *)&notify_a, notify_l) != 7)
            _exit(1);
        /* syslog: connect to the abstract name, then send lines. */
        int l = dgram();
        if (connect(l, (struct sockaddr *)&ab_a, ab_l) != 0)
            _exit(2);
        for (int i = 0; i < 3; i++) {
            char line[32];
            int n = snprintf(line, sizeof line, "<13>line %d", i);
            if (send(l, line, (size_t)n, 0) != n)
                _exit(3);
        }
        /* A socket bound after the fork: the parent sends to it, more than
         * its queue holds (the parent waits while this reads slowly). */
        int mine = dgram();
        if (bind(mine, (struct sockaddr *)&child_a, child_l) != 0)
            _exit(4);
        if (write(ready[1], "r", 1) != 1)
            _exit(5);
        int got = 0;
        char b[16];
        for (;;) {
            struct sockaddr_un from;
            socklen_t fl = sizeof from;
            ssize_t r = recvfrom(mine, b, sizeof b, 0, (struct sockaddr *)&from, &fl);
            if (r < 0)
                _exit(6);
            if (r == 3 && memcmp(b, "end", 3) == 0)
                break;
            if (r != 4 || strcmp(from.sun_path, notify_a.sun_path) != 0)
                _exit(7);
            got++;
            if (got % 8 == 0)
                usleep(2000);
        }
        /* Answer the parent at the address it sent from. */
        if (sendto(mine, "child got them", 14, 0, (struct sockaddr *)&notify_a, notify_l) != 14)
            _exit(8);
        _exit(got == 40 ? 0 : 9);
    }
    close(ready[1]);
    recv_show("notify", notify, 0);
    for (int i = 0; i < 3; i++)
        recv_show("log", log, 0);
    char r;
    CHECK(read(ready[0], &r, 1) == 1);
    int sent = 0;
    for (int i = 0; i < 40; i++)
        if (sendto(notify, "item", 4, 0, (struct sockaddr *)&child_a, child_l) == 4)
            sent++;
    printf("parent sent %d to the child (blocking on a full queue)\n", sent);
    show("end", sendto(notify, "end", 3, 0, (struct sockaddr *)&child_a, child_l));
    recv_show("child says", notify, 0);
    int status;
    CHECK(waitpid(c, &status, 0) == c);
    printf("child exit: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    show("sendto the exited child's socket", sendto(notify, "x", 1, 0, (struct sockaddr *)&child_a, child_l));
    close(notify);
    close(log);
    unlink(notify_a.sun_path);
    unlink(child_a.sun_path);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(mkdtemp(dir) != NULL);
    one_process();
    two_processes();
    CHECK(rmdir(dir) == 0);
    return 0;
}
