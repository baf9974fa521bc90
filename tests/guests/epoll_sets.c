/* epoll as Linux has it beyond one flat set: an epoll set inside another
 * (or under poll/select) is readable when it has an event to report; sets
 * may not hold themselves, close a loop or nest more than 4 deep (ELOOP);
 * /dev/null and /dev/zero cannot be added (EPERM), and epoll_ctl checks in
 * Linux's order. With more descriptors ready than a call takes, successive
 * calls go round all of them (the least recently reported first) instead
 * of reporting the same first ones every time. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

static int add(int ep, int fd, unsigned events, unsigned long long data)
{
    struct epoll_event ev = {.events = events, .data.u64 = data};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : errno;
}

static const char *err(int e) { return e ? strerror(e) : "ok"; }

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    int p[2];
    pipe(p);
    int inner = epoll_create1(0), outer = epoll_create1(0);
    printf("pipe into inner: %s\n", err(add(inner, p[0], EPOLLIN, 1)));
    printf("inner into outer: %s\n", err(add(outer, inner, EPOLLIN, 2)));
    struct epoll_event got[4];
    printf("outer, nothing written: %d\n", epoll_wait(outer, got, 4, 0));
    struct pollfd pf = {.fd = inner, .events = POLLIN};
    printf("poll inner, nothing written: %d\n", poll(&pf, 1, 0));
    write(p[1], "x", 1);
    int n = epoll_wait(outer, got, 4, 0);
    printf("outer after a write: %d, data %llu, in %d\n", n, n > 0 ? (unsigned long long)got[0].data.u64 : 0,
           n > 0 && (got[0].events & EPOLLIN) != 0);
    n = poll(&pf, 1, 0);
    printf("poll inner: %d revents %#x\n", n, pf.revents);
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(inner, &rd);
    struct timeval tv = {0, 0};
    printf("select inner: %d\n", select(inner + 1, &rd, NULL, NULL, &tv));
    n = epoll_wait(outer, got, 4, 5000);
    printf("outer, waiting: %d\n", n);

    /* Loops and self. */
    printf("outer into inner (a loop): %s\n", err(add(inner, outer, EPOLLIN, 3)));
    int again = dup(outer);
    printf("outer into itself by a dup: %s\n", err(add(outer, again, EPOLLIN, 4)));
    printf("outer into itself: %s\n", err(add(outer, outer, EPOLLIN, 5)));

    /* Depth: a chain of sets, each inside the next. */
    int chain[7];
    chain[0] = epoll_create1(0);
    for (int i = 1; i < 7; i++) {
        chain[i] = epoll_create1(0);
        printf("chain %d into %d: %s\n", i - 1, i, err(add(chain[i], chain[i - 1], EPOLLIN, i)));
    }

    /* The deepest chain there may be (chain 0 to 4) reports what its
     * innermost set holds: a pipe with a byte in it. */
    add(chain[0], p[0], EPOLLIN, 99);
    n = epoll_wait(chain[4], got, 4, 0);
    printf("top of the chain: %d, data %llu\n", n, n > 0 ? (unsigned long long)got[0].data.u64 : 0);

    /* What cannot be polled, and the order of checks. */
    int null = open("/dev/null", O_RDONLY), zero = open("/dev/zero", O_RDONLY);
    printf("/dev/null: %s\n", err(add(outer, null, EPOLLIN, 6)));
    printf("/dev/zero: %s\n", err(add(outer, zero, EPOLLIN, 7)));
    printf("/dev/null into a bad epfd: %s\n", err(add(999, null, EPOLLIN, 8)));
    printf("/dev/null into a pipe: %s\n", err(add(p[0], null, EPOLLIN, 9)));
    printf("pipe into a pipe: %s\n", err(add(p[0], p[1], EPOLLOUT, 10)));
    printf("bad event pointer into a pipe: %s\n",
           epoll_ctl(p[0], EPOLL_CTL_ADD, p[1], (struct epoll_event *)8) == 0 ? "ok" : strerror(errno));

    /* Fairness: 13 ready pipes, 3 events a call, 52 events in all. */
    int ep = epoll_create1(0), fds[13][2], count[13] = {0};
    for (int i = 0; i < 13; i++) {
        pipe(fds[i]);
        write(fds[i][1], "x", 1);
        add(ep, fds[i][0], EPOLLIN, (unsigned long long)i);
    }
    for (int collected = 0; collected < 52;) {
        n = epoll_wait(ep, got, 3, 0);
        if (n != 3) {
            printf("epoll_wait gave %d\n", n);
            break;
        }
        for (int i = 0; i < n && collected < 52; i++, collected++)
            count[got[i].data.u64]++;
    }
    printf("reported:");
    for (int i = 0; i < 13; i++)
        printf(" %d", count[i]);
    printf("\n");
    return 0;
}
