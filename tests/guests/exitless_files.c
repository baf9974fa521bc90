// File calls of the kinds forkvm's host poller answers without a VM exit
// (open, pread, read, lseek, fstat, readv, getdents64, close, write), made
// in a loop by two threads while an interval timer interrupts them with a
// handler that makes the same calls: every answer is checked against the
// file's contents, so an answer delivered to the wrong call shows. Prints
// only what does not depend on timing, so native and forkvm runs compare.
//
// With "scribble", the program first tampers with forkvm's call slot (at
// 0xa000, only present in forkvm): its own calls must still be answered
// right, by one path or the other, and the host must not care.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#define ROUNDS 800

static const char *path;
static unsigned char *want; // the file's contents, read once
static off_t size;
static volatile long wrong;
static int null_fd;
static int handler_fd;

static void check_at(int fd, off_t off, size_t len) {
    unsigned char buf[256];
    if (off + (off_t)len > size) len = (size_t)(size - off);
    ssize_t n = pread(fd, buf, len, off);
    if (n != (ssize_t)len || memcmp(buf, want + off, len) != 0) wrong++;
}

static void on_alarm(int sig) {
    (void)sig;
    check_at(handler_fd, size / 3, 77);
    if (write(null_fd, "handler", 7) != 7) wrong++;
}

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            wrong++;
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size != size) wrong++;
        off_t off = (off_t)((i * 7919 + id * 104729) % (size > 64 ? size - 64 : 1));
        check_at(fd, off, 64);
        if (lseek(fd, off, SEEK_SET) != off) wrong++;
        unsigned char a[16], b[16];
        struct iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
        ssize_t n = readv(fd, iov, 2);
        if (n == 32 && (memcmp(a, want + off, 16) != 0 || memcmp(b, want + off + 16, 16) != 0))
            wrong++;
        if (write(null_fd, "x", 1) != 1) wrong++;
        close(fd);
    }
    return NULL;
}

static long count_entries(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    char buf[4096];
    long entries = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long pos = 0; pos < n;) {
            struct dirent64 *d = (struct dirent64 *)(buf + pos);
            entries++;
            pos += d->d_reclen;
        }
    }
    close(fd);
    return entries;
}

static void scribble(void) {
    volatile unsigned long *slot = (volatile unsigned long *)0xa000;
    // Post everything (mmap included), never give up waiting, then a tiny budget.
    for (int i = 0; i < 8; i++) slot[(0x280 >> 3) + i] = ~0UL;
    slot[0x250 >> 3] = 1;
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("mmap with every call posted: %s\n", p == MAP_FAILED ? "failed" : "ok");
    slot[0x248 >> 3] = 1;
    int fd = open(path, O_RDONLY);
    check_at(fd, 0, 64);
    close(fd);
    // A call posted by hand with a bad buffer: an error for it, nothing else.
    slot[0x208 >> 3] = SYS_write;
    slot[0x210 >> 3] = 1;
    slot[0x218 >> 3] = 0x10;
    slot[0x220 >> 3] = 5;
    slot[0x200 >> 3] = 1;
    for (long k = 0; k < 100000000 && slot[0x200 >> 3] == 1; k++) {
    }
    long result = (long)slot[0x240 >> 3];
    printf("hand-posted call: %s\n",
           slot[0x200 >> 3] != 2 || result == -14 ? "settled" : "wrong answer");
    // A stale "answered" state and garbage answer: the next real call overwrites them.
    slot[0x240 >> 3] = 12345;
    slot[0x200 >> 3] = 2;
    slot[0x248 >> 3] = 1000;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: exitless_files FILE DIR [scribble]\n");
        return 2;
    }
    path = argv[1];
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        return 1;
    }
    size = st.st_size;
    want = malloc((size_t)size);
    if (!want || pread(fd, want, (size_t)size, 0) != size) return 1;
    handler_fd = fd;
    null_fd = open("/dev/null", O_WRONLY);
    if (argc > 3 && strcmp(argv[3], "scribble") == 0) scribble();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 500}, {0, 500}};
    setitimer(ITIMER_REAL, &it, NULL);
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)1);
    worker((void *)0);
    pthread_join(t, NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);

    printf("file of %ld bytes, %d rounds in 2 threads\n", (long)size, ROUNDS);
    printf("directory entries: %ld\n", count_entries(argv[2]));
    printf("wrong answers: %ld\n", wrong);
    char cwd[256];
    printf("cwd: %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    return wrong != 0;
}
