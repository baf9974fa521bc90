/* counter: shows what survives between requests, and misbehaves on demand.
 *
 *   forkvm serve examples/out/counter                      # ephemeral (default)
 *   forkvm serve --ephemeral false --concurrency 1 examples/out/counter
 *
 * GET /                 the value of a global request counter, e.g. "1\n".
 *                       Ephemeral workers are reset to the snapshot after
 *                       every request, so the answer is always "1\n"; with
 *                       --ephemeral false (one worker) it counts up.
 * GET /?secret=XYZ      writes XYZ into a heap buffer and a global; "stored\n".
 * GET /?peek=1          what the heap buffer and the global hold:
 *                       "heap=XYZ\nglobal=XYZ\n", or "heap=\nglobal=\n" when
 *                       clean (always clean in ephemeral mode).
 * GET /?crash=1         writes through a NULL pointer (forkvm answers 500).
 * GET /?spin=1          loops forever (forkvm answers 504 after --request-timeout).
 * GET /?noresp=1        returns without responding (forkvm answers 502).
 * GET /?big=N           a body of N MiB (at most 1024) of a repeating 64-byte
 *                       line, "0000000 ...\n" numbered by line: for the
 *                       large-response test; the body is deterministic.
 * POST / (any body)     "len=<n>\n": the body length forkvm delivered
 *                       (chunked request bodies arrive de-chunked).
 *
 * Everything else answers the counter. Answers are text/plain.
 */
#include "forkvm.h"
#include "example_util.h"
#include <stdint.h>

#define SECRET_MAX 256

static long counter;                  /* requests seen (since the snapshot) */
static char global_secret[SECRET_MAX]; /* written by ?secret= */
static char *heap_secret;              /* malloc'd at init, written by ?secret= */

static const char TEXT[] = "Content-Type: text/plain; charset=utf-8";

static void reply(int status, const char *body, size_t len)
{
    forkvm_respond(status, TEXT, sizeof TEXT - 1, body, len);
}

static void reply_str(int status, const char *body)
{
    reply(status, body, strlen(body));
}

/* The ?big=N body: 64-byte lines "<7-digit line number> <55 pattern chars>\n". */
static void big(long mib)
{
    if (mib < 0) mib = 0;
    if (mib > 1024) mib = 1024;
    size_t len = (size_t)mib << 20;
    char *p = malloc(len ? len : 1);
    if (!p) {
        reply_str(500, "out of memory\n");
        return;
    }
    static const char pattern[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012";
    for (size_t line = 0; line < len / 64; line++) {
        char *l = p + line * 64;
        char num[16];
        snprintf(num, sizeof num, "%07zu", line % 10000000);
        memcpy(l, num, 7);
        l[7] = ' ';
        memcpy(l + 8, pattern, 55);
        l[63] = '\n';
    }
    reply(200, p, len);
    free(p);
}

static void handle(const struct forkvm_request *req)
{
    char value[SECRET_MAX];
    char out[2 * SECRET_MAX + 64];
    counter++;

    if (query_get(req->query, req->query_len, "crash", value, sizeof value) >= 0) {
        *(volatile int *)(uintptr_t)0 = 1;
    }
    if (query_get(req->query, req->query_len, "spin", value, sizeof value) >= 0) {
        for (;;) __asm__ volatile("" ::: "memory");
    }
    if (query_get(req->query, req->query_len, "noresp", value, sizeof value) >= 0) {
        return;
    }
    if (query_get(req->query, req->query_len, "big", value, sizeof value) >= 0) {
        big(strtol(value, NULL, 10));
        return;
    }
    if (query_get(req->query, req->query_len, "secret", value, sizeof value) >= 0) {
        if (heap_secret) memcpy(heap_secret, value, strlen(value) + 1);
        memcpy(global_secret, value, strlen(value) + 1);
        reply_str(200, "stored\n");
        return;
    }
    if (query_get(req->query, req->query_len, "peek", value, sizeof value) >= 0) {
        int n = snprintf(out, sizeof out, "heap=%s\nglobal=%s\n", heap_secret ? heap_secret : "",
                         global_secret);
        reply(200, out, (size_t)n);
        return;
    }
    if (req->method_len == 4 && memcmp(req->method, "POST", 4) == 0) {
        int n = snprintf(out, sizeof out, "len=%lu\n", req->body_len);
        reply(200, out, (size_t)n);
        return;
    }
    int n = snprintf(out, sizeof out, "%ld\n", counter);
    reply(200, out, (size_t)n);
}

int main(void)
{
    heap_secret = calloc(1, SECRET_MAX);
    if (!heap_secret) return 1;
    if (forkvm_serve(handle) < 0) return 1;
    fputs("counter: nothing to do here; serve me with `forkvm serve`\n", stderr);
    return 0;
}
