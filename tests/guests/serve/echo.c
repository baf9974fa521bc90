/* echo: a `forkvm serve` test guest that reports the request it received.
 * Built by examples/build.sh into examples/out/tests/echo; used by
 * crates/forkvm-cli/tests/serve.rs.
 *
 * The body (text/plain) is one "key=value" line per item:
 *   method=GET
 *   path=/a/b
 *   query=x=1&y=2
 *   body_len=5
 *   body_fnv=<FNV-1a 64 of the body, 16 hex digits>
 *   header=Host: 127.0.0.1:8080          (one line per request header)
 * and the response carries "X-Echo: yes" and "X-Path-Len: <n>".
 *
 * Query parameters (applied in this order):
 *   log=TEXT     write "echo-stdout: TEXT\n" to fd 1 and "echo-stderr: TEXT\n"
 *                to fd 2 with write(2) (unbuffered: a reset worker never
 *                flushes stdio buffers)
 *   sleep_ms=N   sleep N ms (nanosleep) before answering: a request that is
 *                in flight for a while (SIGTERM test; with log=, a client
 *                knows when the sleep has begun)
 *   status=N     answer with status N instead of 200
 */
#include "forkvm.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long param(const struct forkvm_request *r, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name), i = 0;
    while (i <= r->query_len) {
        size_t e = i;
        while (e < r->query_len && r->query[e] != '&') e++;
        if (e - i > n && r->query[i + n] == '=' && memcmp(r->query + i, name, n) == 0) {
            size_t v = e - i - n - 1;
            if (v >= cap) v = cap - 1;
            memcpy(out, r->query + i + n + 1, v);
            out[v] = '\0';
            return (long)v;
        }
        i = e + 1;
    }
    return -1;
}

struct buf {
    char *p;
    size_t len, cap;
};

static void add(struct buf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void adds(struct buf *b, const char *s)
{
    add(b, s, strlen(s));
}

static void handle(const struct forkvm_request *r)
{
    char v[512];
    if (param(r, "log", v, sizeof v) >= 0) {
        char line[600];
        int n = snprintf(line, sizeof line, "echo-stdout: %s\n", v);
        if (write(1, line, (size_t)n) < 0) return;
        n = snprintf(line, sizeof line, "echo-stderr: %s\n", v);
        if (write(2, line, (size_t)n) < 0) return;
    }
    if (param(r, "sleep_ms", v, sizeof v) >= 0) {
        long ms = strtol(v, NULL, 10);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    int status = 200;
    if (param(r, "status", v, sizeof v) >= 0) status = atoi(v);

    uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned long i = 0; i < r->body_len; i++) {
        h ^= (unsigned char)r->body[i];
        h *= 0x100000001b3ULL;
    }
    struct buf b = {0};
    char line[128];
    adds(&b, "method=");
    add(&b, r->method, r->method_len);
    adds(&b, "\npath=");
    add(&b, r->path, r->path_len);
    adds(&b, "\nquery=");
    add(&b, r->query, r->query_len);
    snprintf(line, sizeof line, "\nbody_len=%lu\nbody_fnv=%016llx\n", r->body_len,
             (unsigned long long)h);
    adds(&b, line);
    unsigned long i = 0;
    while (i < r->headers_len) {
        const char *l = r->headers + i;
        const char *nl = memchr(l, '\n', r->headers_len - i);
        size_t n = nl ? (size_t)(nl - l) : r->headers_len - i;
        adds(&b, "header=");
        add(&b, l, n);
        adds(&b, "\n");
        i += n + 1;
    }
    char hdrs[128];
    int hn = snprintf(hdrs, sizeof hdrs, "Content-Type: text/plain\nX-Echo: yes\nX-Path-Len: %lu",
                      r->path_len);
    forkvm_respond(status, hdrs, (unsigned long)hn, b.p ? b.p : "", b.len);
    free(b.p);
}

int main(void)
{
    forkvm_serve(handle);
    return 0;
}
