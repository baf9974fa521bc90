/* Allocates and touches 1 MiB blocks until malloc fails, then reports and exits 0.
 * Capped at 2 GiB so that a missing limit cannot take down the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const size_t block = 1 << 20;
    const int cap = 2048;
    int n = 0;
    for (; n < cap; n++) {
        char *p = malloc(block);
        if (!p)
            break;
        memset(p, n & 0xff, block);
    }
    if (n == cap) {
        printf("no ENOMEM after %d MiB (cap reached)\n", n);
        return 1;
    }
    printf("got ENOMEM after %d MiB\n", n);
    return 0;
}
