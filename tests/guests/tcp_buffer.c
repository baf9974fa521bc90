/* A TCP connection over loopback buffers megabytes before the writer
 * blocks, as Linux's autotuned buffers (tcp_wmem's 4 MiB) do: a program
 * that writes a big reply to its own connection and reads it afterwards,
 * in one thread (Tcl's server with its default blocking channel), hung at
 * 208 KiB under forkvm. With SO_SNDBUF set, the buffer is that size again. */
#define _GNU_SOURCE
#include "common.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BIG (1500 * 1000)

static void connected(int *client, int *server) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) < 0) { perror("listen"); exit(1); }
    *client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*client, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); exit(1); }
    *server = accept(l, NULL, NULL);
    close(l);
}

static long drain(int fd, long want) {
    static char buf[65536];
    long got = 0;
    while (got < want) {
        long n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        got += n;
    }
    return got;
}

int main(void) {
    char *data = calloc(1, BIG);
    int c, s;
    connected(&c, &s);
    /* One blocking write of 1.5 MB with nobody reading yet. */
    long n = write(s, data, BIG);
    printf("blocking write: %ld\n", n);
    printf("read back: %ld\n", drain(c, BIG));

    /* Nonblocking: how much fits, roughly. */
    fcntl(s, F_SETFL, O_NONBLOCK);
    long total = 0;
    for (;;) {
        long w = write(s, data, 65536);
        if (w < 0) break;
        total += w;
    }
    printf("nonblocking fills at least 1.5 MB: %d, then %s\n", total >= BIG,
           errno_name(errno));
    struct pollfd pf = {.fd = s, .events = POLLOUT};
    printf("writable when full: %d\n", poll(&pf, 1, 0));
    printf("drained all: %d\n", drain(c, total) == total);
    printf("writable when empty: %d\n", poll(&pf, 1, 0));
    close(c);
    close(s);

    /* A small SO_SNDBUF bounds it again. */
    connected(&c, &s);
    int sz = 16384;
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    fcntl(s, F_SETFL, O_NONBLOCK);
    total = 0;
    for (;;) {
        long w = write(s, data, 4096);
        if (w < 0) break;
        total += w;
    }
    printf("with SO_SNDBUF 16384, under 1.5 MB: %d\n", total < BIG);
    return 0;
}
