/* A server with two listening sockets (crates/forkvm-cli/tests/outbound.rs),
 * natively and under forkvm serve:
 *
 *   two_ports PORT1 PORT2
 *
 * Both on 127.0.0.1, one epoll loop; every request is answered with the port
 * it came in on and how many requests this process served, then closed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64)) { perror("listen"); exit(1); }
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 3) { fputs("usage: two_ports PORT1 PORT2\n", stderr); return 2; }
    int ports[2] = {atoi(argv[1]), atoi(argv[2])};
    int ls[2] = {listen_on(ports[0]), listen_on(ports[1])};
    int ep = epoll_create1(0);
    for (int i = 0; i < 2; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = i};
        epoll_ctl(ep, EPOLL_CTL_ADD, ls[i], &e);
    }
    printf("listening on %d and %d\n", ports[0], ports[1]);
    fflush(stdout);
    long served = 0;
    for (;;) {
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, -1) != 1) continue;
        int i = got.data.u32;
        int c = accept(ls[i], NULL, NULL);
        if (c < 0) continue;
        char req[4096];
        size_t n = 0;
        while (n < sizeof req - 1) {
            ssize_t r = read(c, req + n, sizeof req - 1 - n);
            if (r <= 0) break;
            n += r;
            req[n] = 0;
            if (strstr(req, "\r\n\r\n")) break;
        }
        served++;
        char body[64], resp[256];
        int bl = snprintf(body, sizeof body, "port=%d count=%ld\n", ports[i], served);
        int rl = snprintf(resp, sizeof resp,
                          "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", bl, body);
        write(c, resp, rl);
        close(c);
    }
}
