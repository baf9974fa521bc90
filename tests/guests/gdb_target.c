/* A program for the gdb tests (crates/forkvm-cli/tests/gdb.rs), built there
 * with -O0 -g: a few frames to walk, a global to write, a fault and a second
 * thread on demand. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

__attribute__((noinline)) void worker_marker(int id) {
    counter += id;
}

static void *worker(void *arg) {
    worker_marker((int)(long)arg);
    return NULL;
}

/* getppid(2) by hand, with a label on the syscall instruction for gdb. */
__attribute__((noinline)) long raw_getppid(void) {
    long r;
    __asm__ volatile(".globl syscall_insn\nsyscall_insn:\n\tsyscall"
                     : "=a"(r)
                     : "a"(110L)
                     : "rcx", "r11", "memory");
    return r;
}

volatile unsigned long spins;

__attribute__((noinline)) void spin_forever(void) {
    for (;;) {
        spins++;
    }
}

int main(int argc, char **argv) {
    int r = twice_plus_one(counter);
    printf("result=%d counter=%d\n", r, counter);
    if (argc > 1 && strcmp(argv[1], "crash") == 0) {
        crash();
    }
    if (argc > 1 && strcmp(argv[1], "syscall") == 0) {
        printf("ppid=%ld\n", raw_getppid());
    }
    if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
        printf("usleep=%d\n", usleep(200000));
    }
    if (argc > 1 && strcmp(argv[1], "naps") == 0) {
        fflush(stdout);
        for (;;) {
            usleep(2000);
        }
    }
    if (argc > 1 && strcmp(argv[1], "abort") == 0) {
        fflush(stdout);
        abort();
    }
    if (argc > 1 && strcmp(argv[1], "spin") == 0) {
        fflush(stdout);
        spin_forever();
    }
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, worker, (void *)7);
        pthread_join(t, NULL);
        printf("joined counter=%d\n", counter);
    }
    return 0;
}
