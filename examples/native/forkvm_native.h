/* Native stand-ins for forkvm_serve() and forkvm_respond(), so the very same
 * handler source runs as an ordinary host HTTP server (the benchmark's floor).
 *
 * Build an example natively by force-including this header; the example's
 * own source does not change:
 *
 *   cc -O2 -pthread -DFORKVM_NATIVE -I guest/include -I examples/native \
 *      -include forkvm_native.h examples/c/hello.c examples/native/server.c
 *
 * It includes the real forkvm.h first (for struct forkvm_request and the
 * handler type), then renames the two calls to the functions in server.c.
 */
#ifndef FORKVM_NATIVE_H
#define FORKVM_NATIVE_H

#include "forkvm.h"

/* Runs the HTTP server (see server.c for its environment variables) and
 * calls `handler` for every request. Returns -1 if it cannot listen;
 * exits the process with status 0 on SIGTERM or SIGINT. */
long forkvm_native_serve(forkvm_handler handler);

/* Answers the request the calling thread is handling. Returns 0, or
 * -22 (EINVAL) outside a handler or for a bad status, -12 (ENOMEM). */
long forkvm_native_respond(int status, const char *headers, unsigned long headers_len,
                           const void *body, unsigned long body_len);

#define forkvm_serve forkvm_native_serve
#define forkvm_respond forkvm_native_respond

#endif /* FORKVM_NATIVE_H */
