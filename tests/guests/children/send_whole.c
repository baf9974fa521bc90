/* A blocking send() or sendmsg() on a stream socket returns only when it
 * has sent everything (or the peer is gone), as write() does: a program that
 * sends a large buffer once and does not loop lost the rest. */
#define _GNU_SOURCE
#include "../common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (4u << 20)

int main(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    char *buf = malloc(BIG);
    if (!buf)
        return 1;
    for (unsigned i = 0; i < BIG; i++)
        buf[i] = (char)(i * 7 + i / 4096);
    pid_t c = fork();
    if (c == 0) {
        close(sv[0]);
        usleep(300000); /* the sender fills the buffer and must wait */
        unsigned long total = 0, sum = 0;
        char chunk[65536];
        ssize_t n;
        while ((n = read(sv[1], chunk, sizeof chunk)) > 0) {
            for (ssize_t i = 0; i < n; i++)
                sum = sum * 31 + (unsigned char)chunk[i];
            total += (unsigned long)n;
        }
        printf("reader: %lu bytes, checksum %lx\n", total, sum);
        fflush(stdout);
        _exit(0);
    }
    close(sv[1]);
    ssize_t a = send(sv[0], buf, BIG, 0);
    struct iovec iov[2] = { { buf, BIG / 2 }, { buf + BIG / 2, BIG / 4 } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
    ssize_t b = sendmsg(sv[0], &m, 0);
    close(sv[0]);
    int st;
    waitpid(c, &st, 0);
    printf("send: %zd of %u, sendmsg: %zd of %u\n", a, BIG, b, BIG / 2 + BIG / 4);
    return 0;
}
