// Identity calls the in-guest dispatcher answers (getpid, getppid, gettid, ids, a lone
// sched_yield), checked against the same program with every call exiting to the host
// (`--syscalls exit`). Threads must each see their own tid: every thread publishes
// gettid(), the main thread sends a signal to each of those tids, and the handler checks
// it runs in the thread that published it. With "scribble", the program writes garbage
// over the dispatcher's data page first and reports what getpid says then.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 3
static __thread int my_index = -1;
static volatile pid_t tids[THREADS + 1];
static volatile int reached[THREADS + 1];
static volatile int go;

static void on_usr1(int sig) {
    (void)sig;
    if (my_index >= 0) reached[my_index] = 1;
}

static void *worker(void *arg) {
    my_index = (int)(long)arg;
    tids[my_index] = (pid_t)syscall(SYS_gettid);
    for (long k = 0; k < 1000000 && !reached[my_index]; k++) sched_yield();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "scribble") == 0) {
        long before = syscall(SYS_getpid);
        volatile unsigned long *page = (volatile unsigned long *)0xa000;
        for (int i = 0; i < 16; i++) page[i] = 0x5c5c5c5c5c5c5c5cUL;
        long after = syscall(SYS_getpid);
        printf("getpid before %ld, after scribbling %s\n", before,
               after == before ? "unchanged" : "changed");
        return 0;
    }
    printf("pid %ld ppid %ld uid %ld euid %ld gid %ld egid %ld\n", (long)getpid(),
           (long)getppid(), (long)getuid(), (long)geteuid(), (long)getgid(), (long)getegid());
    printf("main tid is pid: %s, lone sched_yield: %d\n",
           syscall(SYS_gettid) == getpid() ? "yes" : "no", sched_yield());
    signal(SIGUSR1, on_usr1);
    my_index = 0;
    tids[0] = (pid_t)syscall(SYS_gettid);
    pthread_t t[THREADS];
    for (long i = 1; i <= THREADS; i++) pthread_create(&t[i - 1], NULL, worker, (void *)i);
    for (int i = 1; i <= THREADS; i++)
        while (!tids[i]) sched_yield();
    int distinct = 1;
    for (int i = 0; i <= THREADS; i++)
        for (int j = 0; j < i; j++)
            if (tids[i] == tids[j]) distinct = 0;
    printf("tids distinct: %s\n", distinct ? "yes" : "no");
    for (int i = 1; i <= THREADS; i++) syscall(SYS_tgkill, getpid(), tids[i], SIGUSR1);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 1; i <= THREADS; i++)
        printf("thread %d: its signal reached it: %s\n", i, reached[i] ? "yes" : "no");
    return 0;
}
