// Memory calls of the kinds forkvm's host poller answers without a VM exit
// (mmap, munmap, mremap, mprotect, madvise, brk), each followed at once by
// loads and stores into what it mapped, the first of them before any other
// call: in forkvm that access may land in a chunk of guest RAM whose memory
// slot the host adds only at the next entry. Then two threads do the same
// under an interval timer whose handler maps and checks memory too. Every
// byte read is checked, so a page that is not zero when it must be, or that
// lost what was stored, shows. Prints only what does not depend on timing,
// so native and forkvm runs compare.
//
// Argument: a file to map (its mapping is checked against pread).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define MIB (1024L * 1024L)
#define ROUNDS 300

static volatile long wrong;
static const char *path;

// All of [p, p+len) reads as zero (sampled: first, last and every 4 KiB).
static void expect_zero(const unsigned char *p, size_t len) {
    for (size_t i = 0; i < len; i += 4096)
        if (p[i] != 0) wrong++;
    if (p[len - 1] != 0) wrong++;
}

// A 16-byte load right after the call (an SSE move), then stores and loads.
static void touch(unsigned char *p, size_t len, unsigned char seed) {
    unsigned char first[16];
    memcpy(first, p, sizeof first);
    for (size_t i = 0; i < sizeof first; i++)
        if (first[i] != 0) wrong++;
    for (size_t i = 0; i < len; i += 4096) p[i] = (unsigned char)(seed + i / 4096);
    p[len - 1] = seed;
    for (size_t i = 0; i < len - 1; i += 4096)
        if (p[i] != (unsigned char)(seed + i / 4096)) wrong++;
    if (p[len - 1] != seed) wrong++;
}

static void map_and_check(size_t len, unsigned char seed) {
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        wrong++;
        return;
    }
    p[0] = seed; // the first access after the call is a store
    if (p[0] != seed) wrong++;
    p[0] = 0;
    touch(p, len, seed);
    if (madvise(p, len, MADV_DONTNEED) != 0) wrong++;
    expect_zero(p, len);
    if (mprotect(p, 4096, PROT_READ) != 0) wrong++;
    if (mprotect(p, 4096, PROT_READ | PROT_WRITE) != 0) wrong++;
    unsigned char *q = mremap(p, len, len * 2, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
        wrong++;
        munmap(p, len);
        return;
    }
    expect_zero(q + len, len);
    touch(q + len, len, (unsigned char)(seed + 1));
    if (munmap(q, len * 2) != 0) wrong++;
}

// A mapping full of bytes, grown by mremap where it cannot grow in place
// (a page mapped right after it): the bytes move with it, the growth reads
// as zero, and the old range is free to map again.
static void move_and_check(size_t len, unsigned char seed) {
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        wrong++;
        return;
    }
    for (size_t i = 0; i < len; i += 512) p[i] = (unsigned char)(seed + i / 512);
    unsigned char *block = mmap(p + len, 4096, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    unsigned char *q = mremap(p, len, 2 * len, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
        wrong++;
    } else {
        if (block != MAP_FAILED && q == p) wrong++; // it had to move
        for (size_t i = 0; i < len; i += 512)
            if (q[i] != (unsigned char)(seed + i / 512)) wrong++;
        expect_zero(q + len, len);
        if (q != p) {
            unsigned char *r = mmap(p, len, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (r == MAP_FAILED) wrong++;
            else {
                expect_zero(r, len);
                munmap(r, len);
            }
        }
        munmap(q, 2 * len);
    }
    if (block != MAP_FAILED) munmap(block, 4096);
}

static void map_file_and_check(void) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        wrong++;
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 8192) {
        wrong++;
        close(fd);
        return;
    }
    size_t len = st.st_size > 256 * 1024 ? 256 * 1024 : (size_t)st.st_size;
    unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    unsigned char *buf = malloc(len);
    if (m == MAP_FAILED || buf == NULL || pread(fd, buf, len, 0) != (ssize_t)len ||
        memcmp(m, buf, len) != 0)
        wrong++;
    if (m != MAP_FAILED) munmap(m, len);
    free(buf);
    close(fd);
}

static void on_alarm(int sig) {
    (void)sig;
    map_and_check(64 * 1024, 7);
}

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        map_and_check((size_t)(1 + (i + id) % 5) * 64 * 1024, (unsigned char)(i + id));
        if (i % 50 == 0) map_file_and_check();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: exitless_memory FILE\n");
        return 2;
    }
    path = argv[1];

    // One thread, no timer: large mappings that walk into fresh address
    // space, each touched before any other call (only its first and last
    // pages, so that calls follow each other closely).
    enum { KEEP = 24 };
    static unsigned char *keep[KEEP];
    const size_t big = 6 * MIB;
    for (int i = 0; i < KEEP; i++) {
        keep[i] = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (keep[i] == MAP_FAILED) {
            wrong++;
            continue;
        }
        unsigned char last[16];
        memcpy(last, keep[i] + big - sizeof last, sizeof last);
        for (size_t k = 0; k < sizeof last; k++)
            if (last[k] != 0) wrong++;
        keep[i][0] = (unsigned char)(i + 1);
        keep[i][big - 1] = (unsigned char)(i + 2);
    }
    for (int i = 0; i < KEEP; i++) {
        if (keep[i] == MAP_FAILED) continue;
        if (keep[i][0] != (unsigned char)(i + 1) || keep[i][big - 1] != (unsigned char)(i + 2))
            wrong++;
        munmap(keep[i], big);
    }
    for (int i = 0; i < 8; i++) map_and_check((size_t)(i + 1) * MIB, (unsigned char)(3 * i));
    for (int i = 0; i < 6; i++) move_and_check((size_t)4096 << (2 * i), (unsigned char)(5 * i));
    // The heap (raw brk: musl's sbrk takes only 0): grow it, touch what it
    // gave, give it back, grow again (zero), and put the break back.
    unsigned char *b = (unsigned char *)syscall(SYS_brk, 0);
    unsigned char *end = b + 3 * MIB;
    if ((unsigned char *)syscall(SYS_brk, end) != end) wrong++;
    else {
        touch(b, 3 * MIB, 9);
        if ((unsigned char *)syscall(SYS_brk, b) != b) wrong++;
        if ((unsigned char *)syscall(SYS_brk, end) != end) wrong++;
        else expect_zero(b, 3 * MIB);
        if ((unsigned char *)syscall(SYS_brk, b) != b) wrong++;
    }
    // MAP_FIXED over heap pages replaces them, as on Linux (musl's malloc
    // puts a PROT_NONE guard page there): the new page reads as zero, its
    // neighbours keep their bytes, NOREPLACE finds the heap in the way, and
    // moving the break back takes the mapping with it.
    if ((unsigned char *)syscall(SYS_brk, end) != end) wrong++;
    else {
        unsigned char *pg = (unsigned char *)(((uintptr_t)b + 4095) & ~(uintptr_t)4095);
        memset(pg, 0x5a, 3 * 4096);
        if (mmap(pg + 4096, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
            pg + 4096)
            wrong++;
        else if (mprotect(pg + 4096, 4096, PROT_READ | PROT_WRITE) != 0)
            wrong++;
        else {
            expect_zero(pg + 4096, 4096);
            if (pg[0] != 0x5a || pg[2 * 4096] != 0x5a) wrong++;
        }
        errno = 0;
        if (mmap(pg, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) !=
                MAP_FAILED ||
            errno != EEXIST)
            wrong++;
        if ((unsigned char *)syscall(SYS_brk, b) != b) wrong++;
    }
    printf("heap: wrong answers so far: %ld\n", wrong);
    map_file_and_check();
    printf("one thread: wrong answers so far: %ld\n", wrong);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 700}, {0, 700}};
    setitimer(ITIMER_REAL, &it, NULL);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("threads and signals: wrong answers: %ld\n", wrong);
    return wrong != 0;
}
