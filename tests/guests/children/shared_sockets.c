/* Sockets reached by name from the other processes of a run, as on Linux:
 * a TCP listener or an AF_UNIX socket made after fork(), or one that the
 * connecting process never inherited (close-on-exec across execve), is
 * found through its address; a path-bound AF_UNIX socket is a socket file;
 * SO_PEERCRED names the process at the other end.
 *
 * Every line a child prints is flushed before the parent prints, and the
 * parent prints only after waiting for the child, so the output is in one
 * order natively and under forkvm. Scratch files go in /dev/shm: a test
 * tree under /tmp (a clone there) maps /tmp read-only for the guest. */
#define _GNU_SOURCE
#include "../common.h"
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHOW(what, expr)                                                                           \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(expr);                                                                    \
        printf("%s: %ld", what, r_ < 0 ? -1L : r_);                                               \
        if (r_ < 0) {                                                                              \
            printf(" ");                                                                           \
            print_errno(stdout, errno);                                                            \
        }                                                                                          \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            printf("check failed at line %d: %s (errno %d)\n", __LINE__, #c, errno);              \
            fflush(stdout);                                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* SO_PEERCRED of a TCP socket: Linux answers with no process. */
static void show_tcp_cred(const char *who, int fd)
{
    struct ucred c;
    socklen_t l = sizeof c;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &l) == 0);
    printf("%s: tcp SO_PEERCRED: pid %d uid %d gid %d\n", who, (int)c.pid, (int)c.uid, (int)c.gid);
}

static pid_t peer_pid(int fd)
{
    struct ucred c;
    socklen_t l = sizeof c;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &l) == 0);
    return c.pid;
}

/* Serves one connection on listener `l`: reads a word, answers "re:" + word.
 * Prints nothing (the client prints at the same time); returns whether
 * SO_PEERCRED named `client`. */
static int serve_one(int l, pid_t client)
{
    int c = accept(l, NULL, NULL);
    CHECK(c >= 0);
    int peer_ok = peer_pid(c) == client;
    char buf[64] = {0};
    ssize_t n = read(c, buf, sizeof buf - 1);
    CHECK(n > 0);
    char out[80];
    int m = snprintf(out, sizeof out, "re:%s", buf);
    CHECK(write(c, out, (size_t)m) == m);
    close(c);
    return peer_ok;
}

/* Sends `word` on connected socket `s` and prints the answer. */
static void ask(int s, const char *who, const char *word)
{
    CHECK(write(s, word, strlen(word)) == (ssize_t)strlen(word));
    char buf[80] = {0};
    ssize_t n, got = 0;
    while ((n = read(s, buf + got, sizeof buf - 1 - (size_t)got)) > 0)
        got += n;
    printf("%s: got \"%s\"\n", who, buf);
    fflush(stdout);
}

static int wait_child(pid_t pid)
{
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A TCP listener the child makes after fork: the parent connects to it. */
static void tcp_listener_made_by_a_child(void)
{
    int port_pipe[2];
    CHECK(pipe(port_pipe) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
        CHECK(listen(l, 4) == 0);
        socklen_t al = sizeof a;
        CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
        CHECK(write(port_pipe[1], &a.sin_port, sizeof a.sin_port) == sizeof a.sin_port);
        _exit(serve_one(l, 0) ? 0 : 2);
    }
    in_port_t port;
    CHECK(read(port_pipe[0], &port, sizeof port) == sizeof port);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    SHOW("tcp: connect to the child's listener", connect(s, (struct sockaddr *)&a, sizeof a));
    show_tcp_cred("tcp", s);
    ask(s, "tcp client", "ping");
    close(s);
    printf("tcp: child exited %d\n", wait_child(pid));
    /* The listener went with the child. */
    s = socket(AF_INET, SOCK_STREAM, 0);
    SHOW("tcp: connect after the child ended", connect(s, (struct sockaddr *)&a, sizeof a));
    close(s);
    close(port_pipe[0]);
    close(port_pipe[1]);
}

/* A close-on-exec TCP listener: an exec'd child connects by address. */
static void tcp_listener_not_inherited(const char *self)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(l, 4) == 0);
    socklen_t al = sizeof a;
    CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
    char port[16];
    snprintf(port, sizeof port, "%u", (unsigned)ntohs(a.sin_port));
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char *av[] = { (char *)self, "tcp-client", port, NULL };
        execv("/proc/self/exe", av);
        execv(self, av);
        _exit(127);
    }
    serve_one(l, 0);
    printf("exec'd client exited %d\n", wait_child(pid));
    close(l);
}

static int tcp_client(const char *port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((in_port_t)atoi(port)),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    SHOW("exec'd client: connect", connect(s, (struct sockaddr *)&a, sizeof a));
    show_tcp_cred("exec'd client", s);
    ask(s, "exec'd client", "hello");
    return 0;
}

/* AF_UNIX sockets bound after fork, by path (a socket file) and abstract name. */
static void unix_names_across_fork(int abstract)
{
    char dir[] = "/dev/shm/forkvm-sockets-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    socklen_t alen;
    if (abstract) {
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "forkvm-shared-%d", (int)getpid());
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    } else {
        snprintf(a.sun_path, sizeof a.sun_path, "%s/listener.sock", dir);
        alen = sizeof a;
    }
    const char *tag = abstract ? "abstract" : "path";
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int l = socket(AF_UNIX, SOCK_STREAM, 0);
        CHECK(bind(l, (struct sockaddr *)&a, alen) == 0);
        CHECK(listen(l, 4) == 0);
        CHECK(write(ready[1], "r", 1) == 1);
        _exit(serve_one(l, parent) ? 0 : 2);
    }
    char r;
    CHECK(read(ready[0], &r, 1) == 1);
    if (!abstract) {
        struct stat st;
        CHECK(stat(a.sun_path, &st) == 0);
        printf("%s: bound path is a socket: %d, mode %o\n", tag, S_ISSOCK(st.st_mode),
               (unsigned)(st.st_mode & 07777));
    }
    int taken = socket(AF_UNIX, SOCK_STREAM, 0);
    char what[64];
    snprintf(what, sizeof what, "%s: bind the child's name", tag);
    SHOW(what, bind(taken, (struct sockaddr *)&a, alen));
    close(taken);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    snprintf(what, sizeof what, "%s: connect to the child's listener", tag);
    SHOW(what, connect(s, (struct sockaddr *)&a, alen));
    int peer_ok = peer_pid(s) == pid;
    ask(s, tag, "unix");
    close(s);
    printf("%s: peer is the child: %d, child exited %d\n", tag, peer_ok, wait_child(pid));
    if (!abstract) {
        s = socket(AF_UNIX, SOCK_STREAM, 0);
        /* The file stays after its socket closed: nobody listens there now. */
        SHOW("path: connect after the child ended", connect(s, (struct sockaddr *)&a, alen));
        SHOW("path: unlink the socket file", unlink(a.sun_path));
        SHOW("path: connect after unlink", connect(s, (struct sockaddr *)&a, alen));
        /* A regular file at the path is not a socket. */
        FILE *f = fopen(a.sun_path, "w");
        CHECK(f != NULL);
        fclose(f);
        SHOW("path: connect to a regular file", connect(s, (struct sockaddr *)&a, alen));
        SHOW("path: bind over a regular file", bind(s, (struct sockaddr *)&a, alen));
        CHECK(unlink(a.sun_path) == 0);
        close(s);
    }
    CHECK(rmdir(dir) == 0);
    close(ready[0]);
    close(ready[1]);
}

/* A relative path names a socket file in the working directory. */
static void relative_path(void)
{
    char dir[] = "/dev/shm/forkvm-sockets-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(chdir(dir) == 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    strcpy(a.sun_path, "rel.sock");
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("relative: bind", bind(l, (struct sockaddr *)&a, sizeof a));
    SHOW("relative: listen", listen(l, 1));
    struct stat st;
    printf("relative: file in the working directory: %d\n",
           stat("/dev/shm", &st) == 0 && chdir("/") == 0 && strlen(dir) < 90 &&
               stat(strcat(strcat(dir, "/"), "rel.sock"), &st) == 0 && S_ISSOCK(st.st_mode));
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un full = { .sun_family = AF_UNIX };
    snprintf(full.sun_path, sizeof full.sun_path, "%s", dir);
    SHOW("relative: connect by absolute path", connect(s, (struct sockaddr *)&full, sizeof full));
    struct sockaddr_un got;
    socklen_t gl = sizeof got;
    CHECK(getsockname(l, (struct sockaddr *)&got, &gl) == 0);
    printf("relative: getsockname: %s\n", got.sun_path);
    close(s);
    close(l);
    CHECK(unlink(full.sun_path) == 0);
    *strrchr(dir, '/') = 0;
    CHECK(rmdir(dir) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "tcp-client") == 0)
        return tcp_client(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    umask(022);
    tcp_listener_made_by_a_child();
    tcp_listener_not_inherited(argv[0]);
    unix_names_across_fork(0);
    unix_names_across_fork(1);
    relative_path();
    printf("done\n");
    return 0;
}
