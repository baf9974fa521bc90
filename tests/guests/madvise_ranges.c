/* madvise over a range made of several mappings, as allocators do: jemalloc
 * (rustc's malloc) merges adjacent mmaps into one extent, purges it with
 * MADV_DONTNEED and later hands it out as calloc memory it knows is zero.
 * Every mapped page of the range is dropped, and a hole in the range is
 * ENOMEM (after the mapped parts are dropped), as on Linux. Prints only
 * what is the same natively and in forkvm (no addresses). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long pg;

/* "zero", "file", "kept" or "mixed": what the page at p holds. */
static const char *what(const unsigned char *p, unsigned char fill) {
    int zero = 1, kept = 1;
    for (long i = 0; i < pg; i++) {
        if (p[i] != 0) zero = 0;
        if (p[i] != fill) kept = 0;
    }
    return zero ? "zero" : kept ? "kept" : "mixed";
}

static void result(const char *name, int rc) {
    printf("%s: %s\n", name, rc == 0 ? "0" : errno == ENOMEM ? "ENOMEM" : errno == EINVAL ? "EINVAL" : "other");
}

static char *anon(char *at, long pages, int prot) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0);
    char *p = mmap(at, pages * pg, prot, flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char **argv) {
    if (argc > 1 && chdir(argv[1]) != 0) return 1; /* a scratch directory for its file */
    pg = sysconf(_SC_PAGESIZE);
    const int RW = PROT_READ | PROT_WRITE;

    /* Two mappings side by side (the upper half mapped over the first):
     * one MADV_DONTNEED across both. */
    char *a = anon(NULL, 8, RW);
    if (!a || !anon(a + 4 * pg, 4, RW)) return 1;
    memset(a, 0x5a, 8 * pg);
    result("dontneed across two mappings", madvise(a, 8 * pg, MADV_DONTNEED));
    printf("  first half %s, second half %s, last page %s\n", what((unsigned char *)a, 0x5a),
           what((unsigned char *)a + 4 * pg, 0x5a), what((unsigned char *)a + 7 * pg, 0x5a));

    /* Three mappings, the middle one read-only, from one page inside the first. */
    char *b = anon(NULL, 6, RW);
    if (!b) return 1;
    memset(b, 0x33, 6 * pg);
    if (mprotect(b + 2 * pg, 2 * pg, PROT_READ) != 0) return 1;
    result("dontneed across three mappings", madvise(b + pg, 4 * pg, MADV_DONTNEED));
    for (int i = 0; i < 6; i++) printf("  page %d %s\n", i, what((unsigned char *)b + i * pg, 0x33));

    /* An anonymous mapping next to a private file mapping: the file's pages
     * are the file's again, the anonymous ones zero. */
    int fd = open("madvise_ranges.dat", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 1;
    char fbuf[8192];
    memset(fbuf, 0x77, sizeof fbuf);
    if (write(fd, fbuf, 2 * pg) != 2 * pg) return 1;
    char *c = anon(NULL, 4, RW);
    if (!c || mmap(c + 2 * pg, 2 * pg, RW, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) return 1;
    memset(c, 0x11, 4 * pg);
    result("dontneed across anonymous and file", madvise(c, 4 * pg, MADV_DONTNEED));
    printf("  anonymous %s, file %s\n", what((unsigned char *)c, 0x11),
           what((unsigned char *)c + 2 * pg, 0x77));
    close(fd);
    unlink("madvise_ranges.dat");

    /* A hole in the middle: ENOMEM, and the mapped pages around it are dropped. */
    char *d = anon(NULL, 3, RW);
    if (!d) return 1;
    memset(d, 0x44, 3 * pg);
    if (munmap(d + pg, pg) != 0) return 1;
    result("dontneed over a hole", madvise(d, 3 * pg, MADV_DONTNEED));
    printf("  before %s, after %s\n", what((unsigned char *)d, 0x44), what((unsigned char *)d + 2 * pg, 0x44));
    result("dontneed of the hole alone", madvise(d + pg, pg, MADV_DONTNEED));
    result("willneed over the hole", madvise(d, 3 * pg, MADV_WILLNEED));
    result("willneed across two mappings", madvise(a, 8 * pg, MADV_WILLNEED));

    /* Argument checks. */
    result("length zero", madvise(a, 0, MADV_DONTNEED));
    result("unaligned", madvise(a + 1, pg, MADV_DONTNEED));
    result("length wraps", madvise(a, (size_t)-1, MADV_DONTNEED));
    return 0;
}
