#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
static sigjmp_buf env;
static volatile int hits, usr;
static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)uc; hits++;
    printf("caught signal %d at %p\n", sig, si->si_addr);
    siglongjmp(env, 1);
}
static void on_usr1(int sig) { usr += sig; }
int main(void) {
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv; sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    for (int i = 0; i < 3; i++) {
        if (sigsetjmp(env, 1) == 0) {
            *(volatile int *)(long)(16 * (i + 1)) = 1;
            puts("not reached");
        } else {
            printf("recovered %d\n", i);
        }
    }
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    raise(SIGUSR1);
    printf("usr=%d hits=%d\n", usr, hits);
    double x = 1.5; for (int i = 0; i < 10; i++) x = x * 1.1; printf("%.6f\n", x);
    return 0;
}
