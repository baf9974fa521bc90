/* Pseudo-terminals: posix_openpt, grantpt, unlockpt, ptsname, ttyname,
 * isatty, termios (canonical editing with echo, raw mode), window size,
 * a child in its own session that reads the slave and gets SIGINT from a
 * ^C, and the hang-ups: EIO on the master after the slave closes, end of
 * file and EIO on the slave after the master closes. Prints only what is
 * the same on any Linux (not the pty's number). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef TIOCGPTPEER
#define TIOCGPTPEER 0x5441
#endif

static void show(const char *what, const char *buf, int n) {
    printf("%s (%d):", what, n);
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            printf("%c", c);
        else
            printf("\\x%02x", c);
    }
    printf("\n");
    fflush(stdout);
}

/* Reads from fd until `want` bytes came or nothing more comes for 2 s
 * (Linux moves pty data through a work queue, so it may come in pieces). */
static int collect(int fd, char *buf, int want) {
    int got = 0;
    while (got < want) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0)
            break;
        int n = read(fd, buf + got, want - got);
        if (n <= 0)
            break;
        got += n;
    }
    return got;
}

/* Whether anything more is readable within 100 ms. */
static int more(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 100) > 0 && (p.revents & POLLIN);
}

static const char *err(int e) {
    switch (e) {
    case 0: return "ok";
    case EIO: return "EIO";
    case ENOENT: return "ENOENT";
    case EAGAIN: return "EAGAIN";
    case ENOTTY: return "ENOTTY";
    case EPERM: return "EPERM";
    case ENXIO: return "ENXIO";
    default: return "other";
    }
}

static volatile sig_atomic_t got_int;
static void on_int(int sig) { (void)sig; got_int = 1; }

int main(void) {
    char buf[256];
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0) {
        printf("posix_openpt: %s\n", strerror(errno));
        return 1;
    }
    printf("grantpt %d\n", grantpt(m));
    char name[64];
    snprintf(name, sizeof name, "%s", ptsname(m));
    printf("ptsname under /dev/pts: %d\n", strncmp(name, "/dev/pts/", 9) == 0);
    int locked = -1;
    ioctl(m, TIOCGPTLCK, &locked);
    errno = 0;
    int early = open(name, O_RDWR | O_NOCTTY);
    printf("locked %d, open before unlockpt: %s\n", locked, err(early < 0 ? errno : 0));
    printf("unlockpt %d\n", unlockpt(m));
    int s = open(name, O_RDWR | O_NOCTTY);
    if (s < 0) {
        printf("open slave: %s\n", strerror(errno));
        return 1;
    }
    printf("isatty master %d slave %d\n", isatty(m), isatty(s));
    const char *tn = ttyname(s);
    printf("ttyname is ptsname: %d\n", tn && strcmp(tn, name) == 0);
    unsigned n = 99;
    ioctl(m, TIOCGPTN, &n);
    struct stat fs, ps, ms;
    fstat(s, &fs);
    stat(name, &ps);
    fstat(m, &ms);
    printf("slave chr %d major %u minor is N %d, stat same %d\n", S_ISCHR(fs.st_mode),
           major(fs.st_rdev), minor(fs.st_rdev) == n,
           fs.st_dev == ps.st_dev && fs.st_ino == ps.st_ino && fs.st_rdev == ps.st_rdev);
    printf("master chr %d rdev %u,%u\n", S_ISCHR(ms.st_mode), major(ms.st_rdev), minor(ms.st_rdev));
    DIR *d = opendir("/dev/pts");
    int listed = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, name + 9) == 0)
            listed = 1;
    if (d)
        closedir(d);
    printf("listed in /dev/pts %d\n", listed);

    struct termios t;
    memset(&t, 0, sizeof t);
    tcgetattr(s, &t);
    printf("termios iflag %#o oflag %#o cflag %#o lflag %#o\n", t.c_iflag, t.c_oflag, t.c_cflag,
           t.c_lflag);
    printf("cc intr %d quit %d erase %d kill %d eof %d min %d time %d werase %d\n", t.c_cc[VINTR],
           t.c_cc[VQUIT], t.c_cc[VERASE], t.c_cc[VKILL], t.c_cc[VEOF], t.c_cc[VMIN], t.c_cc[VTIME],
           t.c_cc[VWERASE]);
    struct termios mt;
    memset(&mt, 0, sizeof mt);
    tcgetattr(m, &mt);
    printf("master termios is the slave's %d\n", memcmp(&mt, &t, sizeof t) == 0);
    struct winsize ws = {24, 80, 0, 0}, got = {0};
    ioctl(m, TIOCSWINSZ, &ws);
    ioctl(s, TIOCGWINSZ, &got);
    printf("winsize %d x %d\n", got.ws_row, got.ws_col);

    /* Canonical mode: editing, echo, ICRNL, ONLCR. */
    write(m, "ab\x7f", 3);
    int q = -1;
    ioctl(s, FIONREAD, &q);
    printf("FIONREAD with a partial line %d\n", q);
    write(m, "c\x01\r", 3);
    n = collect(s, buf, 4);
    show("slave read", buf, n);
    n = collect(m, buf, 14);
    show("echo", buf, n);
    write(m, "junk\x15word one\x17two\n", 18);
    n = collect(s, buf, 9);
    show("after kill and werase", buf, n);
    n = collect(m, buf, 60);
    show("their echo", buf, n);
    write(m, "eof\x04", 4);
    n = read(s, buf, sizeof buf);
    show("VEOF partial line", buf, n);
    write(m, "\x04", 1);
    printf("VEOF on empty line reads %d\n", (int)read(s, buf, sizeof buf));
    write(s, "out\nput\n", 8);
    n = collect(m, buf, 13);
    show("echo and slave output", buf, n);

    /* Raw mode. */
    struct termios raw = t;
    cfmakeraw(&raw);
    tcsetattr(s, TCSANOW, &raw);
    write(m, "r\r\n\x03", 4);
    n = collect(s, buf, 4);
    show("raw read", buf, n);
    printf("raw echo %d\n", more(m));
    write(s, "x\ny", 3);
    n = collect(m, buf, 3);
    show("raw output", buf, n);
    tcsetattr(s, TCSANOW, &t);

    int fl = fcntl(m, F_GETFL);
    fcntl(m, F_SETFL, fl | O_NONBLOCK);
    errno = 0;
    int r = read(m, buf, sizeof buf);
    printf("empty non-blocking master read %d %s\n", r, err(r < 0 ? errno : 0));
    fcntl(m, F_SETFL, fl);

    /* A child in its own session with the pty as controlling terminal:
     * it reads the slave, a ^C interrupts it. */
    int ready[2];
    pipe(ready);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        setsid();
        /* A new session has no controlling terminal: /dev/tty is ENXIO. */
        int none = open("/dev/tty", O_RDWR);
        int none_err = none < 0 ? errno : 0;
        int rc = ioctl(s, TIOCSCTTY, 0);
        int tty = open("/dev/tty", O_RDWR);
        pid_t fg = -1, sid = -1;
        ioctl(s, TIOCGPGRP, &fg);
        ioctl(s, TIOCGSID, &sid);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_int;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGINT, &sa, NULL);
        printf("child: TIOCSCTTY %d, foreground is itself %d, session is itself %d\n", rc,
               fg == getpid(), sid == getpid());
        printf("child: /dev/tty before %d %s, after %s\n", none, err(none_err),
               tty >= 0 ? "opened" : err(errno));
        fflush(stdout);
        write(ready[1], "r", 1);
        char line[64];
        int k = read(s, line, sizeof line);
        printf("child: got SIGINT %d, then read", (int)got_int);
        show("", line, k > 0 ? k : 0);
        /* Through /dev/tty: the same terminal. */
        write(tty >= 0 ? tty : s, "bye\n", 4);
        _exit(0);
    }
    close(ready[1]);
    read(ready[0], buf, 1);
    write(m, "lost", 4);
    n = collect(m, buf, 4);
    show("parent: echo of a line", buf, n);
    write(m, "\x03", 1);
    n = collect(m, buf, 2);
    show("parent: echo of the interrupted line", buf, n);
    write(m, "after\n", 6);
    int status;
    waitpid(pid, &status, 0);
    printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    n = collect(m, buf, 12);
    show("parent: echo and the child's output", buf, n);
    ioctl(m, TIOCGPGRP, &pid);

    /* Every slave closed: the master reads its data, then EIO; writes still go. */
    write(s, "last", 4);
    close(s);
    struct pollfd p = {m, POLLIN, 0};
    poll(&p, 1, 1000);
    printf("master poll after slave close: in %d hup %d\n", !!(p.revents & POLLIN),
           !!(p.revents & POLLHUP));
    n = collect(m, buf, 4);
    show("master reads the rest", buf, n);
    errno = 0;
    r = read(m, buf, sizeof buf);
    printf("then read %d %s\n", r, err(r < 0 ? errno : 0));
    printf("write to master without slave %d\n", (int)write(m, "zz", 2));

    /* TIOCGPTPEER, and the master closed under an open slave. */
    int peer = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY);
    printf("TIOCGPTPEER %s, isatty %d\n", err(peer < 0 ? errno : 0), isatty(peer));
    close(m);
    p.fd = peer;
    p.events = POLLIN | POLLOUT;
    poll(&p, 1, 1000);
    printf("slave poll after master close: in %d out %d err %d hup %d\n", !!(p.revents & POLLIN),
           !!(p.revents & POLLOUT), !!(p.revents & POLLERR), !!(p.revents & POLLHUP));
    printf("slave read %d\n", (int)read(peer, buf, sizeof buf));
    errno = 0;
    r = write(peer, "x", 1);
    printf("slave write %d %s\n", r, err(r < 0 ? errno : 0));
    errno = 0;
    r = open(name, O_RDWR | O_NOCTTY);
    printf("open after master close %d %s\n", r < 0 ? -1 : 0, err(r < 0 ? errno : 0));
    close(peer);
    errno = 0;
    r = ioctl(1, TIOCGPTN, &n);
    printf("TIOCGPTN on a non-pty %d\n", r);
    return 0;
}
