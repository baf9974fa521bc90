/* MAP_SHARED as programs use it: a file written through a mapping and read
 * back with read (the Go linker's output, LMDB's pages), coherence with
 * write, growth by mremap, MADV_DONTNEED keeping shared contents, and
 * anonymous or /dev/zero shared memory between a parent and its forked
 * child (python's multiprocessing, pre-forking servers). Also a file
 * truncated under its mapping, whose stale pages are passed to a system
 * call (forkvm itself must survive it). Usage: shared_mappings DIR */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char path[4096];

static int file_through_a_mapping(void) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 3 * 4096) != 0)
        return perror("open"), 1;
    char *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return perror("mmap"), 1;
    strcpy(p + 4096, "through the mapping");
    char buf[32] = {0};
    pread(fd, buf, 19, 4096);
    printf("read sees the mapping's write: %s\n", buf);
    pwrite(fd, "by pwrite", 9, 2 * 4096);
    printf("the mapping sees pwrite: %.9s\n", p + 2 * 4096);
    msync(p, 3 * 4096, MS_SYNC);
    madvise(p, 3 * 4096, MADV_DONTNEED);
    printf("after MADV_DONTNEED: %.19s\n", p + 4096);
    /* Grow the file and the mapping (it may move). */
    ftruncate(fd, 64 * 4096);
    char *q = mremap(p, 3 * 4096, 64 * 4096, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        return perror("mremap"), 1;
    strcpy(q + 63 * 4096, "in the grown part");
    printf("grown mapping keeps: %.19s\n", q + 4096);
    munmap(q, 64 * 4096);
    /* A small anonymous mapping where the shared one was must not reach the file. */
    char *z = mmap(q, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (z != MAP_FAILED)
        memset(z, 'x', 4096);
    memset(buf, 0, sizeof buf);
    pread(fd, buf, 17, 63 * 4096);
    printf("file after munmap: %s\n", buf);
    pread(fd, buf, 4, 0);
    printf("first page untouched by the new mapping: %d\n", buf[0] == 0);
    close(fd);
    int ro = open(path, O_RDONLY);
    void *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0);
    printf("writable shared map of a read-only fd: %s\n", w == MAP_FAILED ? strerror(errno) : "mapped");
    close(ro);
    return 0;
}

static int shared_with_a_child(const char *what, int flags, int fd) {
    volatile long *n = mmap(NULL, 8192, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (n == MAP_FAILED)
        return perror("mmap"), 1;
    n[0] = 1;
    pid_t c = fork();
    if (c == 0) {
        for (int i = 0; i < 1000; i++)
            __sync_fetch_and_add(&n[1], 1);
        n[0] = 42;
        _exit(0);
    }
    for (int i = 0; i < 1000; i++)
        __sync_fetch_and_add(&n[1], 1);
    waitpid(c, NULL, 0);
    printf("%s: the parent sees the child's write %ld and both counts %ld\n", what, n[0], n[1]);
    return 0;
}

static int truncated_under_the_mapping(void) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    char page[4096];
    memset(page, 'a', sizeof page);
    for (int i = 0; i < 4; i++)
        write(fd, page, sizeof page);
    char *p = mmap(NULL, 4 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    char *s = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || s == MAP_FAILED)
        return perror("mmap"), 1;
    printf("mapped: %c %c\n", p[0], s[0]);
    ftruncate(fd, 0);
    /* Pages past the new end handed to the kernel: an error, not a crash. */
    printf("open of a path there fails: %d\n", open(p + 8192, O_RDONLY) < 0);
    printf("write from there fails: %d\n", write(1, s + 8192, 16) < 0);
    close(fd);
    return 0;
}

/* A named POSIX semaphore (a 32-byte file in /dev/shm, mapped shared)
 * guarding a plain counter that a parent and its child both increment:
 * the count is exact only if the semaphore is shared and its waits wake. */
static int semaphore_between_processes(void) {
    char name[64];
    snprintf(name, sizeof name, "/forkvm-test-%d", (int)getpid());
    sem_t *s = sem_open(name, O_CREAT | O_EXCL, 0600, 1);
    if (s == SEM_FAILED)
        return perror("sem_open"), 1;
    sem_unlink(name);
    volatile long *n = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t c = fork();
    for (int i = 0; i < 2000; i++) {
        sem_wait(s);
        long v = *n;
        if (i % 64 == 0)
            sched_yield();
        *n = v + 1;
        sem_post(s);
    }
    if (c == 0)
        _exit(0);
    waitpid(c, NULL, 0);
    printf("semaphore between processes: count %ld\n", *n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    snprintf(path, sizeof path, "%s/shared_mappings.data", argv[1]);
    if (file_through_a_mapping() || truncated_under_the_mapping())
        return 1;
    if (shared_with_a_child("MAP_SHARED|MAP_ANONYMOUS", MAP_SHARED | MAP_ANONYMOUS, -1))
        return 1;
    int zero = open("/dev/zero", O_RDWR);
    if (shared_with_a_child("/dev/zero", MAP_SHARED, zero))
        return 1;
    if (semaphore_between_processes())
        return 1;
    unlink(path);
    return 0;
}
