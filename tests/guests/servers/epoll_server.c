/* A small HTTP/1.1 server on epoll (level-triggered, nonblocking sockets),
 * written as any C server would be: it knows nothing of forkvm. Used by
 * crates/forkvm-cli/tests/servers.rs, natively and under `forkvm serve`.
 *
 *   epoll_server [PORT]     listens on 127.0.0.1:PORT (default 8080)
 *
 * Routes: GET /        "hello from epoll\n"
 *         GET /count   "count=N\n" (N: requests this process has served)
 *         POST /echo   the request body
 *         GET /big     N bytes of a pattern (?n=BYTES, default 1 MiB)
 *         GET /crash   a NULL write (SIGSEGV)
 *         GET /answer-then-crash   "answered\n", written at once, then SIGSEGV
 *         GET /silent  no answer at all (the connection stays open)
 *         GET /spin    a busy loop that never ends
 *         GET /peer    "peer=IP:PORT local=IP:PORT\n" (getpeername, getsockname)
 * Every response has "X-Server: epoll-c" and Content-Length; keep-alive and
 * pipelining are honoured, "Connection: close" closes after the response. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 256
#define IN_CAP (4 << 20)

struct conn {
    int fd;
    char *in;
    size_t in_len;
    char *out;
    size_t out_len, out_off;
    int close_after;
};

static struct conn conns[MAX_CONNS];
static long served;

static struct conn *conn_for(int fd) {
    for (int i = 0; i < MAX_CONNS; i++)
        if (conns[i].fd == fd) return &conns[i];
    return NULL;
}

static void drop_conn(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static void append(struct conn *c, const char *data, size_t n) {
    c->out = realloc(c->out, c->out_len + n);
    if (!c->out) abort();
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
}

static void respond(struct conn *c, int status, const char *reason, const char *body, size_t n) {
    char head[256];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Server: epoll-c\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     status, reason, n, c->close_after ? "Connection: close\r\n" : "");
    append(c, head, (size_t)h);
    append(c, body, n);
}

/* Finds header `name` in [hdrs, end); returns its value (not NUL-terminated) or NULL. */
static const char *header(const char *hdrs, const char *end, const char *name, size_t *len) {
    size_t nl = strlen(name);
    for (const char *p = hdrs; p < end;) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) eol = end;
        if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (v < eol && *v == ' ') v++;
            *len = (size_t)(eol - v);
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

/* Handles every complete request in c->in; returns 0, or -1 on a malformed one. */
static int flush_out(struct conn *c);

static int handle_requests(struct conn *c) {
    for (;;) {
        char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (!end) return 0;
        size_t head_len = (size_t)(end - c->in) + 4;
        size_t vlen = 0, body_len = 0;
        const char *v = header(c->in, end, "Content-Length", &vlen);
        if (v) body_len = strtoul(v, NULL, 10);
        if (body_len > IN_CAP) return -1;
        if (c->in_len < head_len + body_len) return 0;
        char method[16] = {0}, target[1024] = {0};
        if (sscanf(c->in, "%15s %1023s", method, target) != 2) return -1;
        const char *conn_v = header(c->in, end, "Connection", &vlen);
        if (conn_v && vlen == 5 && strncasecmp(conn_v, "close", 5) == 0) c->close_after = 1;
        const char *body = c->in + head_len;
        served++;
        if (strcmp(target, "/crash") == 0) {
            *(volatile int *)0 = 1;
        } else if (strcmp(target, "/answer-then-crash") == 0) {
            respond(c, 200, "OK", "answered\n", 9);
            flush_out(c);
            *(volatile int *)0 = 1;
        } else if (strcmp(target, "/silent") == 0) {
            /* nothing */
        } else if (strcmp(target, "/spin") == 0) {
            for (volatile unsigned long i = 0;; i++) {
            }
        } else if (strcmp(method, "POST") == 0 && strcmp(target, "/echo") == 0) {
            respond(c, 200, "OK", body, body_len);
        } else if (strcmp(target, "/peer") == 0) {
            struct sockaddr_in pa, la;
            socklen_t pl = sizeof pa, ll = sizeof la;
            char b[128], ip[INET_ADDRSTRLEN], lip[INET_ADDRSTRLEN];
            if (getpeername(c->fd, (struct sockaddr *)&pa, &pl) < 0 ||
                getsockname(c->fd, (struct sockaddr *)&la, &ll) < 0) {
                respond(c, 500, "Error", "no name\n", 8);
            } else {
                inet_ntop(AF_INET, &pa.sin_addr, ip, sizeof ip);
                inet_ntop(AF_INET, &la.sin_addr, lip, sizeof lip);
                int n = snprintf(b, sizeof b, "peer=%s:%d local=%s:%d\n", ip, ntohs(pa.sin_port),
                                 lip, ntohs(la.sin_port));
                respond(c, 200, "OK", b, (size_t)n);
            }
        } else if (strcmp(target, "/count") == 0) {
            char b[64];
            int n = snprintf(b, sizeof b, "count=%ld\n", served);
            respond(c, 200, "OK", b, (size_t)n);
        } else if (strncmp(target, "/big", 4) == 0) {
            size_t n = 1 << 20;
            const char *q = strstr(target, "n=");
            if (q) n = strtoul(q + 2, NULL, 10);
            if (n > (64u << 20)) n = 64u << 20;
            char *b = malloc(n ? n : 1);
            if (!b) abort();
            for (size_t i = 0; i < n; i++) b[i] = (char)('a' + i % 26);
            respond(c, 200, "OK", b, n);
            free(b);
        } else if (strcmp(target, "/") == 0) {
            respond(c, 200, "OK", "hello from epoll\n", 17);
        } else {
            respond(c, 404, "Not Found", "not found\n", 10);
        }
        size_t used = head_len + body_len;
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
        if (c->close_after) return 0;
    }
}

/* Writes what is pending; returns 1 when all is written, 0 if it must wait, -1 on error. */
static int flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->out_off += (size_t)n;
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    return 1;
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 8080;
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 0; i < MAX_CONNS; i++) conns[i].fd = -1;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ls < 0) { perror("socket"); return 1; }
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("bind"); return 1; }
    if (listen(ls, 128) < 0) { perror("listen"); return 1; }
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    printf("listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                struct sockaddr_in peer;
                socklen_t pl = sizeof peer;
                int c = accept4(ls, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0) continue;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                struct conn *slot = conn_for(-1);
                if (!slot) { close(c); continue; }
                slot->fd = c;
                struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                continue;
            }
            struct conn *c = conn_for(fd);
            if (!c) continue;
            if (evs[i].events & EPOLLOUT) {
                int r = flush_out(c);
                if (r < 0) { drop_conn(ep, c); continue; }
                if (r == 0) continue;
                if (c->close_after) { drop_conn(ep, c); continue; }
                struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))) continue;
            if (!c->in) c->in = malloc(IN_CAP);
            ssize_t got = read(fd, c->in + c->in_len, IN_CAP - c->in_len);
            if (got < 0 && errno == EAGAIN) continue;
            if (got <= 0) { drop_conn(ep, c); continue; }
            c->in_len += (size_t)got;
            if (handle_requests(c) < 0) { drop_conn(ep, c); continue; }
            int r = flush_out(c);
            if (r < 0) { drop_conn(ep, c); continue; }
            if (r == 0) {
                struct epoll_event cev = {.events = EPOLLOUT, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
                continue;
            }
            if (c->close_after) drop_conn(ep, c);
        }
    }
}
