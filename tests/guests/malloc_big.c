/* Allocates 100 MB, fills it, checksums it, frees it. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    size_t size = 100u * 1000u * 1000u;
    unsigned char *p = malloc(size);
    if (!p) {
        printf("malloc failed\n");
        return 1;
    }
    memset(p, 0xa5, size);
    for (size_t i = 0; i < size; i += 4093)
        p[i] = (unsigned char)(i * 31u);
    uint64_t h = fnv1a(FNV1A_INIT, p, size);
    free(p);
    printf("checksum=%016llx\n", (unsigned long long)h);
    printf("ok\n");
    return 0;
}
