/* hostile: a `forkvm serve` test guest whose handler misuses the API.
 * Built by examples/build.sh into examples/out/tests/hostile; used by
 * crates/forkvm-cli/tests/serve.rs. Every request must still get a
 * well-formed HTTP answer and the server must keep serving.
 *
 * GET /?mode=...
 *   badptr      forkvm_respond() with unmapped header and body pointers,
 *               then answers 200 "rc=<what the bad call returned>"
 *               (forkvm checks guest pointers: -14, EFAULT)
 *   badstatus   forkvm_respond(42, ...), then 200 "rc=<rc>" (-22, EINVAL)
 *   hugeheaders 100 KiB of headers, then 200 "rc=<rc>"
 *   inject      headers "X-A: 1\rInjected: yes\nBad Name: x\nX-B: 2": lines
 *               are separated by '\n' only, so the bare CR is inside X-A's
 *               value; it must not turn "Injected: yes" into a header of
 *               its own (nor may "Bad Name" pass as a field)
 *   twice       answers 200 "first", then 201 "second": status and body
 *               must belong to the same answer
 *   exit        exit(3) inside the handler (the guest process ends)
 *   stack       unbounded recursion (stack overflow: a crash)
 *   oom         allocates and touches memory until malloc fails, answers
 *               200 "mib=<n>"
 *   kernel      writes to guest-kernel memory (the GDT page at 0x1000): a crash
 *   anything else  200 "ok\n" (built with snprintf, which uses TLS)
 */
#include "forkvm.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char TEXT[] = "Content-Type: text/plain";

static void answer_rc(long rc)
{
    char body[64];
    int n = snprintf(body, sizeof body, "rc=%ld\n", rc);
    forkvm_respond(200, TEXT, sizeof TEXT - 1, body, (unsigned long)n);
}

static int mode_is(const struct forkvm_request *r, const char *m)
{
    size_t n = strlen(m);
    return r->query_len == 5 + n && memcmp(r->query, "mode=", 5) == 0 &&
           memcmp(r->query + 5, m, n) == 0;
}

static volatile long depth_limit = 1L << 40; /* never reached: the stack ends first */

static long depth(long n)
{
    volatile char pad[4096];
    pad[0] = (char)n;
    if (n >= depth_limit) return pad[0];
    return depth(n + 1) + pad[0];
}

static void handle(const struct forkvm_request *r)
{
    if (mode_is(r, "badptr")) {
        long rc = forkvm_respond(200, (const char *)(uintptr_t)0x10, 5,
                                 (const void *)(uintptr_t)0x7ff0deadbeef0000ULL, 100);
        answer_rc(rc);
    } else if (mode_is(r, "badstatus")) {
        answer_rc(forkvm_respond(42, TEXT, sizeof TEXT - 1, "x", 1));
    } else if (mode_is(r, "hugeheaders")) {
        size_t n = 100 << 10;
        char *h = malloc(n);
        if (!h) return;
        for (size_t i = 0; i < n; i++) h[i] = (i % 64 == 63) ? '\n' : 'a';
        memcpy(h, "X-Big: ", 7);
        answer_rc(forkvm_respond(200, h, n, "x", 1));
    } else if (mode_is(r, "inject")) {
        static const char h[] = "X-A: 1\rInjected: yes\nBad Name: x\nX-B: 2";
        forkvm_respond(200, h, sizeof h - 1, "inject\n", 7);
    } else if (mode_is(r, "twice")) {
        forkvm_respond(200, TEXT, sizeof TEXT - 1, "first\n", 6);
        forkvm_respond(201, TEXT, sizeof TEXT - 1, "second\n", 7);
    } else if (mode_is(r, "exit")) {
        exit(3);
    } else if (mode_is(r, "stack")) {
        answer_rc(depth(0));
    } else if (mode_is(r, "oom")) {
        long mib = 0;
        char *p;
        while (mib < 65536 && (p = malloc(1 << 20))) {
            memset(p, 0x5a, 1 << 20);
            mib++;
        }
        char body[64];
        int n = snprintf(body, sizeof body, "mib=%ld\n", mib);
        forkvm_respond(200, TEXT, sizeof TEXT - 1, body, (unsigned long)n);
    } else if (mode_is(r, "kernel")) {
        *(volatile uint64_t *)(uintptr_t)0x1000 = 0;
        forkvm_respond(200, TEXT, sizeof TEXT - 1, "wrote the GDT\n", 14);
    } else {
        /* The health check after each misdeed: snprintf reads the stack
         * canary at %fs:0x28, so a worker whose TLS (FS base) or memory
         * was not restored after a crash fails here. */
        char body[16];
        int n = snprintf(body, sizeof body, "%s\n", "ok");
        forkvm_respond(200, TEXT, sizeof TEXT - 1, body, (unsigned long)n);
    }
}

int main(void)
{
    forkvm_serve(handle);
    return 0;
}
