/* /proc/self/maps as programs parse it (sanitizers, pmap, stack finders):
 * each mapping's rights with x and p/s, and the file, offset, device and
 * inode it maps; [stack] and [vdso]. Printed without addresses, so that the
 * native run and forkvm's compare. forkvm showed no x, no s, no file and
 * offset 0 for every mapping. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

struct line {
    unsigned long lo, hi, off, ino;
    unsigned maj, min;
    char perms[8];
    char name[512];
};

static int find(unsigned long addr, struct line *out) {
    FILE *f = fopen("/proc/self/maps", "r");
    char buf[1024];
    int found = 0;
    while (f && fgets(buf, sizeof buf, f)) {
        struct line l = {0};
        int n = sscanf(buf, "%lx-%lx %7s %lx %x:%x %lu %511[^\n]", &l.lo, &l.hi, l.perms, &l.off,
                       &l.maj, &l.min, &l.ino, l.name);
        if (n < 7) continue;
        if (addr >= l.lo && addr < l.hi) {
            *out = l;
            found = 1;
            break;
        }
    }
    if (f) fclose(f);
    return found;
}

static int has_name(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    char buf[1024];
    int found = 0;
    while (f && fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = 0;
        size_t n = strlen(buf), k = strlen(name);
        if (n >= k && !strcmp(buf + n - k, name)) found = 1;
    }
    if (f) fclose(f);
    return found;
}

static const char *self;
static struct stat self_st;

/* What maps says of `addr`; `file`: whether it should map this program. */
static void show(const char *what, const void *addr, int file) {
    struct line l;
    if (!find((unsigned long)addr, &l)) {
        printf("%-14s none\n", what);
        return;
    }
    if (file) {
        printf("%-14s %s off=%lx name=%s ino=%s dev=%s\n", what, l.perms, l.off,
               strcmp(l.name, self) ? l.name : "self", l.ino == self_st.st_ino ? "same" : "differs",
               makedev(l.maj, l.min) == self_st.st_dev ? "same" : "differs");
    } else {
        printf("%-14s %s off=%lx name=%s ino=%lu\n", what, l.perms, l.off, l.name[0] ? l.name : "-",
               l.ino);
    }
}

int initialised = 42;

int main(void) {
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0 || stat(path, &self_st)) {
        perror("self");
        return 1;
    }
    path[n] = 0;
    self = path;
    long page = sysconf(_SC_PAGESIZE);

    show("text", (const void *)main, 1);
    show("data", &initialised, 1);

    int fd = open(self, O_RDONLY);
    char *m = mmap(0, 3 * page, PROT_READ, MAP_PRIVATE, fd, page);
    if (m == MAP_FAILED) return 2;
    show("file", m, 1);
    show("file+2", m + 2 * page, 1);
    if (mprotect(m + page, page, PROT_READ | PROT_EXEC)) return 3;
    show("file+1 exec", m + page, 1);
    show("file still", m, 1);
    /* (The hole is not looked at: the allocator may map there at once.) */
    munmap(m + page, page);
    show("file+2 kept", m + 2 * page, 1);

    char *s = mmap(0, page, PROT_READ, MAP_SHARED, fd, 0);
    show("file shared", s, 1);
    char *g = mmap(0, page, PROT_READ, MAP_PRIVATE, fd, 0);
    char *g2 = mremap(g, page, 2 * page, MREMAP_MAYMOVE);
    if (g2 == MAP_FAILED) return 4;
    show("remapped+1", g2 + page, 1);

    char *a = mmap(0, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    a[0] = 1;
    show("anon", a, 0);
    char *x = mmap(0, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    show("anon exec", x, 0);
    char *sh = mmap(0, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct line l;
    printf("%-14s %s\n", "anon shared", find((unsigned long)sh, &l) ? l.perms : "none");

    int local = 0;
    show("stack", &local, 0);
    printf("vdso %d\n", has_name("[vdso]"));
    return 0;
}
