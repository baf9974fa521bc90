#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
static volatile int got; static volatile pid_t worker_tid; static volatile int stop;
static void on_usr1(int s) { (void)s; got = (int)syscall(SYS_gettid) == worker_tid ? 1 : 2; }
static void *worker(void *a) { (void)a; worker_tid = (pid_t)syscall(SYS_gettid); while (!got) sched_yield(); return NULL; }
int main(void) {
    signal(SIGUSR1, on_usr1);
    pthread_t t; pthread_create(&t, NULL, worker, NULL);
    while (!worker_tid) sched_yield();
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    printf("handler ran in the %s thread\n", got == 1 ? "target" : "wrong");
    return 0;
}
