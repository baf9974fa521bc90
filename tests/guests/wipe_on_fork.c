/* MADV_WIPEONFORK: a forked child sees the range zeroed, the parent keeps
 * it; MADV_KEEPONFORK undoes it; shared memory is EINVAL. Random-number
 * generators (AWS-LC, BoringSSL) keep their state there to notice a fork:
 * with the parent's bytes, parent and child drew the same numbers. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#define MADV_KEEPONFORK 19
#endif

static long pg;

static const char *what(const unsigned char *p, long len) {
    int zero = 1, kept = 1;
    for (long i = 0; i < len; i++) {
        if (p[i] != 0) zero = 0;
        if (p[i] != 0x5a) kept = 0;
    }
    return zero ? "zero" : kept ? "kept" : "mixed";
}

/* Forks; the child (and a grandchild) print what they see of p's pages. */
static void show_in_child(const char *name, unsigned char *p, long pages) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (long i = 0; i < pages; i++) printf("  %s child page %ld %s\n", name, i, what(p + i * pg, pg));
        fflush(stdout);
        pid_t g = fork();
        if (g == 0) {
            printf("  %s grandchild page 0 %s\n", name, what(p, pg));
            fflush(stdout);
            _exit(0);
        }
        waitpid(g, NULL, 0);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    for (long i = 0; i < pages; i++) printf("  %s parent page %ld %s\n", name, i, what(p + i * pg, pg));
}

int main(void) {
    pg = sysconf(_SC_PAGESIZE);
    unsigned char *p = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    memset(p, 0x5a, 3 * pg);
    printf("wipeonfork pages 0-1: %d\n", madvise(p, 2 * pg, MADV_WIPEONFORK));
    show_in_child("wipe", p, 3);
    memset(p, 0x5a, 3 * pg);
    printf("keeponfork page 1: %d\n", madvise(p + pg, pg, MADV_KEEPONFORK));
    show_in_child("keep", p, 3);

    unsigned char *s = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) return 1;
    int rc = madvise(s, pg, MADV_WIPEONFORK);
    printf("wipeonfork of shared memory: %d %s\n", rc, rc && errno == EINVAL ? "EINVAL" : "");
    printf("keeponfork of shared memory: %d\n", madvise(s, pg, MADV_KEEPONFORK));
    return 0;
}
