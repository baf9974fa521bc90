/* stack_overflow: recurses until the stack runs out. Natively the kernel's guard gap below
 * the stack turns that into SIGSEGV (status 139); forkvm must do the same rather than let
 * the stack grow into the program's mmap'd memory.
 *
 * Before recursing it fills every mmap'd page it can find cheaply (a fresh 4 MiB mapping,
 * which lands just below the stack on both Linux and forkvm) with a pattern; a SIGSEGV
 * handler on an alternate stack checks the pattern, prints whether it is intact, and
 * dies of SIGSEGV with the default action. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define AREA (4u << 20)

static unsigned char *area;
static char altstack[64 * 1024];

static void on_segv(int sig)
{
    size_t bad = 0;
    for (size_t i = 0; i < AREA; i++)
        bad += area[i] != 0xa5;
    const char *msg = bad ? "mapped memory clobbered\n" : "mapped memory intact\n";
    (void)!write(1, msg, strlen(msg));
    signal(sig, SIG_DFL);
    raise(sig);
}

static unsigned long deep(unsigned long n)
{
    volatile char frame[512];
    frame[0] = (char)n;
    frame[511] = (char)(n >> 8);
    return deep(n + 1) + frame[0] + frame[511];
}

int main(int argc, char **argv)
{
    (void)argv;
    area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return 2;
    memset(area, 0xa5, AREA);
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_ONSTACK;
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0) return 3;
    puts("recursing");
    fflush(stdout);
    return (int)deep((unsigned long)argc);
}
