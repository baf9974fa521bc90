/* TCP urgent data (MSG_OOB) on loopback, as Linux keeps it: reads stop at
 * the mark; without SO_OOBINLINE the urgent byte is out of the stream
 * (recv(MSG_OOB) takes it once, ordinary reads skip it), with it the byte
 * is read in place; POLLPRI and select's exceptional set show it until it
 * is taken or read past. ftplib's abort and asyncore's handle_expt use it
 * (forkvm said EOPNOTSUPP). Each step waits for the state it shows. */
#define _GNU_SOURCE
#include "common.h"
#include "tcp_pair.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Waits (up to 10 s) for `bits` on `fd`, then prints IN/PRI of what poll gave. */
static void wait_for(const char *what, int fd, short bits) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLPRI};
    for (int i = 0; i < 1000; i++) {
        p.revents = 0;
        poll(&p, 1, 10);
        if ((p.revents & bits) == bits)
            break;
    }
    printf("%s: poll %s%s\n", what, p.revents & POLLIN ? "IN " : "", p.revents & POLLPRI ? "PRI" : "");
}

/* SIOCATMARK: whether the next byte to read is the urgent mark. */
static void atmark(const char *what, int fd) {
    int at = -1;
    if (ioctl(fd, SIOCATMARK, &at) != 0)
        printf("%s: SIOCATMARK %s\n", what, errno_name(errno));
    else
        printf("%s: SIOCATMARK %d\n", what, at);
}

static void got(const char *what, long r, const char *buf) {
    if (r < 0)
        printf("%s: %s\n", what, errno == EINVAL ? "EINVAL" : errno == EAGAIN ? "EAGAIN" : errno_name(errno));
    else
        printf("%s: %ld \"%.*s\"\n", what, r, (int)r, buf);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    listen_on_loopback();
    char b[64];
    int c, s;

    printf("-- out of band\n");
    pair(&c, &s);
    send(c, "abc", 3, 0);
    printf("send OOB: %ld\n", (long)send(c, "XYZ", 3, MSG_OOB));
    wait_for("after the urgent send", s, POLLIN | POLLPRI);
    atmark("before the mark", s);
    fd_set ex;
    FD_ZERO(&ex);
    FD_SET(s, &ex);
    struct timeval tv = {0, 0};
    printf("select exceptional: %d\n", select(s + 1, NULL, NULL, &ex, &tv));
    got("recv MSG_OOB|MSG_PEEK", recv(s, b, sizeof b, MSG_OOB | MSG_PEEK), b);
    got("read", read(s, b, sizeof b), b);
    atmark("read up to the mark", s);
    got("recv MSG_OOB", recv(s, b, sizeof b, MSG_OOB), b);
    atmark("urgent byte taken", s);
    got("recv MSG_OOB again", recv(s, b, sizeof b, MSG_OOB), b);
    wait_for("after taking it", s, 0);
    send(c, "more", 4, 0);
    wait_for("more", s, POLLIN);
    got("read", read(s, b, sizeof b), b);
    atmark("read past it", s);
    close(c);
    close(s);

    printf("-- read past the mark\n");
    pair(&c, &s);
    send(c, "12", 2, 0);
    send(c, "3", 1, MSG_OOB);
    send(c, "45", 2, 0);
    wait_for("sent", s, POLLIN | POLLPRI);
    got("read", read(s, b, sizeof b), b);
    got("read", read(s, b, sizeof b), b);
    got("recv MSG_OOB", recv(s, b, sizeof b, MSG_OOB), b);
    wait_for("after reading past it", s, 0);
    close(c);
    close(s);

    printf("-- SO_OOBINLINE\n");
    pair(&c, &s);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_OOBINLINE, &one, sizeof one);
    send(c, "ab", 2, 0);
    send(c, "c", 1, MSG_OOB);
    send(c, "d", 1, 0);
    wait_for("sent", s, POLLIN | POLLPRI);
    got("recv MSG_OOB", recv(s, b, sizeof b, MSG_OOB), b);
    got("read", read(s, b, sizeof b), b);
    atmark("inline, read up to the mark", s);
    got("read", read(s, b, sizeof b), b);
    close(c);
    close(s);

    printf("-- only the urgent byte\n");
    pair(&c, &s);
    send(c, "!", 1, MSG_OOB);
    wait_for("sent", s, POLLPRI);
    atmark("only the urgent byte", s);
    atmark("the listener", listener);
    int u = socket(AF_INET, SOCK_DGRAM, 0), sv[2];
    atmark("a UDP socket", u);
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    atmark("an AF_UNIX stream", sv[0]);
    close(u);
    close(sv[0]);
    close(sv[1]);
    atmark("standard input", 0);
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    atmark("an AF_UNIX datagram socket", sv[0]);
    close(sv[0]);
    close(sv[1]);
    int fl = MSG_DONTWAIT;
    got("recv (nothing in band)", recv(s, b, sizeof b, fl), b);
    got("recv MSG_OOB", recv(s, b, sizeof b, MSG_OOB), b);
    close(c);
    close(s);
    return 0;
}
