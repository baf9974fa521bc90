/* Small helpers shared by the C example guests: query-string lookup with
 * URL decoding, HTML escaping and a growable output buffer.
 *
 * Everything is `static` so each example stays one translation unit; the
 * helpers only use memory the caller passes or malloc/realloc, so they are
 * safe in a forkvm worker (which may be reset after every request) and in
 * the native server (where handlers run concurrently on several threads).
 */
#ifndef FORKVM_EXAMPLE_UTIL_H
#define FORKVM_EXAMPLE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int hex_value(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes application/x-www-form-urlencoded text (`%XX`, `+` for space)
 * from src[0..len) into out (at most cap-1 bytes, NUL-terminated).
 * Returns the decoded length (truncated to fit). */
static inline size_t url_decode(const char *src, size_t len, char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0) return 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        int c = (unsigned char)src[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%' && i + 2 < len && hex_value(src[i + 1]) >= 0 &&
                   hex_value(src[i + 2]) >= 0) {
            c = hex_value(src[i + 1]) * 16 + hex_value(src[i + 2]);
            i += 2;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return n;
}

/* Looks up parameter `name` in the query string q[0..qlen) (no leading '?').
 * On success decodes its value into out (see url_decode) and returns its
 * length; returns -1 when the parameter is absent. A bare `name` (no '=')
 * has the empty value. */
static inline long query_get(const char *q, size_t qlen, const char *name, char *out, size_t cap)
{
    size_t name_len = strlen(name);
    size_t i = 0;
    while (i <= qlen) {
        size_t end = i;
        while (end < qlen && q[end] != '&') end++;
        const char *pair = q + i;
        size_t pair_len = end - i;
        const char *eq = memchr(pair, '=', pair_len);
        size_t key_len = eq ? (size_t)(eq - pair) : pair_len;
        if (key_len == name_len && memcmp(pair, name, name_len) == 0) {
            const char *v = eq ? eq + 1 : pair + pair_len;
            size_t vlen = (size_t)(pair + pair_len - v);
            return (long)url_decode(v, vlen, out, cap);
        }
        i = end + 1;
    }
    if (cap) out[0] = '\0';
    return -1;
}

/* A growable byte buffer. Out of memory leaves `failed` set; callers
 * answer 500 then. */
struct buf {
    char *data;
    size_t len, cap;
    int failed;
};

static inline int buf_reserve(struct buf *b, size_t extra)
{
    if (b->failed) return -1;
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline void buf_add(struct buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) < 0) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

static inline void buf_puts(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static inline void buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || buf_reserve(b, (size_t)n + 1) < 0) {
        b->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Appends s[0..n) with & < > " ' replaced by HTML entities. */
static inline void buf_add_html(struct buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': buf_puts(b, "&amp;"); break;
        case '<': buf_puts(b, "&lt;"); break;
        case '>': buf_puts(b, "&gt;"); break;
        case '"': buf_puts(b, "&quot;"); break;
        case '\'': buf_puts(b, "&#39;"); break;
        default: buf_add(b, s + i, 1); break;
        }
    }
}

static inline void buf_free(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

#endif /* FORKVM_EXAMPLE_UTIL_H */
