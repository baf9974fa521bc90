/* mremap keeps a mapping's rights, as Linux does: a read-only or PROT_NONE
 * mapping moved or grown by mremap stays read-only or inaccessible (a write
 * faults), its bytes move with it, and the old range is gone. Prints only
 * what is the same natively and in forkvm (no addresses). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile uintptr_t fault_addr;
static volatile int fault_code;

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    fault_addr = (uintptr_t)si->si_addr;
    fault_code = si->si_code;
    siglongjmp(env, 1);
}

static const char *code_name(int c) {
    return c == SEGV_ACCERR ? "SEGV_ACCERR" : c == SEGV_MAPERR ? "SEGV_MAPERR" : "other";
}

static void probe(const char *what, char *p, int write) {
    fault_addr = 0;
    if (sigsetjmp(env, 1) == 0) {
        if (write)
            *(volatile char *)p = 'w';
        else
            (void)*(volatile char *)p;
        printf("%s: no fault\n", what);
    } else {
        printf("%s: SIGSEGV %s, address %s\n", what, code_name(fault_code),
               fault_addr == (uintptr_t)p ? "right" : "wrong");
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    long page = sysconf(_SC_PAGESIZE);

    /* Read-only, moved: a writable page right after it blocks growth in place. */
    char *a = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    strcpy(a, "moved bytes");
    strcpy(a + page, "second page");
    mprotect(a, 2 * page, PROT_READ);
    char *m = mremap(a, 2 * page, 16 * page, MREMAP_MAYMOVE);
    printf("read-only move: %s, moved %s\n", m == MAP_FAILED ? "failed" : "ok", m != a ? "yes" : "no");
    printf("bytes: %s / %s\n", m, m + page);
    probe("write to the moved read-only page", m, 1);
    probe("write to its grown part", m + 10 * page, 1);
    probe("read of its grown part", m + 10 * page, 0);
    probe("read of the old address", a, 0);
    probe("write to the page that stayed", a + 2 * page, 1);

    /* Read-only, grown in place: the room after it is free. */
    char *g = mmap(NULL, 8 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(g + 2 * page, 6 * page);
    char *g2 = mremap(g, 2 * page, 8 * page, 0);
    printf("read-only growth in place: %s\n", g2 == g ? "ok" : "moved or failed");
    if (g2 == g) {
        probe("write to the grown read-only part", g + 5 * page, 1);
        probe("read of the grown read-only part", g + 5 * page, 0);
    }

    /* PROT_NONE, moved. */
    char *n = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(n, 2 * page, PROT_NONE);
    char *n2 = mremap(n, 2 * page, 4 * page, MREMAP_MAYMOVE);
    printf("inaccessible move: %s\n", n2 == MAP_FAILED ? "failed" : "ok");
    probe("read of the moved inaccessible page", n2, 0);
    probe("read of its grown part", n2 + 3 * page, 0);

    /* Writable, moved: stays writable. */
    char *w = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(w + 2 * page, page, PROT_READ);
    strcpy(w, "writable");
    char *w2 = mremap(w, 2 * page, 8 * page, MREMAP_MAYMOVE);
    probe("write to the moved writable page", w2, 1);
    probe("write to its grown part", w2 + 7 * page, 1);
    printf("bytes: %c%s\n", w2[0], w2 + 1);

    /* Read-only, shrunk: the tail is gone. */
    char *s = mmap(NULL, 4 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *s2 = mremap(s, 4 * page, page, 0);
    printf("shrink: %s\n", s2 == s ? "ok" : "moved or failed");
    probe("read of the shrunk tail", s + 2 * page, 0);
    probe("write to what is left", s, 1);
    return 0;
}
