/* File mappings kept coherent with the file as on Linux: a read-only
 * MAP_SHARED mapping (or an untouched MAP_PRIVATE one) shows what write(2)
 * puts in the file afterwards, by this process or a child, including the
 * last partial page and a file smaller than a page; a MAP_SHARED mapping
 * longer than its file reaches the file once the file grows, both ways;
 * MADV_DONTNEED on a MAP_PRIVATE file mapping drops the private changes
 * and reads the file again (not zeroes); an access past the end of a file
 * that shrank under its shared mapping is SIGBUS, which a handler catches.
 * Usage: file_mappings DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096

static char path[4096];

/* A fresh file of `len` bytes of `c`, open for reading and writing. */
static int fresh(size_t len, char c) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return perror("open"), -1;
    char buf[PAGE];
    memset(buf, c, sizeof buf);
    for (size_t done = 0; done < len;) {
        size_t n = len - done < sizeof buf ? len - done : sizeof buf;
        if (write(fd, buf, n) != (ssize_t)n)
            return perror("write"), -1;
        done += n;
    }
    return fd;
}

/* pwrite by a forked child, waited for. */
static void child_pwrite(int fd, const char *s, off_t off) {
    pid_t c = fork();
    if (c == 0) {
        pwrite(fd, s, strlen(s), off);
        _exit(0);
    }
    waitpid(c, NULL, 0);
}

static int read_only_shared(void) {
    /* A file smaller than a page. */
    int fd = fresh(100, 'a');
    const char *p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || p == MAP_FAILED)
        return perror("mmap"), 1;
    printf("small file: %.6s\n", p);
    pwrite(fd, "by pwrite", 9, 10);
    printf("small file after pwrite: %.12s\n", p + 8);
    child_pwrite(fd, "by a child", 40);
    printf("small file after a child's pwrite: %.14s\n", p + 38);
    /* Growing within the page: the new bytes show, the rest stays zero. */
    pwrite(fd, "grown", 5, 200);
    printf("small file grown: %.5s, then %d\n", p + 200, p[205]);
    munmap((void *)p, PAGE);
    close(fd);

    /* The last partial page of a larger file. */
    fd = fresh(2 * PAGE + 100, 'b');
    p = mmap(NULL, 3 * PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || p == MAP_FAILED)
        return perror("mmap"), 1;
    pwrite(fd, "first page", 10, 5);
    pwrite(fd, "last page", 9, 2 * PAGE + 5);
    printf("whole page after pwrite: %.10s\n", p + 5);
    printf("partial page after pwrite: %.9s\n", p + 2 * PAGE + 5);
    child_pwrite(fd, "child's", 2 * PAGE + 50);
    printf("partial page after a child's pwrite: %.7s\n", p + 2 * PAGE + 50);
    munmap((void *)p, 3 * PAGE);
    close(fd);
    return 0;
}

static int private_mappings(void) {
    int fd = fresh(2 * PAGE + 100, 'c');
    const char *r = mmap(NULL, 3 * PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    char *w = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (fd < 0 || r == MAP_FAILED || w == MAP_FAILED)
        return perror("mmap"), 1;
    /* Written pages are the process's own; unwritten ones of a read-only
     * mapping are the file's. (Unwritten pages of a small writable one are
     * copies in forkvm: it copies them at mmap, see docs/design.md.) */
    w[0] = 'W';
    w[2 * PAGE] = 'W';
    pwrite(fd, "new", 3, 1);
    pwrite(fd, "new", 3, PAGE + 1);
    pwrite(fd, "new", 3, 2 * PAGE + 1);
    printf("read-only private, whole page: %.4s\n", r);
    printf("read-only private, partial page: %.4s\n", r + 2 * PAGE);
    printf("written private page keeps its copy: %.4s\n", w);
    printf("written partial page keeps its copy: %.4s\n", w + 2 * PAGE);
    /* MADV_DONTNEED drops the copies: the file's bytes again, zero past its end. */
    if (madvise(w, 3 * PAGE, MADV_DONTNEED) != 0)
        return perror("madvise"), 1;
    printf("after MADV_DONTNEED: %.4s %.4s %.4s, past the end %d\n", w, w + PAGE, w + 2 * PAGE,
           w[2 * PAGE + 100]);
    /* Only the pages asked for. */
    w[0] = 'X';
    w[PAGE] = 'X';
    madvise(w + PAGE, PAGE, MADV_DONTNEED);
    printf("one page dropped: %.2s %.2s\n", w, w + PAGE);
    munmap((void *)r, 3 * PAGE);
    munmap(w, 3 * PAGE);

    /* A larger writable private mapping, and one at an offset. */
    if (ftruncate(fd, 512 * PAGE) != 0)
        return perror("ftruncate"), 1;
    char *big = mmap(NULL, 256 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 256 * PAGE);
    if (big == MAP_FAILED)
        return perror("mmap"), 1;
    pwrite(fd, "far", 3, 300 * PAGE);
    memset(big, 'Z', 256 * PAGE);
    madvise(big, 256 * PAGE, MADV_DONTNEED);
    printf("large private mapping at an offset after MADV_DONTNEED: %d %.3s %d\n", big[0],
           big + 44 * PAGE, big[255 * PAGE]);
    munmap(big, 256 * PAGE);
    close(fd);
    return 0;
}

static int shared_longer_than_the_file(void) {
    int fd = fresh(100, 'd');
    char *p = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd < 0 || p == MAP_FAILED)
        return perror("mmap"), 1;
    strcpy(p + 10, "in the first page");
    /* The file grows: the mapping's pages past the old end are the file's now. */
    if (ftruncate(fd, 3 * PAGE) != 0)
        return perror("ftruncate"), 1;
    strcpy(p + 2 * PAGE + 7, "past the old end");
    char buf[32] = {0};
    pread(fd, buf, 16, 2 * PAGE + 7);
    printf("a store past the old end reaches the file: %s\n", buf);
    pwrite(fd, "written", 7, PAGE + 3);
    printf("the mapping sees the file's growth: %.7s\n", p + PAGE + 3);
    /* Growth by write(2) past the end. */
    pwrite(fd, "appended", 8, 3 * PAGE + 1);
    printf("the mapping sees an append: %.8s\n", p + 3 * PAGE + 1);
    strcpy(p + 3 * PAGE + 1, "STORED");
    memset(buf, 0, sizeof buf);
    pread(fd, buf, 6, 3 * PAGE + 1);
    printf("a store in the appended page reaches the file: %s\n", buf);
    /* A forked child's store there reaches its parent and the file. */
    pid_t c = fork();
    if (c == 0) {
        strcpy(p + 2 * PAGE + 500, "child");
        _exit(0);
    }
    waitpid(c, NULL, 0);
    memset(buf, 0, sizeof buf);
    pread(fd, buf, 5, 2 * PAGE + 500);
    printf("a child's store: %.5s, in the file: %s\n", p + 2 * PAGE + 500, buf);
    munmap(p, 4 * PAGE);
    close(fd);
    return 0;
}

static sigjmp_buf env;
static volatile char *fault_addr;
static volatile int fault_code;

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)ctx;
    fault_addr = si->si_addr;
    fault_code = si->si_code;
    siglongjmp(env, 1);
}

/* Reads (or writes) p[off]: the byte, or "SIGBUS at +OFF". */
static void touch(const char *what, volatile char *p, size_t off, int store) {
    if (sigsetjmp(env, 1) == 0) {
        if (store)
            p[off] = 'S';
        char c = p[off];
        printf("%s: %d\n", what, c);
    } else {
        printf("%s: SIGBUS at +%ld (BUS_ADRERR %d)\n", what, (long)(fault_addr - p),
               fault_code == BUS_ADRERR);
    }
}

static int shrunk_under_a_shared_mapping(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
    int fd = fresh(4 * PAGE, 'e');
    volatile char *s = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    volatile char *r = mmap(NULL, 4 * PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (fd < 0 || s == MAP_FAILED || r == MAP_FAILED)
        return perror("mmap"), 1;
    printf("before: %c %c\n", s[3 * PAGE], r[3 * PAGE]);
    if (ftruncate(fd, PAGE + 10) != 0)
        return perror("ftruncate"), 1;
    touch("inside", s, 5, 0);
    touch("partial page past the end", s, PAGE + 100, 0);
    touch("load past the end", s, 2 * PAGE + 8, 0);
    touch("store past the end", s, 3 * PAGE + 16, 1);
    touch("read-only mapping past the end", r, 3 * PAGE, 0);
    /* Grown again: the pages are the file's (zero) again. */
    if (ftruncate(fd, 4 * PAGE) != 0)
        return perror("ftruncate"), 1;
    touch("after growing again", s, 3 * PAGE + 16, 0);
    munmap((void *)s, 4 * PAGE);
    munmap((void *)r, 4 * PAGE);
    close(fd);
    signal(SIGBUS, SIG_DFL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    snprintf(path, sizeof path, "%s/file_mappings.data", argv[1]);
    int failed = read_only_shared() || private_mappings() || shared_longer_than_the_file() ||
                 shrunk_under_a_shared_mapping();
    unlink(path);
    return failed;
}
