/* hello: the smallest forkvm serve guest.
 *
 * Every request is answered with 200 "Hello from forkvm!\n" (text/plain).
 *
 *   examples/build.sh
 *   forkvm serve examples/out/hello
 *   curl http://127.0.0.1:8080/
 *
 * How it works: main() initialises (nothing to do here), then calls
 * forkvm_serve(handle). Under `forkvm serve` the program is snapshotted at
 * that call and handle() runs once per HTTP request in a copy-on-write fork
 * of the snapshot; it answers with forkvm_respond(). Under plain
 * `forkvm run`, or natively, forkvm_serve() returns at once.
 *
 * The same source also builds into a native HTTP server for comparison
 * (examples/native/, `-include forkvm_native.h`): there forkvm_serve()
 * runs an ordinary host server loop that calls handle() per request.
 */
#include "forkvm.h"
#include <stdio.h>

static const char HEADERS[] = "Content-Type: text/plain; charset=utf-8";
static const char BODY[] = "Hello from forkvm!\n";

static void handle(const struct forkvm_request *req)
{
    (void)req;
    forkvm_respond(200, HEADERS, sizeof HEADERS - 1, BODY, sizeof BODY - 1);
}

int main(void)
{
    if (forkvm_serve(handle) < 0) return 1;
    fputs("hello: nothing to do here; serve me with `forkvm serve`\n", stderr);
    return 0;
}
