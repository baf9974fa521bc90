/* A crash three calls deep in code built without frame pointers
 * (-O2 -fomit-frame-pointer, by crates/forkvm-cli/tests/gdb.rs): only the
 * DWARF call-frame information can walk it. Each function does work after
 * its call so that none becomes a tail call. */
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) int innermost(int x) {
    volatile int *p = (volatile int *)(long)(x & 16);
    *p = x; /* the faulting line */
    return x + sink;
}

__attribute__((noinline)) int middle(int x) {
    int r = innermost(x * 2);
    sink += r;
    return r + 3;
}

__attribute__((noinline)) int outer(int x) {
    int r = middle(x + 1);
    sink += r;
    return r * 5;
}

int main(int argc, char **argv) {
    (void)argv;
    int r = outer(argc + 6);
    printf("%d\n", r);
    return 0;
}
