/* A signal sent to the process reaches a thread that does not block it,
 * and one sent to a thread waits for that thread,
 * as Linux's complete_signal picks one. Go's crash dump relies on it: each
 * thread's SIGQUIT handler raises SIGQUIT again for the process and keeps
 * it blocked, so the next raise must reach a thread that has not dumped
 * yet. Under forkvm the raise waited in the queue, and only one thread
 * ever dumped; and a signal pthread_kill sent to a thread that blocked it
 * ran in whichever thread next changed its mask. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 3

static volatile pid_t main_tid, handled_by;
static volatile int relayed, seen[THREADS + 1];
static volatile pid_t tids[THREADS + 1];
static volatile int done, kill_main, sent, worker_saw_it;
static pthread_t main_thread;

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

static void on_usr1(int s) {
    (void)s;
    handled_by = gettid_();
}

/* Each thread's handler notes itself and passes the signal on to the
 * process; SIGUSR2 stays blocked in a thread whose handler ran (it waits
 * here until all have). */
static void on_usr2(int s) {
    (void)s;
    pid_t me = gettid_();
    for (int i = 0; i <= THREADS; i++)
        if (tids[i] == me) seen[i] = 1;
    if (__sync_add_and_fetch(&relayed, 1) <= THREADS) kill(getpid(), SIGUSR2);
    while (relayed <= THREADS) sched_yield();
}

static void *spin(void *arg) {
    tids[(long)arg] = gettid_();
    while (!done) {
        if ((long)arg == 1 && kill_main) {
            /* Sends SIGUSR1 to the main thread, which blocks it, then
             * changes its own mask (which takes what waits for it). */
            kill_main = 0;
            pthread_kill(main_thread, SIGUSR1);
            sigset_t s, pending;
            sigemptyset(&s);
            sigaddset(&s, SIGUSR2);
            pthread_sigmask(SIG_BLOCK, &s, NULL);
            pthread_sigmask(SIG_UNBLOCK, &s, NULL);
            sigpending(&pending);
            worker_saw_it = sigismember(&pending, SIGUSR1);
            sent = 1;
        }
        sched_yield();
    }
    return NULL;
}

int main(void) {
    main_tid = gettid_();
    tids[0] = main_tid;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);

    pthread_t t[THREADS];
    for (long i = 1; i <= THREADS; i++) pthread_create(&t[i - 1], NULL, spin, (void *)i);
    for (int i = 1; i <= THREADS; i++)
        while (!tids[i]) sched_yield();

    /* The sender blocks SIGUSR1: a thread that does not takes it. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    kill(getpid(), SIGUSR1);
    while (!handled_by) sched_yield();
    printf("SIGUSR1 blocked by the sender: handled by %s\n",
           handled_by == main_tid ? "the sender" : "another thread");
    sigset_t pending;
    sigpending(&pending);
    printf("still pending for the sender: %s\n", sigismember(&pending, SIGUSR1) ? "yes" : "no");
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);

    /* The relay: every thread's handler runs once. */
    kill(getpid(), SIGUSR2);
    while (relayed <= THREADS) sched_yield();
    int count = 0;
    for (int i = 0; i <= THREADS; i++) count += seen[i];
    printf("SIGUSR2 relayed: %d of %d threads ran the handler\n", count, THREADS + 1);

    /* Sent to the main thread, which blocks it: it waits for the main thread. */
    main_thread = pthread_self();
    handled_by = 0;
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    kill_main = 1;
    while (!sent) sched_yield();
    sigpending(&pending);
    printf("pthread_kill to the blocking main thread: handled %s, pending for it %s, for the sender %s\n",
           handled_by ? "at once" : "not yet", sigismember(&pending, SIGUSR1) ? "yes" : "no",
           worker_saw_it ? "yes" : "no");
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    printf("unblocked: handled by %s\n", handled_by == main_tid ? "the main thread" : "another thread");

    done = 1;
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    return 0;
}
