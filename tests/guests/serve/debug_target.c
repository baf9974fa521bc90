/* A `forkvm serve --gdb` test guest (crates/forkvm-cli/tests/gdb_serve.rs,
 * built there -O0 -g): the path says what the handler does.
 *   /stop   computes, then stops at forkvm_breakpoint() before answering
 *   /crash  writes to an unmapped address
 *   other   answers "n=<square(7)>" at once (square is a place for a gdb
 *           breakpoint that must not show in other workers)
 */
#include "forkvm.h"
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) int square(int x)
{
    return x * x;
}

__attribute__((noinline)) void answer(int value)
{
    char body[64];
    int n = snprintf(body, sizeof body, "n=%d\n", value);
    forkvm_respond(200, "Content-Type: text/plain", 24, body, (unsigned long)n);
}

__attribute__((noinline)) void stop_here(int depth)
{
    int local_answer = 6 * depth;
    forkvm_breakpoint();
    answer(local_answer + square(1));
}

static void handler(const struct forkvm_request *r)
{
    if (r->path_len == 5 && memcmp(r->path, "/stop", 5) == 0) {
        stop_here(7);
        return;
    }
    if (r->path_len == 6 && memcmp(r->path, "/crash", 6) == 0) {
        volatile int *p = (volatile int *)16;
        *p = 1;
    }
    answer(square(7));
}

int main(void)
{
    forkvm_serve(handler);
    return 0;
}
