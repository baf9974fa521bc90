// Vector (SSE/AVX) and floating-point control state must belong to the thread that set it:
// across preemption (threads spinning with live values in xmm/ymm registers and no syscall
// between), across blocking switches, and across signal handlers (the frame carries the state,
// the handler starts with the default MXCSR, and what the handler leaves in the frame is what
// the interrupted code gets back). Prints a deterministic report, compared with a native run.
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#define THREADS 3
#define ROUNDS 6
#define SPIN 20000000UL

static int have_avx;

// One round: load 16 xmm (or ymm) registers, MXCSR and the x87 control word, spin without
// touching memory or making a syscall, then store them all back.
static void round_sse(const uint8_t in[256], uint8_t out[256], uint32_t mxcsr_in,
                      uint32_t *mxcsr_out, uint16_t fcw_in, uint16_t *fcw_out) {
    __asm__ volatile(
        "ldmxcsr %[mi]\n\t"
        "fldcw %[fi]\n\t"
        "movdqu 0(%[in]), %%xmm0\n\t"    "movdqu 16(%[in]), %%xmm1\n\t"
        "movdqu 32(%[in]), %%xmm2\n\t"   "movdqu 48(%[in]), %%xmm3\n\t"
        "movdqu 64(%[in]), %%xmm4\n\t"   "movdqu 80(%[in]), %%xmm5\n\t"
        "movdqu 96(%[in]), %%xmm6\n\t"   "movdqu 112(%[in]), %%xmm7\n\t"
        "movdqu 128(%[in]), %%xmm8\n\t"  "movdqu 144(%[in]), %%xmm9\n\t"
        "movdqu 160(%[in]), %%xmm10\n\t" "movdqu 176(%[in]), %%xmm11\n\t"
        "movdqu 192(%[in]), %%xmm12\n\t" "movdqu 208(%[in]), %%xmm13\n\t"
        "movdqu 224(%[in]), %%xmm14\n\t" "movdqu 240(%[in]), %%xmm15\n\t"
        "mov %[n], %%rcx\n"
        "1: dec %%rcx\n\t"
        "jnz 1b\n\t"
        "movdqu %%xmm0, 0(%[out])\n\t"    "movdqu %%xmm1, 16(%[out])\n\t"
        "movdqu %%xmm2, 32(%[out])\n\t"   "movdqu %%xmm3, 48(%[out])\n\t"
        "movdqu %%xmm4, 64(%[out])\n\t"   "movdqu %%xmm5, 80(%[out])\n\t"
        "movdqu %%xmm6, 96(%[out])\n\t"   "movdqu %%xmm7, 112(%[out])\n\t"
        "movdqu %%xmm8, 128(%[out])\n\t"  "movdqu %%xmm9, 144(%[out])\n\t"
        "movdqu %%xmm10, 160(%[out])\n\t" "movdqu %%xmm11, 176(%[out])\n\t"
        "movdqu %%xmm12, 192(%[out])\n\t" "movdqu %%xmm13, 208(%[out])\n\t"
        "movdqu %%xmm14, 224(%[out])\n\t" "movdqu %%xmm15, 240(%[out])\n\t"
        "stmxcsr %[mo]\n\t"
        "fnstcw %[fo]\n\t"
        "ldmxcsr %[dm]\n\t"
        "fldcw %[df]\n\t"
        : [mo] "=m"(*mxcsr_out), [fo] "=m"(*fcw_out)
        : [in] "r"(in), [out] "r"(out), [mi] "m"(mxcsr_in), [fi] "m"(fcw_in), [n] "r"(SPIN),
          [dm] "m"((uint32_t){0x1f80}), [df] "m"((uint16_t){0x37f})
        : "rcx", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
}

// The same with the full 256-bit ymm registers.
__attribute__((target("avx"))) static void round_avx(const uint8_t in[512], uint8_t out[512]) {
    __asm__ volatile(
        "vmovdqu 0(%[in]), %%ymm0\n\t"    "vmovdqu 32(%[in]), %%ymm1\n\t"
        "vmovdqu 64(%[in]), %%ymm2\n\t"   "vmovdqu 96(%[in]), %%ymm3\n\t"
        "vmovdqu 128(%[in]), %%ymm4\n\t"  "vmovdqu 160(%[in]), %%ymm5\n\t"
        "vmovdqu 192(%[in]), %%ymm6\n\t"  "vmovdqu 224(%[in]), %%ymm7\n\t"
        "vmovdqu 256(%[in]), %%ymm8\n\t"  "vmovdqu 288(%[in]), %%ymm9\n\t"
        "vmovdqu 320(%[in]), %%ymm10\n\t" "vmovdqu 352(%[in]), %%ymm11\n\t"
        "vmovdqu 384(%[in]), %%ymm12\n\t" "vmovdqu 416(%[in]), %%ymm13\n\t"
        "vmovdqu 448(%[in]), %%ymm14\n\t" "vmovdqu 480(%[in]), %%ymm15\n\t"
        "mov %[n], %%rcx\n"
        "1: dec %%rcx\n\t"
        "jnz 1b\n\t"
        "vmovdqu %%ymm0, 0(%[out])\n\t"    "vmovdqu %%ymm1, 32(%[out])\n\t"
        "vmovdqu %%ymm2, 64(%[out])\n\t"   "vmovdqu %%ymm3, 96(%[out])\n\t"
        "vmovdqu %%ymm4, 128(%[out])\n\t"  "vmovdqu %%ymm5, 160(%[out])\n\t"
        "vmovdqu %%ymm6, 192(%[out])\n\t"  "vmovdqu %%ymm7, 224(%[out])\n\t"
        "vmovdqu %%ymm8, 256(%[out])\n\t"  "vmovdqu %%ymm9, 288(%[out])\n\t"
        "vmovdqu %%ymm10, 320(%[out])\n\t" "vmovdqu %%ymm11, 352(%[out])\n\t"
        "vmovdqu %%ymm12, 384(%[out])\n\t" "vmovdqu %%ymm13, 416(%[out])\n\t"
        "vmovdqu %%ymm14, 448(%[out])\n\t" "vmovdqu %%ymm15, 480(%[out])\n\t"
        "vzeroupper\n\t"
        :
        : [in] "r"(in), [out] "r"(out), [n] "r"(SPIN)
        : "rcx", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
}

static void pattern(uint8_t *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(seed * 37 + i * 11 + (i >> 3));
}

struct result { int sse_ok, ctl_ok, avx_ok; double sum; };

static void *spinner(void *arg) {
    struct result *r = arg;
    unsigned seed = (unsigned)r->sum; // the caller passes the seed in sum
    r->sum = 0;
    uint8_t in[512], out[512];
    for (int round = 0; round < ROUNDS; round++) {
        pattern(in, sizeof in, seed * 100 + round);
        // Rounding control differs per thread (bits 13-14 of MXCSR, 10-11 of the x87 CW).
        uint32_t mxcsr = 0x1f80 | ((seed & 3) << 13), mxcsr_out = 0;
        uint16_t fcw = (uint16_t)(0x37f | ((seed & 3) << 10)), fcw_out = 0;
        memset(out, 0, sizeof out);
        round_sse(in, out, mxcsr, &mxcsr_out, fcw, &fcw_out);
        r->sse_ok += memcmp(in, out, 256) == 0;
        r->ctl_ok += mxcsr_out == mxcsr && fcw_out == fcw;
        if (have_avx) {
            memset(out, 0, sizeof out);
            round_avx(in, out);
            r->avx_ok += memcmp(in, out, 512) == 0;
        }
        // A floating-point sum kept in registers by the compiler, checked against the exact value.
        double s = 0;
        for (int i = 1; i <= 2000000; i++) s += 0.5;
        r->sum += s;
    }
    return NULL;
}

// ---- signals ----
static volatile int handler_mxcsr_default = 1, handler_has_fpstate = 1, handler_runs;

static void clobber_all(void) {
    __asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n\t"
                     "movdqa %%xmm0, %%xmm14\n\t"
                     "movdqa %%xmm0, %%xmm15\n\t"
                     "ldmxcsr %[m]\n\t"
                     :
                     : [m] "m"((uint32_t){0x7f80})
                     : "xmm0", "xmm14", "xmm15");
}

static void on_signal(int sig, siginfo_t *si, void *ucv) {
    (void)si;
    ucontext_t *uc = ucv;
    uint32_t m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    if (m != 0x1f80) handler_mxcsr_default = 0;
    if (uc->uc_mcontext.fpregs == NULL) {
        handler_has_fpstate = 0;
    } else if (sig == SIGUSR2) {
        // A hostile handler: garbage over the whole saved state, header included. The kernel
        // (and forkvm) must sanitise it, not fail or load reserved bits.
        memset(uc->uc_mcontext.fpregs, 0xff, 512 + 64);
    } else if (sig == SIGUSR1) {
        // What the handler writes into the frame is what the interrupted code gets back.
        uint32_t *x15 = uc->uc_mcontext.fpregs->_xmm[15].element;
        for (int i = 0; i < 4; i++) x15[i] = 0x600dcafe + (uint32_t)i;
    }
    clobber_all();
    handler_runs++;
}

// Loads xmm14/xmm15 and MXCSR, sends itself SIGUSR1 with a raw syscall (no compiler code in
// between), and stores them back.
static void signal_round(uint8_t in[32], uint8_t out[32], uint32_t *mxcsr_out) {
    long nr = SYS_kill, pid = getpid(), sig = SIGUSR1;
    __asm__ volatile("ldmxcsr %[mi]\n\t"
                     "movdqu 0(%[in]), %%xmm14\n\t"
                     "movdqu 16(%[in]), %%xmm15\n\t"
                     "syscall\n\t"
                     "movdqu %%xmm14, 0(%[out])\n\t"
                     "movdqu %%xmm15, 16(%[out])\n\t"
                     "stmxcsr %[mo]\n\t"
                     "ldmxcsr %[dm]\n\t"
                     : "+a"(nr), [mo] "=m"(*mxcsr_out)
                     : "D"(pid), "S"(sig), [in] "r"(in), [out] "r"(out),
                       [mi] "m"((uint32_t){0x3f80}), [dm] "m"((uint32_t){0x1f80})
                     : "rcx", "r11", "memory", "xmm14", "xmm15");
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "scribble") == 0) {
        // Returning from a handler that wrote garbage over the saved state: the kernel refuses
        // the frame (SIGSEGV), as XRSTOR would fault on it.
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGUSR2, &sa, NULL);
        printf("scribbling\n");
        fflush(stdout);
        raise(SIGUSR2);
        printf("survived a garbage frame\n");
        return 0;
    }
    __builtin_cpu_init();
    have_avx = __builtin_cpu_supports("avx");

    pthread_t t[THREADS];
    struct result r[THREADS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < THREADS; i++) {
        r[i].sum = i + 1;
        pthread_create(&t[i], NULL, spinner, &r[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        printf("thread %d: xmm intact %d/%d, mxcsr+fcw intact %d/%d, ymm intact %s, sum %.1f\n", i,
               r[i].sse_ok, ROUNDS, r[i].ctl_ok, ROUNDS,
               have_avx ? (r[i].avx_ok == ROUNDS ? "all" : "NO") : "all", r[i].sum);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);

    uint8_t in[32], out[32];
    uint32_t mo = 0;
    pattern(in, sizeof in, 7);
    signal_round(in, out, &mo);
    uint32_t want15[4] = {0x600dcafe, 0x600dcaff, 0x600dcb00, 0x600dcb01};
    printf("signal: xmm14 %s, xmm15 %s, mxcsr %s\n",
           memcmp(in, out, 16) == 0 ? "restored" : "CLOBBERED",
           memcmp(out + 16, want15, 16) == 0 ? "from frame" : "NOT FROM FRAME",
           mo == 0x3f80 ? "restored" : "CLOBBERED");

    // A periodic SIGALRM interrupting spinning code with live vector registers.
    struct itimerval it = {{0, 3000}, {0, 3000}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct result solo;
    memset(&solo, 0, sizeof solo);
    solo.sum = 9;
    int before = handler_runs;
    spinner(&solo);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("alarm: xmm intact %d/%d, mxcsr+fcw intact %d/%d, ymm intact %s, sum %.1f, handler ran: %s\n",
           solo.sse_ok, ROUNDS, solo.ctl_ok, ROUNDS,
           have_avx ? (solo.avx_ok == ROUNDS ? "all" : "NO") : "all", solo.sum,
           handler_runs > before ? "yes" : "no");
    printf("handlers: default mxcsr on entry %s, fpstate in frame %s\n",
           handler_mxcsr_default ? "yes" : "NO", handler_has_fpstate ? "yes" : "NO");
    return 0;
}
