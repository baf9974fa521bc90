/* fsgs_serve: a `forkvm serve` guest (built static with glibc by the hardening
 * tests) that changes its FS base behind the host's back.
 *
 * GET /?movfs=1   loads a user data selector into FS (its base becomes 0), answers "moved\n"
 * GET /?wrfs=1    wrfsbase 0, answers "wrote fs\n"
 * GET /?wrgs=1    wrgsbase 0x1234, answers "wrote gs\n"
 * GET /           reads the thread pointer through FS and the GS base (rdgsbase) and answers
 *                 "tls ok gs=0\n" when they are what the program started with; a request
 *                 that starts with FS base 0 faults (500), other wrong bases show in the text.
 *
 * The handler touches no TLS before it checks the FS base (no errno, no stdio). */
#include "forkvm.h"
#include <stdint.h>
#include <string.h>

static uintptr_t start_tp;

static uintptr_t thread_pointer(void)
{
    uintptr_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    return tp;
}

static void reply(const char *s)
{
    forkvm_respond(200, "", 0, s, strlen(s));
}

static int has(const struct forkvm_request *req, const char *key)
{
    size_t n = strlen(key);
    return req->query_len >= n && memcmp(req->query, key, n) == 0;
}

static void handle(const struct forkvm_request *req)
{
    if (has(req, "movfs=1")) {
        __asm__ volatile("mov %0, %%fs" ::"r"((unsigned short)0x2b));
        reply("moved\n");
        return;
    }
    if (has(req, "wrfs=1")) {
        __asm__ volatile("wrfsbase %0" ::"r"((uint64_t)0));
        reply("wrote fs\n");
        return;
    }
    if (has(req, "wrgs=1")) {
        __asm__ volatile("wrgsbase %0" ::"r"((uint64_t)0x1234));
        reply("wrote gs\n");
        return;
    }
    uint64_t gs;
    __asm__ volatile("rdgsbase %0" : "=r"(gs));
    if (thread_pointer() != start_tp)
        reply("tls wrong\n");
    else
        reply(gs == 0 ? "tls ok gs=0\n" : "tls ok gs=other\n");
}

int main(void)
{
    start_tp = thread_pointer();
    if (forkvm_serve(handle) < 0) return 1;
    return 0;
}
