/* A FUTEX_WAIT on a word in MAP_SHARED memory, woken by another process
 * that changes the word and calls FUTEX_WAKE, returns 0 (woken), as on
 * Linux; EAGAIN is only for a word that already differed when the wait
 * began (the child here changes it 500 ms after the fork, and the parent
 * says "woken" for an EAGAIN only if the change came first).
 * A wake that changes nothing wakes the waiter too (LTP's checkpoints: the
 * waker repeats FUTEX_WAKE until it reports a waiter), and a private wake
 * from another process reaches no one. A child's timed wait ends with its
 * timeout, and a shared wake on an inaccessible page is EFAULT.
 * FUTEX_CMP_REQUEUE wakes one of other processes' waiters and moves the
 * rest to a second word, where a FUTEX_WAKE finds them. */
#define _GNU_SOURCE
#include <errno.h>
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_PRIVATE_FLAG 128
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"

struct shared {
    uint32_t word;
    double changed_at;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
    struct shared *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return 1;
    for (int round = 0; round < 3; round++) {
        s->word = 0;
        s->changed_at = 0;
        pid_t c = fork();
        if (c == 0) {
            struct timespec d = {0, 500000000};
            nanosleep(&d, NULL);
            s->changed_at = now();
            __atomic_store_n(&s->word, 1, __ATOMIC_SEQ_CST);
            syscall(SYS_futex, &s->word, FUTEX_WAKE, 1, NULL, NULL, 0);
            _exit(0);
        }
        double t0 = now();
        struct timespec limit = {10, 0};
        long r = syscall(SYS_futex, &s->word, FUTEX_WAIT, 0, &limit, NULL, 0);
        int e = errno;
        waitpid(c, NULL, 0);
        if (r == 0 || (e == EAGAIN && s->changed_at <= t0))
            printf("round %d: woken, word %u\n", round, s->word);
        else
            printf("round %d: %ld %s, word %u\n", round, r, strerror(e), s->word);
    }

    s->word = 0;
    pid_t c = fork();
    if (c == 0) {
        long n = 0;
        for (int i = 0; i < 5000 && n == 0; i++) {
            n = syscall(SYS_futex, &s->word, FUTEX_WAKE, 1, NULL, NULL, 0);
            if (n == 0)
                usleep(1000);
        }
        _exit(n == 1 ? 0 : 1);
    }
    struct timespec limit = {10, 0};
    long r = syscall(SYS_futex, &s->word, FUTEX_WAIT, 0, &limit, NULL, 0);
    int e = errno, st = 0;
    waitpid(c, &st, 0);
    printf("unchanged word: wait %ld %s, waker %s\n", r, r ? strerror(e) : "-",
           WEXITSTATUS(st) == 0 ? "woke one" : "found no waiter");

    c = fork();
    if (c == 0) {
        long n = 0;
        for (int i = 0; i < 100; i++) {
            n += syscall(SYS_futex, &s->word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
            usleep(1000);
        }
        _exit((int)n);
    }
    struct timespec short_limit = {0, 300000000};
    r = syscall(SYS_futex, &s->word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, &short_limit, NULL, 0);
    e = errno;
    waitpid(c, &st, 0);
    printf("private: wait %ld %s, other process woke %d\n", r, r ? strerror(e) : "-", WEXITSTATUS(st));

    /* A child's timed wait on its own memory, no other thread: the
     * timeout ends it (it was EINTR at the child's first 10 ms tick). */
    fflush(stdout);
    c = fork();
    if (c == 0) {
        uint32_t own = 0;
        struct timespec t = {0, 200000000};
        long w = syscall(SYS_futex, &own, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, &t, NULL, 0);
        printf("child's timed wait: %ld %s\n", w, w ? strerror(errno) : "-");
        fflush(stdout);
        _exit(0);
    }
    waitpid(c, NULL, 0);

    /* A shared wake looks the page up (EFAULT when it is unmapped or
     * inaccessible); a private one does not. */
    char *gone = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    r = syscall(SYS_futex, gone, FUTEX_WAKE, 1, NULL, NULL, 0);
    printf("wake on PROT_NONE: %ld %s\n", r, r < 0 ? strerror(errno) : "-");
    munmap(gone, 4096);
    r = syscall(SYS_futex, gone, FUTEX_WAKE, 1, NULL, NULL, 0);
    printf("wake on unmapped: %ld %s\n", r, r < 0 ? strerror(errno) : "-");
    r = syscall(SYS_futex, gone, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
    printf("private wake on unmapped: %ld %s\n", r, r < 0 ? strerror(errno) : "-");

    /* Other processes' waiters are requeued, not only this one's threads
     * (they hung: LTP's futex_cmp_requeue01). Each child waits on q[0]
     * once it is asleep (its /proc state is S); one is woken, the others
     * moved to q[16]. They wait there whatever becomes of q[0]. */
    fflush(stdout);
    uint32_t *q = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    enum { KIDS = 4 };
    pid_t kids[KIDS];
    for (int i = 0; i < KIDS; i++) {
        kids[i] = fork();
        if (kids[i] == 0)
            _exit(syscall(SYS_futex, &q[0], FUTEX_WAIT, 0, NULL, NULL, 0) == 0 ? 0 : 1);
    }
    for (int i = 0; i < KIDS; i++) wait_until_asleep(kids[i]);
    r = syscall(SYS_futex, &q[0], FUTEX_CMP_REQUEUE, 1, (void *)(long)KIDS, &q[16], 0);
    printf("cmp_requeue of %d waiters: %ld\n", KIDS, r);
    pid_t first = wait(&st);
    printf("the woken one exited: %s\n", first > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "yes" : "no");
    __atomic_store_n(&q[0], 1, __ATOMIC_SEQ_CST);
    usleep(20000);
    r = syscall(SYS_futex, &q[16], FUTEX_WAKE, KIDS, NULL, NULL, 0);
    printf("wake on the second word: %ld\n", r);
    int ok = 0;
    for (int i = 1; i < KIDS; i++)
        if (wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
    printf("requeued ones woken: %d\n", ok);
    return 0;
}
