/* inotify: watches on a directory in /dev/shm and on a file, the events the
 * program's own changes make (create, modify, close, attrib, move with its
 * cookie, mkdir, rmdir, delete), IN_IGNORED after inotify_rm_watch, poll
 * and epoll readiness, a read buffer too small, and the errors Linux gives. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%s: %ld\n", what, r);
}

static int ready(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) < 0 ? -1 : p.revents;
}

static unsigned last_cookie;

/* Reads and prints every waiting event (cookies as "same as the last"). */
static void drain(int fd, const char *when) {
    char buf[4096] __attribute__((aligned(8)));
    printf("-- %s\n", when);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno != EAGAIN) say("read", -1);
            return;
        }
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            printf("wd %d mask %#x cookie %s name \"%s\"\n", e->wd, e->mask,
                   e->cookie == 0 ? "0" : e->cookie == last_cookie ? "same" : "new",
                   e->len ? e->name : "");
            if (e->cookie) last_cookie = e->cookie;
            p += sizeof *e + e->len;
        }
    }
}

int main(void) {
    say("bad flags", inotify_init1(1));
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    say("init1", in >= 0 ? 0 : -1);
    say("cloexec", fcntl(in, F_GETFD));
    say("nonblock", (fcntl(in, F_GETFL) & O_NONBLOCK) != 0);
    char dir[64], f[128], g[128], sub[128];
    strcpy(dir, "/dev/shm/inotify_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(f, sizeof f, "%s/f", dir);
    snprintf(g, sizeof g, "%s/g", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);

    /* Errors. */
    say("no events", inotify_add_watch(in, dir, 0));
    say("add and create", inotify_add_watch(in, dir, IN_MODIFY | IN_MASK_ADD | IN_MASK_CREATE));
    say("bad fd", inotify_add_watch(99, dir, IN_MODIFY));
    say("not inotify", inotify_add_watch(1, dir, IN_MODIFY));
    say("missing path", inotify_add_watch(in, "/dev/shm/no/such/thing", IN_MODIFY));
    say("empty path", inotify_add_watch(in, "", IN_MODIFY));
    say("bad path pointer", inotify_add_watch(in, (const char *)8, IN_MODIFY));
    say("rm unknown", inotify_rm_watch(in, 12345));
    say("rm not inotify", inotify_rm_watch(1, 1));

    int wd = inotify_add_watch(in, dir, IN_ALL_EVENTS & ~(IN_ACCESS | IN_OPEN | IN_CLOSE_NOWRITE));
    say("watch dir", wd);
    say("same again, create", inotify_add_watch(in, dir, IN_MODIFY | IN_MASK_CREATE));
    say("same again", inotify_add_watch(in, dir, IN_ALL_EVENTS & ~(IN_ACCESS | IN_OPEN | IN_CLOSE_NOWRITE)));
    say("nothing yet", read(in, (char[64]){0}, 64));
    say("ready before", ready(in));

    int fd = open(f, O_WRONLY | O_CREAT | O_EXCL, 0600);
    write(fd, "hello", 5);
    close(fd);
    say("ready after", ready(in));
    say("small buffer", read(in, (char[8]){0}, 8));
    drain(in, "create, write, close");
    say("only a dir", inotify_add_watch(in, f, IN_MODIFY | IN_ONLYDIR));
    int fw = inotify_add_watch(in, f, IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVE_SELF);
    say("watch file", fw);
    chmod(f, 0640);
    fd = open(f, O_WRONLY | O_APPEND);
    write(fd, "!", 1);
    ftruncate(fd, 2);
    close(fd);
    drain(in, "chmod, append, ftruncate");
    rename(f, g);
    mkdir(sub, 0700);
    rmdir(sub);
    drain(in, "rename, mkdir, rmdir");

    /* epoll sees it too. */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 5};
    epoll_ctl(ep, EPOLL_CTL_ADD, in, &ev);
    struct epoll_event out[1];
    say("epoll idle", epoll_wait(ep, out, 1, 0));
    unlink(g);
    int n = epoll_wait(ep, out, 1, 1000);
    printf("epoll: %d events %#x data %llu\n", n, n > 0 ? out[0].events : 0,
           n > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
    drain(in, "unlink");

    say("rm dir watch", inotify_rm_watch(in, wd));
    say("rm again", inotify_rm_watch(in, wd));
    drain(in, "rm_watch");
    fd = open(f, O_WRONLY | O_CREAT, 0600);
    close(fd);
    unlink(f);
    drain(in, "unwatched");
    rmdir(dir);
    return 0;
}
