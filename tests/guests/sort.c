/* qsort of 1M pseudo-random ints from a fixed LCG seed; prints a checksum. */
#include "common.h"

#include <stdlib.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    enum { N = 1000000 };
    int *a = malloc(N * sizeof *a);
    if (!a)
        return 1;
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (int)(s >> 33);
    }
    qsort(a, N, sizeof *a, cmp_int);
    uint64_t sum = 0;
    int sorted = 1;
    for (int i = 0; i < N; i++) {
        sum = sum * 31 + (uint64_t)(unsigned)a[i];
        if (i > 0 && a[i - 1] > a[i])
            sorted = 0;
    }
    printf("n=%d sorted=%s min=%d max=%d median=%d checksum=%016llx\n", N, sorted ? "yes" : "no",
           a[0], a[N - 1], a[N / 2], (unsigned long long)sum);
    free(a);
    return 0;
}
