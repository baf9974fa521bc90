/* A plain host HTTP/1.1 server around a forkvm example handler: the native
 * floor for bench/http.sh. It links the same handler source as the guest
 * (see forkvm_native.h): forkvm_serve(handler) runs this server and
 * forkvm_respond() answers the calling thread's request.
 *
 *   examples/build.sh                  # builds examples/out/<name>.native
 *   FORKVM_NATIVE_LISTEN=127.0.0.1:8081 examples/out/hello.native
 *   curl http://127.0.0.1:8081/
 *
 * Environment:
 *   FORKVM_NATIVE_LISTEN    ADDR:PORT to listen on (default 127.0.0.1:8081;
 *                           port 0 picks a free one). The address actually
 *                           bound is printed on stderr:
 *                           "native: listening on http://ADDR:PORT/".
 *   FORKVM_NATIVE_MAX_BODY  largest request body in bytes (default 1 MiB).
 *
 * One thread per connection, blocking I/O, keep-alive and pipelining
 * (requests on a connection are answered in order), Content-Length and
 * chunked request bodies, `Expect: 100-continue`. Errors: malformed request
 * 400 (connection closed), header section over 64 KiB 431, body over the
 * limit 413, handler returning without responding 502. A handler that
 * crashes takes the whole process down: unlike forkvm, nothing isolates it.
 * SIGTERM or SIGINT exits at once with status 0.
 */
#define _GNU_SOURCE
#include "forkvm_native.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_HEAD (64 * 1024)
#define READ_CHUNK (64 * 1024)

static forkvm_handler the_handler;
static size_t max_body = 1 << 20;

/* ---------------------------------------------------------------- response */

struct response {
    int set;
    int status;
    char *headers;
    size_t headers_len;
    char *body;
    size_t body_len;
};

/* The response slot of the request the calling thread is handling. */
static __thread struct response *current;

static void response_clear(struct response *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

long forkvm_native_respond(int status, const char *headers, unsigned long headers_len,
                           const void *body, unsigned long body_len)
{
    struct response *r = current;
    if (!r || status < 100 || status > 999) return -EINVAL;
    char *h = malloc(headers_len + 1);
    char *b = malloc(body_len + 1);
    if (!h || !b) {
        free(h);
        free(b);
        return -ENOMEM;
    }
    if (headers_len) memcpy(h, headers, headers_len);
    if (body_len) memcpy(b, body, body_len);
    response_clear(r); /* a second answer replaces the first */
    r->set = 1;
    r->status = status;
    r->headers = h;
    r->headers_len = headers_len;
    r->body = b;
    r->body_len = body_len;
    return 0;
}

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
    }
}

/* ------------------------------------------------------------------ output */

struct out {
    char *data;
    size_t len, cap;
};

static int out_add(struct out *o, const char *s, size_t n)
{
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 1024;
        while (cap < o->len + n) cap *= 2;
        char *p = realloc(o->data, cap);
        if (!p) return -1;
        o->data = p;
        o->cap = cap;
    }
    memcpy(o->data + o->len, s, n);
    o->len += n;
    return 0;
}

static int out_str(struct out *o, const char *s)
{
    return out_add(o, s, strlen(s));
}

/* Writes all of iov (head + body) to fd; -1 on error. */
static int write_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

static int header_is(const char *line, size_t name_len, const char *name)
{
    return strlen(name) == name_len && strncasecmp(line, name, name_len) == 0;
}

/* Sends one response. Guest header lines are passed through when they are
 * well-formed ("Name: value", no CR); the framing headers are ours. */
static int send_response(int fd, int status, const char *headers, size_t headers_len,
                         const char *body, size_t body_len, int keep_alive, int head_only)
{
    struct out o = {0};
    char line[128];
    int rc = 0;
    snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", status, reason(status));
    rc |= out_str(&o, line);
    size_t i = 0;
    while (i < headers_len) {
        const char *l = headers + i;
        const char *nl = memchr(l, '\n', headers_len - i);
        size_t n = nl ? (size_t)(nl - l) : headers_len - i;
        i += n + 1;
        const char *colon = memchr(l, ':', n);
        if (n == 0 || !colon || colon == l || memchr(l, '\r', n)) continue;
        size_t name_len = (size_t)(colon - l);
        if (header_is(l, name_len, "content-length") || header_is(l, name_len, "connection") ||
            header_is(l, name_len, "transfer-encoding"))
            continue;
        rc |= out_add(&o, l, n);
        rc |= out_str(&o, "\r\n");
    }
    snprintf(line, sizeof line, "Content-Length: %zu\r\nConnection: %s\r\n\r\n", body_len,
             keep_alive ? "keep-alive" : "close");
    rc |= out_str(&o, line);
    if (rc) {
        free(o.data);
        return -1;
    }
    struct iovec iov[2] = {{o.data, o.len}, {(void *)body, head_only ? 0 : body_len}};
    rc = write_all(fd, iov, 2);
    free(o.data);
    return rc;
}

static int send_error(int fd, int status, const char *msg)
{
    static const char text[] = "Content-Type: text/plain; charset=utf-8";
    return send_response(fd, status, text, sizeof text - 1, msg, strlen(msg), 0, 0);
}

/* ------------------------------------------------------------------- input */

struct conn {
    int fd;
    char *buf;
    size_t len, cap;
};

/* Reads more bytes into c->buf; returns the count, 0 at EOF, -1 on error. */
static ssize_t read_more(struct conn *c)
{
    if (c->cap - c->len < READ_CHUNK) {
        size_t cap = c->cap ? c->cap * 2 : 2 * READ_CHUNK;
        while (cap - c->len < READ_CHUNK) cap *= 2;
        char *p = realloc(c->buf, cap);
        if (!p) return -1;
        c->buf = p;
        c->cap = cap;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) c->len += (size_t)n;
        return n;
    }
}

static int is_tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_token(const char *s, size_t n)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i])) return 0;
    return 1;
}

/* Whether the comma-separated list v[0..n) contains `token` (case-insensitive). */
static int list_has(const char *v, size_t n, const char *token)
{
    size_t t = strlen(token), i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t s = i;
        while (i < n && v[i] != ',') i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
        if (e - s == t && strncasecmp(v + s, token, t) == 0) return 1;
    }
    return 0;
}

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

enum { NEED_MORE = -2, BAD = -1, TOO_BIG = -3 };

/* Decodes a chunked body from p[0..n) into body. Returns the bytes of p it
 * spans, NEED_MORE, BAD or TOO_BIG. */
static long dechunk(const char *p, size_t n, struct out *body)
{
    size_t i = 0;
    body->len = 0;
    for (;;) {
        const char *eol = memmem(p + i, n - i, "\r\n", 2);
        if (!eol) return n - i > 1024 ? BAD : NEED_MORE;
        size_t size = 0, digits = 0;
        const char *s = p + i;
        while (s < eol && hex_digit(*s) >= 0) {
            if (size > (SIZE_MAX >> 4)) return BAD;
            size = size * 16 + (size_t)hex_digit(*s);
            s++;
            digits++;
        }
        if (digits == 0 || (s < eol && *s != ';' && *s != ' ' && *s != '\t')) return BAD;
        i = (size_t)(eol - p) + 2;
        if (size == 0) {
            /* Trailer fields, then an empty line. */
            for (;;) {
                const char *t = memmem(p + i, n - i, "\r\n", 2);
                if (!t) return NEED_MORE;
                size_t len = (size_t)(t - (p + i));
                i += len + 2;
                if (len == 0) return (long)i;
            }
        }
        if (body->len + size > max_body) return TOO_BIG;
        if (n - i < size + 2) return NEED_MORE;
        if (p[i + size] != '\r' || p[i + size + 1] != '\n') return BAD;
        if (out_add(body, p + i, size)) return BAD;
        i += size + 2;
    }
}

/* Serves one request from c; returns 1 to keep the connection, 0 to close. */
static int serve_one(struct conn *c)
{
    /* The header section. */
    char *end;
    size_t scanned = 0;
    while (!(end = memmem(c->buf + (scanned > 3 ? scanned - 3 : 0),
                          c->len - (scanned > 3 ? scanned - 3 : 0), "\r\n\r\n", 4))) {
        scanned = c->len;
        if (c->len > MAX_HEAD) {
            send_error(c->fd, 431, "request header section too large\n");
            return 0;
        }
        ssize_t n = read_more(c);
        if (n <= 0) {
            if (n == 0 && c->len > 0) send_error(c->fd, 400, "incomplete request\n");
            return 0;
        }
    }
    size_t head_len = (size_t)(end - c->buf) + 4;
    if (head_len > MAX_HEAD) {
        send_error(c->fd, 431, "request header section too large\n");
        return 0;
    }

    /* Request line: METHOD SP TARGET SP HTTP/1.x */
    char *line = c->buf;
    char *eol = memmem(line, head_len, "\r\n", 2);
    char *sp1 = memchr(line, ' ', (size_t)(eol - line));
    char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || !is_token(line, (size_t)(sp1 - line)) || sp2 == sp1 + 1 ||
        sp1[1] != '/' || eol - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
        (sp2[8] != '0' && sp2[8] != '1')) {
        send_error(c->fd, 400, "malformed request line\n");
        return 0;
    }
    for (char *t = sp1 + 1; t < sp2; t++) {
        if ((unsigned char)*t <= ' ' || *t == 0x7f) {
            send_error(c->fd, 400, "malformed request target\n");
            return 0;
        }
    }
    int http11 = sp2[8] == '1';
    int keep_alive = http11;

    /* Header fields. */
    struct out hdrs = {0};
    long long content_length = -1;
    int chunked = 0, expect_continue = 0, bad = 0;
    char *l = eol + 2;
    while (!bad && l < c->buf + head_len - 2) {
        char *le = memmem(l, (size_t)(c->buf + head_len - l), "\r\n", 2);
        char *colon = memchr(l, ':', (size_t)(le - l));
        if (!colon || !is_token(l, (size_t)(colon - l))) {
            bad = 1;
            break;
        }
        size_t name_len = (size_t)(colon - l);
        char *v = colon + 1, *ve = le;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        size_t vlen = (size_t)(ve - v);
        for (char *t = v; t < ve; t++)
            if (*t == '\0' || *t == '\n' || *t == '\r') bad = 1;
        if (header_is(l, name_len, "content-length")) {
            long long cl = 0;
            if (vlen == 0 || vlen > 18) bad = 1;
            for (size_t k = 0; k < vlen && !bad; k++) {
                if (v[k] < '0' || v[k] > '9') bad = 1;
                else cl = cl * 10 + (v[k] - '0');
            }
            if (content_length >= 0 && content_length != cl) bad = 1;
            content_length = cl;
        } else if (header_is(l, name_len, "transfer-encoding")) {
            if (vlen == 7 && strncasecmp(v, "chunked", 7) == 0) chunked = 1;
            else bad = 1; /* other codings are not supported */
        } else if (header_is(l, name_len, "connection")) {
            if (list_has(v, vlen, "close")) keep_alive = 0;
            else if (list_has(v, vlen, "keep-alive")) keep_alive = 1;
        } else if (header_is(l, name_len, "expect")) {
            expect_continue = vlen == 12 && strncasecmp(v, "100-continue", 12) == 0;
        }
        if (hdrs.len) out_add(&hdrs, "\n", 1);
        out_add(&hdrs, l, name_len);
        out_add(&hdrs, ": ", 2);
        out_add(&hdrs, v, vlen);
        l = le + 2;
    }
    if (bad || (chunked && content_length >= 0)) {
        free(hdrs.data);
        send_error(c->fd, 400, "malformed header field\n");
        return 0;
    }

    /* The body. Reading more may move c->buf; remember offsets. */
    size_t sp1_off = (size_t)(sp1 - line), sp2_off = (size_t)(sp2 - line);
    struct out chunked_body = {0};
    const char *body = NULL;
    size_t body_len = 0, consumed = head_len;
    int sent_continue = 0;
    if (content_length > 0 && (unsigned long long)content_length > max_body) {
        free(hdrs.data);
        send_error(c->fd, 413, "request body too large\n");
        return 0;
    }
    for (;;) {
        int complete;
        if (chunked) {
            long r = dechunk(c->buf + head_len, c->len - head_len, &chunked_body);
            if (r == BAD || r == TOO_BIG) {
                free(hdrs.data);
                free(chunked_body.data);
                send_error(c->fd, r == BAD ? 400 : 413,
                           r == BAD ? "malformed chunked body\n" : "request body too large\n");
                return 0;
            }
            complete = r >= 0;
            if (complete) {
                consumed = head_len + (size_t)r;
                body = chunked_body.data;
                body_len = chunked_body.len;
            }
        } else {
            size_t want = content_length > 0 ? (size_t)content_length : 0;
            complete = c->len - head_len >= want;
            if (complete) {
                consumed = head_len + want;
                body = c->buf + head_len;
                body_len = want;
            }
        }
        if (complete) break;
        if (expect_continue && !sent_continue) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            struct iovec iov = {(void *)cont, sizeof cont - 1};
            if (write_all(c->fd, &iov, 1)) break;
            sent_continue = 1;
        }
        if (read_more(c) <= 0) {
            free(hdrs.data);
            free(chunked_body.data);
            return 0;
        }
    }

    /* Call the handler. Reading may have moved c->buf: recompute the pointers. */
    line = c->buf;
    sp1 = line + sp1_off;
    sp2 = line + sp2_off;
    char *target = sp1 + 1;
    size_t target_len = (size_t)(sp2 - target);
    char *q = memchr(target, '?', target_len);
    struct forkvm_request req = {
        .method = line,
        .method_len = (unsigned long)(sp1 - line),
        .path = target,
        .path_len = q ? (unsigned long)(q - target) : target_len,
        .query = q ? q + 1 : target + target_len,
        .query_len = q ? (unsigned long)(target + target_len - q - 1) : 0,
        .headers = hdrs.data ? hdrs.data : "",
        .headers_len = hdrs.len,
        .body = body ? body : "",
        .body_len = body_len,
    };
    struct response resp = {0};
    current = &resp;
    the_handler(&req);
    current = NULL;
    int head_only = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
    int rc;
    if (resp.set) {
        rc = send_response(c->fd, resp.status, resp.headers, resp.headers_len, resp.body,
                           resp.body_len, keep_alive, head_only);
    } else {
        static const char text[] = "Content-Type: text/plain; charset=utf-8";
        static const char msg[] = "the handler returned without responding\n";
        rc = send_response(c->fd, 502, text, sizeof text - 1, msg, sizeof msg - 1, keep_alive,
                           head_only);
    }
    response_clear(&resp);
    free(hdrs.data);
    free(chunked_body.data);

    /* Keep what follows (a pipelined request). */
    memmove(c->buf, c->buf + consumed, c->len - consumed);
    c->len -= consumed;
    return rc == 0 && keep_alive;
}

static void *connection(void *arg)
{
    struct conn c = {.fd = (int)(intptr_t)arg};
    while (serve_one(&c)) {
    }
    free(c.buf);
    close(c.fd);
    return NULL;
}

/* ---------------------------------------------------------------- listener */

static void on_signal(int sig)
{
    (void)sig;
    _exit(0);
}

static int listen_on(const char *spec)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || (size_t)(colon - spec) >= sizeof host) {
        fprintf(stderr, "native: FORKVM_NATIVE_LISTEN must be ADDR:PORT, not %s\n", spec);
        return -1;
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    int err = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &res);
    if (err) {
        fprintf(stderr, "native: cannot resolve %s: %s\n", spec, gai_strerror(err));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "native: cannot listen on %s: %s\n", spec, strerror(errno));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[NI_MAXHOST], port[NI_MAXSERV];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, addr, sizeof addr, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        int v6 = ss.ss_family == AF_INET6;
        fprintf(stderr, "native: listening on http://%s%s%s:%s/\n", v6 ? "[" : "", addr,
                v6 ? "]" : "", port);
    }
    return fd;
}

long forkvm_native_serve(forkvm_handler handler)
{
    const char *spec = getenv("FORKVM_NATIVE_LISTEN");
    const char *mb = getenv("FORKVM_NATIVE_MAX_BODY");
    if (mb && *mb) max_body = (size_t)strtoull(mb, NULL, 10);
    the_handler = handler;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    int lfd = listen_on(spec && *spec ? spec : "127.0.0.1:8081");
    if (lfd < 0) return -1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) usleep(10000);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, &attr, connection, (void *)(intptr_t)fd) != 0) close(fd);
    }
}
