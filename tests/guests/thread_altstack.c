/* sigaltstack is per thread (Go gives every thread its own signal stack):
 * a new thread starts without one, setting one in a thread leaves the
 * others' alone, and each thread's SA_ONSTACK handler runs on its own. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static char main_stack[65536], worker_stack[65536];
static volatile uintptr_t handler_sp;

static void on_usr1(int s) {
    volatile char here;
    (void)s;
    handler_sp = (uintptr_t)&here;
}

static const char *where(uintptr_t sp) {
    if (sp >= (uintptr_t)main_stack && sp < (uintptr_t)main_stack + sizeof main_stack)
        return "main's signal stack";
    if (sp >= (uintptr_t)worker_stack && sp < (uintptr_t)worker_stack + sizeof worker_stack)
        return "the worker's signal stack";
    return "the thread's own stack";
}

static void show(const char *who) {
    stack_t now;
    sigaltstack(NULL, &now);
    printf("%s: alternate stack %s\n", who,
           now.ss_flags & SS_DISABLE ? "disabled" : where((uintptr_t)now.ss_sp));
    handler_sp = 0;
    raise(SIGUSR1);
    printf("%s: handler ran on %s\n", who, where(handler_sp));
}

static void *worker(void *arg) {
    (void)arg;
    show("new thread");
    stack_t ss = {.ss_sp = worker_stack, .ss_size = sizeof worker_stack};
    if (sigaltstack(&ss, NULL) != 0)
        perror("sigaltstack");
    show("worker");
    return NULL;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    stack_t ss = {.ss_sp = main_stack, .ss_size = sizeof main_stack};
    if (sigaltstack(&ss, NULL) != 0)
        perror("sigaltstack");
    show("main");
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    show("main after the worker");
    return 0;
}
