/* Reads the file argv[1] two ways (read(2) and stdio), prints its size and checksum,
 * then lists the file's directory (sorted) with each entry's type. */
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char type_char(unsigned char t)
{
    switch (t) {
    case DT_REG: return 'f';
    case DT_DIR: return 'd';
    case DT_LNK: return 'l';
    case DT_UNKNOWN: return '?';
    default: return 'o';
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: read_file FILE\n");
        return 2;
    }
    const char *path = argv[1];

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        printf("open %s: ", path);
        print_errno(stdout, errno);
        printf("\n");
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        printf("fstat failed\n");
        return 1;
    }
    printf("fstat size=%lld regular=%s\n", (long long)st.st_size, S_ISREG(st.st_mode) ? "yes" : "no");

    static char buf[65536];
    uint64_t h = FNV1A_INIT;
    long long total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            printf("read failed\n");
            return 1;
        }
        if (n == 0)
            break;
        h = fnv1a(h, buf, (size_t)n);
        total += n;
    }
    printf("read size=%lld fnv1a=%016llx\n", total, (unsigned long long)h);

    off_t end = lseek(fd, 0, SEEK_END);
    printf("lseek end=%lld\n", (long long)end);
    if (st.st_size > 10) {
        char tail[10];
        ssize_t n = pread(fd, tail, sizeof tail, st.st_size - 10);
        printf("pread tail n=%zd fnv1a=%016llx\n", n,
               (unsigned long long)fnv1a(FNV1A_INIT, tail, n > 0 ? (size_t)n : 0));
    }
    close(fd);

    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("fopen failed\n");
        return 1;
    }
    uint64_t h2 = FNV1A_INIT;
    long long total2 = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        unsigned char ch = (unsigned char)c;
        h2 = fnv1a(h2, &ch, 1);
        total2++;
    }
    fclose(f);
    printf("stdio size=%lld fnv1a=%016llx\n", total2, (unsigned long long)h2);

    /* The directory part of path ("." when there is none). */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;

    DIR *d = opendir(dir);
    if (!d) {
        printf("opendir failed: ");
        print_errno(stdout, errno);
        printf("\n");
        return 1;
    }
    char *names[1024];
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < 1024) {
        size_t len = strlen(e->d_name);
        char *s = malloc(len + 3);
        if (!s)
            return 1;
        memcpy(s, e->d_name, len);
        s[len] = ' ';
        s[len + 1] = type_char(e->d_type);
        s[len + 2] = 0;
        names[count++] = s;
    }
    closedir(d);
    qsort(names, (size_t)count, sizeof names[0], cmp_str);
    printf("dir entries=%d\n", count);
    for (int i = 0; i < count; i++) {
        printf("  %s\n", names[i]);
        free(names[i]);
    }
    return 0;
}
