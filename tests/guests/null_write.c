/* Writes through a NULL pointer: natively killed by SIGSEGV (status 139). */
#include <stdint.h>
#include <stdio.h>

/* Loaded at run time so the compiler cannot turn the store into a trap instruction. */
static volatile uintptr_t target = 0;

int main(void)
{
    printf("about to write through NULL\n");
    fflush(stdout);
    *(volatile int *)target = 42;
    printf("still alive?!\n");
    return 0;
}
