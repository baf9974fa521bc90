/* Memory protection as Linux enforces it: mprotect'd pages, PROT_NONE,
 * munmap'd memory, read-only buffers given to read(), thread-stack guard
 * pages, and a forked child's inherited rights. Prints only what is the
 * same natively and in forkvm (no addresses). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

static sigjmp_buf env;
static volatile int fixes;      /* handler made the page writable and returned */
static volatile int jump;       /* handler jumps back to env instead */
static volatile uintptr_t fault_addr;
static volatile int fault_code;
static char *volatile fix_page;  /* page the handler makes writable */

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    fault_addr = (uintptr_t)si->si_addr;
    fault_code = si->si_code;
    if (fix_page && (char *)si->si_addr >= fix_page && (char *)si->si_addr < fix_page + 4096) {
        mprotect(fix_page, 4096, PROT_READ | PROT_WRITE);
        fixes++;
        return; /* the write is retried and succeeds */
    }
    if (jump)
        siglongjmp(env, 1);
    _exit(99);
}

static const char *code_name(int c) {
    return c == SEGV_ACCERR ? "SEGV_ACCERR" : c == SEGV_MAPERR ? "SEGV_MAPERR" : "other";
}

/* Runs f(arg) expecting SIGSEGV at `want`; prints what happened. */
static void expect_fault(const char *what, void (*f)(char *), char *arg, char *want) {
    jump = 1;
    fault_addr = 0;
    if (sigsetjmp(env, 1) == 0) {
        f(arg);
        printf("%s: no fault\n", what);
    } else {
        printf("%s: SIGSEGV %s, address %s\n", what, code_name(fault_code),
               fault_addr == (uintptr_t)want ? "right" : "wrong");
    }
    jump = 0;
}

static void read_byte(char *p) { printf("read %d\n", *(volatile char *)p); }
static void write_byte(char *p) { *(volatile char *)p = 1; }
static void call_code(char *p) { ((void (*)(void))p)(); }
static void clock_into(char *p) { clock_gettime(CLOCK_MONOTONIC, (struct timespec *)p); }

#pragma GCC diagnostic ignored "-Winfinite-recursion"
static volatile int depth;
static int recurse(int n) {
    volatile char pad[200];
    pad[0] = (char)n;
    depth++;
    return recurse(n + 1) + pad[0];
}

static uintptr_t thread_low;   /* lowest usable address of the thread's stack */
static void *overflow(void *arg) {
    (void)arg;
    static char alt[64 * 1024];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
    sigaltstack(&ss, NULL);
    pthread_attr_t a;
    void *lo;
    size_t size;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_destroy(&a);
    thread_low = (uintptr_t)lo;
    jump = 1;
    if (sigsetjmp(env, 1) == 0) {
        recurse(0);
        puts("overflow: no fault");
    } else {
        /* Just below the stack (the guard), on the alternate stack. */
        int near = fault_addr < thread_low && fault_addr >= thread_low - 64 * 1024;
        printf("overflow: SIGSEGV %s, in the guard: %s, deep: %s\n", code_name(fault_code),
               near ? "yes" : "no", depth > 100 ? "yes" : "no");
    }
    jump = 0;
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    long page = sysconf(_SC_PAGESIZE);

    /* A write to a read-only page: the handler makes it writable, returns, and the write is done. */
    char *ro = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    strcpy(ro + page, "before");
    mprotect(ro + page, page, PROT_READ);
    printf("read-only page reads: %s\n", ro + page);
    fix_page = ro + page;
    *(volatile char *)(ro + page + 100) = 'X';
    fix_page = NULL;
    printf("write to read-only page: %d fix(es), SIGSEGV %s, address %s, byte now %c\n", fixes,
           code_name(fault_code), fault_addr == (uintptr_t)(ro + page + 100) ? "right" : "wrong",
           ro[page + 100]);
    /* Neighbours keep their rights. */
    ro[0] = 'a';
    ro[3 * page] = 'b';
    printf("neighbours writable: %c%c\n", ro[0], ro[3 * page]);

    /* PROT_NONE: reads and writes fault, the contents survive. */
    strcpy(ro + 2 * page, "kept across PROT_NONE");
    mprotect(ro + 2 * page, page, PROT_NONE);
    expect_fault("read of PROT_NONE", read_byte, ro + 2 * page + 7, ro + 2 * page + 7);
    expect_fault("write to PROT_NONE", write_byte, ro + 2 * page, ro + 2 * page);
    mprotect(ro + 2 * page, page, PROT_READ | PROT_WRITE);
    printf("after PROT_NONE and back: %s\n", ro + 2 * page);

    /* A mapping made PROT_NONE from the start. */
    char *none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect_fault("read of mmap(PROT_NONE)", read_byte, none + 5, none + 5);
    mprotect(none, page, PROT_READ);
    printf("made readable: %d\n", none[5]);
    expect_fault("write to read-only", write_byte, none + 9, none + 9);

    /* Unmapped memory. */
    char *gone = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(gone, 7, 3 * page);
    munmap(gone + page, page);
    expect_fault("read after munmap", read_byte, gone + page + 3, gone + page + 3);
    expect_fault("write after munmap", write_byte, gone + page, gone + page);
    printf("the rest stays: %d %d\n", gone[0], gone[2 * page]);

    /* Code: running a PROT_NONE page faults at it; read+exec runs it. */
    char *code = mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    code[0] = (char)0xc3; /* ret */
    mprotect(code, page, PROT_NONE);
    expect_fault("call into PROT_NONE", call_code, code, code);
    mprotect(code, page, PROT_READ | PROT_EXEC);
    call_code(code);
    puts("call into read+exec: returned");

    /* System calls on the program's behalf: EFAULT, no signal. */
    int fds[2];
    pipe(fds);
    write(fds[1], "abc", 3);
    mprotect(ro + page, page, PROT_READ);
    errno = 0;
    ssize_t n = read(fds[0], ro + page, 3);
    printf("read() into a read-only buffer: %zd %s\n", n, errno == EFAULT ? "EFAULT" : strerror(errno));
    mprotect(ro + 2 * page, page, PROT_NONE);
    errno = 0;
    n = write(fds[1], ro + 2 * page, 3);
    printf("write() from a PROT_NONE buffer: %zd %s\n", n, errno == EFAULT ? "EFAULT" : strerror(errno));
    close(fds[0]);
    close(fds[1]);
    errno = 0;
    n = getrandom(ro + page, 16, 0);
    printf("getrandom() into a read-only buffer: %zd %s\n", n, errno == EFAULT ? "EFAULT" : strerror(errno));
    /* The vDSO's clock_gettime is the program's own code: a fault, not EFAULT. */
    expect_fault("clock_gettime into read-only", clock_into, ro + page, ro + page);

    /* A forked child has its parent's rights. */
    pid_t pid = fork();
    if (pid == 0) {
        expect_fault("child: write to read-only", write_byte, ro + page, ro + page);
        expect_fault("child: read of PROT_NONE", read_byte, ro + 2 * page, ro + 2 * page);
        mprotect(ro + 2 * page, page, PROT_READ);
        printf("child: made readable: %s\n", ro + 2 * page);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    expect_fault("parent: still PROT_NONE", read_byte, ro + 2 * page, ro + 2 * page);

    /* mprotect of memory never mapped, or of a range with a hole, is ENOMEM;
     * the hole stays unmapped. */
    int r = mprotect(NULL, page + 1, PROT_READ);
    printf("mprotect(NULL): %d %s\n", r, r ? strerror(errno) : "-");
    char *three = mmap(NULL, 3 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(three + page, page);
    r = mprotect(three, 3 * page, PROT_READ | PROT_WRITE);
    printf("mprotect over a hole: %d %s\n", r, r ? strerror(errno) : "-");
    r = mprotect(three + page, page, PROT_READ);
    printf("mprotect of the hole: %d %s\n", r, r ? strerror(errno) : "-");
    expect_fault("read in the hole", read_byte, three + page, three + page);
    printf("mprotect of nothing at NULL: %d\n", mprotect(NULL, 0, PROT_READ));

    /* A thread overflowing its stack hits the guard page: SIGSEGV on the alternate stack. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    pthread_t t;
    pthread_create(&t, &attr, overflow, NULL);
    pthread_join(t, NULL);
    puts("done");
    return 0;
}
