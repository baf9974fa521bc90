/* A guest for the machine lifecycle tests: initialise, say ready, then
 * serve calls. plant_secret() hides a value in every kind of state a
 * request could leave behind; find_secret() reports where it still is. */
#define _GNU_SOURCE
#include "forkvm.h"
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long counter;
static long global_secret;
static long *heap;
static long *mapping;
static void *initial_brk;
volatile unsigned char pages[256 * 4096] __attribute__((aligned(4096)));

enum {
    IN_HEAP = 1 << 0, IN_GLOBAL = 1 << 1, IN_STACK = 1 << 2, IN_MMAP = 1 << 3,
    IN_FD = 1 << 4, IN_FPU = 1 << 5, IN_SIGNAL = 1 << 6, IN_BRK = 1 << 7,
};

FORKVM_EXPORT long noop(void) { return 0; }
FORKVM_EXPORT long add(long a, long b) { return a + b; }
FORKVM_EXPORT long bump(void) { return ++counter; }
FORKVM_EXPORT long length(const char *s) { return (long)strlen(s); }
FORKVM_EXPORT long sum_bytes(const unsigned char *p, long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) s += p[i];
    return s;
}

/* Writes one byte in each of the first n pages of a 1 MiB buffer. */
FORKVM_EXPORT long write_pages(long n)
{
    if (n > 256) n = 256;
    for (long i = 0; i < n; i++) pages[i * 4096] = (unsigned char)(i + 1);
    return n;
}

/* Sum of the first byte of each page (what write_pages left). */
FORKVM_EXPORT long page_marks(void)
{
    long s = 0;
    for (long i = 0; i < 256; i++) s += pages[i * 4096];
    return s;
}

/* getpid(2), answered inside the VM by the fast-path dispatcher. */
FORKVM_EXPORT long fast_getpid(void) { return (long)getpid(); }

/* Writes garbage over the fast-path data page (the program may: it is its own
 * memory) and returns what getpid answers then. */
FORKVM_EXPORT long scribble_fast_page(void)
{
    volatile unsigned long *page = (volatile unsigned long *)0xa000;
    for (int i = 0; i < 16; i++) page[i] = 0x5c5c5c5c5c5c5c5cUL + (unsigned long)i;
    return (long)getpid();
}

/* A word of the exitless call map in the same page (host-written; a reset
 * puts it back). */
FORKVM_EXPORT long call_map_word(void)
{
    return (long)((volatile unsigned long *)0xa000)[0x280 / 8];
}

/* Tampers with the exitless call slot (every call posted, a stale answer, a
 * tiny spin budget), then writes a byte to /dev/null: returns that write's
 * answer, 1 when the program's own calls are still answered right. */
FORKVM_EXPORT long scribble_call_slot(void)
{
    volatile unsigned long *slot = (volatile unsigned long *)0xa000;
    for (int i = 0; i < 8; i++) slot[0x280 / 8 + i] = ~0UL;
    slot[0x248 / 8] = 1;
    slot[0x240 / 8] = 12345;
    slot[0x200 / 8] = 2;
    int fd = open("/dev/null", O_WRONLY);
    long n = write(fd, "x", 1);
    close(fd);
    return n;
}

/* Returns a pointer to a string in guest memory for the host to read. */
FORKVM_EXPORT const char *greeting(void) { return "hello from the guest"; }

static void on_usr1(int sig) { (void)sig; }

static __attribute__((noinline)) void stack_plant(long secret)
{
    volatile long area[512];
    for (int i = 0; i < 512; i++) area[i] = secret;
}

static __attribute__((noinline)) int stack_find(long secret)
{
    /* Look at the stack below our frame, where stack_plant's frame was. */
    volatile long *sp = (volatile long *)__builtin_frame_address(0);
    for (int i = 64; i < 4096; i++)
        if (sp[-i] == secret) return 1;
    return 0;
}

FORKVM_EXPORT long plant_secret(long secret)
{
    heap[0] = secret;
    global_secret = secret;
    mapping[0] = secret;
    stack_plant(secret);
    if (dup2(1, 100) != 100) return -1;
    __asm__ volatile("movq %0, %%xmm7" : : "r"(secret) : "xmm7");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    if (sigaction(SIGUSR1, &sa, NULL) != 0) return -2;
    if (sbrk(8192) == (void *)-1) return -3;
    return 0;
}

FORKVM_EXPORT long find_secret(long secret)
{
    long found = 0;
    long x;
    __asm__ volatile("movq %%xmm7, %0" : "=r"(x));
    if (x == secret) found |= IN_FPU;
    if (heap[0] == secret) found |= IN_HEAP;
    if (global_secret == secret) found |= IN_GLOBAL;
    if (mapping[0] == secret) found |= IN_MMAP;
    if (stack_find(secret)) found |= IN_STACK;
    if (fcntl(100, F_GETFD) != -1) found |= IN_FD;
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler != SIG_DFL) found |= IN_SIGNAL;
    if (sbrk(0) != initial_brk) found |= IN_BRK;
    return found;
}

FORKVM_EXPORT long crash(void)
{
    *(volatile int *)0 = 1;
    return 0;
}

FORKVM_EXPORT long spin(void)
{
    for (;;) __asm__ volatile("");
    return 0;
}

FORKVM_EXPORT long leave(long status) { _exit((int)status); }

/* Two pages: the first made read-only by main before it is ready, the
 * second read-write, which calls may protect. */
static char *rights_pages;
FORKVM_EXPORT long write_read_only_page(void) { rights_pages[0] = 1; return 1; }
FORKVM_EXPORT long write_guarded(void) { rights_pages[4096] = 1; return 1; }
FORKVM_EXPORT long read_guarded(void) { return *(volatile char *)(rights_pages + 4096) + 1; }
FORKVM_EXPORT long protect_guarded(long prot)
{
    return mprotect(rights_pages + 4096, 4096, (int)prot);
}

int main(void)
{
    heap = malloc(64);
    mapping = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    rights_pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!heap || mapping == MAP_FAILED || rights_pages == MAP_FAILED) return 1;
    if (mprotect(rights_pages, 4096, PROT_READ)) return 1;
    heap[0] = 0;
    mapping[0] = 0;
    initial_brk = sbrk(0);
    forkvm_ready();
    return 0;
}

/* CLOCK_MONOTONIC in ns (through the vDSO when there is one). */
FORKVM_EXPORT long monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
