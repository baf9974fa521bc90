/* Reads memory the program never mapped, far from everything it did map:
 * Linux kills it with SIGSEGV, and so must forkvm (no memory slot there). */
#include <stdio.h>

int main(void) {
    volatile int *p = (volatile int *)(96UL << 20);
    printf("reading %p\n", (void *)p);
    fflush(stdout);
    printf("read %d\n", *p);
    return 0;
}
