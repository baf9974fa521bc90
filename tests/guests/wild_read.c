/* Reads memory the program never mapped, far from everything it did map:
 * Linux kills it with SIGSEGV, and so must forkvm (no memory slot there).
 * With "catch", a SIGSEGV handler recovers with siglongjmp. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static sigjmp_buf recover;

static void on_segv(int sig) {
    (void)sig;
    siglongjmp(recover, 1);
}

int main(int argc, char **argv) {
    volatile int *p = (volatile int *)(96UL << 20);
    if (argc > 1 && strcmp(argv[1], "catch") == 0) {
        signal(SIGSEGV, on_segv);
        if (sigsetjmp(recover, 1)) {
            printf("caught SIGSEGV, still running\n");
            return 0;
        }
    }
    printf("reading %p\n", (void *)p);
    fflush(stdout);
    printf("read %d\n", *p);
    return 0;
}
