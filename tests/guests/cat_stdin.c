/* Reads stdin to EOF; echoes the first line and prints the byte count and checksum. */
#include "common.h"

#include <unistd.h>

int main(void)
{
    static char buf[4096];
    uint64_t h = FNV1A_INIT;
    long long total = 0;
    int echoed = 0;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0) {
            printf("read failed: ");
            print_errno(stdout, errno);
            printf("\n");
            return 1;
        }
        if (n == 0)
            break;
        if (!echoed) {
            ssize_t i = 0;
            while (i < n && buf[i] != '\n')
                i++;
            printf("first line: %.*s\n", (int)i, buf);
            echoed = 1;
        }
        h = fnv1a(h, buf, (size_t)n);
        total += n;
    }
    printf("stdin bytes=%lld fnv1a=%016llx\n", total, (unsigned long long)h);
    return 0;
}
