/* Signal-driven I/O settings, read back as Linux gives them: O_ASYNC by
 * ioctl(FIOASYNC) and fcntl(F_SETFL), the owner by F_SETOWN and
 * F_SETOWN_EX, the signal by F_SETSIG. nginx's master sets them on the
 * channel to each worker it forks; ENOTTY made it give up the worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void show(const char *what, int rc) {
    printf("%s: %d %s\n", what, rc, rc < 0 ? strerror(errno) : "");
}

int main(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { perror("socketpair"); return 1; }
    int on = 1, off = 0;
    show("FIOASYNC on", ioctl(sv[0], FIOASYNC, &on));
    printf("O_ASYNC after FIOASYNC: %d\n", !!(fcntl(sv[0], F_GETFL) & O_ASYNC));
    show("FIOASYNC off", ioctl(sv[0], FIOASYNC, &off));
    printf("O_ASYNC after clearing: %d\n", !!(fcntl(sv[0], F_GETFL) & O_ASYNC));
    show("F_SETFL O_ASYNC", fcntl(sv[1], F_SETFL, O_ASYNC | O_NONBLOCK));
    int fl = fcntl(sv[1], F_GETFL);
    printf("flags: async=%d nonblock=%d\n", !!(fl & O_ASYNC), !!(fl & O_NONBLOCK));
    printf("owner at first: %d\n", fcntl(sv[0], F_GETOWN));
    show("F_SETOWN self", fcntl(sv[0], F_SETOWN, getpid()));
    printf("owner is self: %d\n", fcntl(sv[0], F_GETOWN) == getpid());
    struct f_owner_ex ex = {0};
    show("F_GETOWN_EX", fcntl(sv[0], F_GETOWN_EX, &ex));
    printf("owner_ex: type=%d self=%d\n", ex.type, ex.pid == getpid());
    ex.type = F_OWNER_PGRP;
    ex.pid = getpgrp();
    show("F_SETOWN_EX group", fcntl(sv[0], F_SETOWN_EX, &ex));
    printf("owner is -group: %d\n", fcntl(sv[0], F_GETOWN) == -getpgrp());
    ex.type = 7;
    show("F_SETOWN_EX bad type", fcntl(sv[0], F_SETOWN_EX, &ex));
    show("F_SETOWN nobody", fcntl(sv[0], F_SETOWN, 999999));
    show("F_SETOWN none", fcntl(sv[0], F_SETOWN, 0));
    printf("owner after none: %d\n", fcntl(sv[0], F_GETOWN));
    show("F_SETSIG 10", fcntl(sv[0], F_SETSIG, 10));
    printf("F_GETSIG: %d\n", fcntl(sv[0], F_GETSIG));
    show("F_SETSIG 99", fcntl(sv[0], F_SETSIG, 99));
    /* The setting belongs to the open file description: a dup sees it. */
    int d = dup(sv[0]);
    show("F_SETOWN self again", fcntl(sv[0], F_SETOWN, getpid()));
    printf("dup's owner is self: %d\n", fcntl(d, F_GETOWN) == getpid());
    return 0;
}
