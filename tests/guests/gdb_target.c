/* A program for the gdb tests (crates/forkvm-cli/tests/gdb.rs), built there
 * with -O0 -g: a few frames to walk, a global to write, and a fault on demand. */
#include <stdio.h>
#include <string.h>

int counter = 41;
const char *greeting = "hello from the guest";

__attribute__((noinline)) int add(int a, int b) {
    int sum = a + b;
    return sum;
}

__attribute__((noinline)) int twice_plus_one(int x) {
    return add(x, x) + 1;
}

__attribute__((noinline)) void crash(void) {
    volatile int *p = (volatile int *)16;
    *p = 1; /* the faulting line */
}

int main(int argc, char **argv) {
    int r = twice_plus_one(counter);
    printf("result=%d counter=%d\n", r, counter);
    if (argc > 1 && strcmp(argv[1], "crash") == 0) {
        crash();
    }
    return 0;
}
