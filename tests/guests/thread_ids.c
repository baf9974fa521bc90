/* Calls that take a process or thread id, made from a second thread with its
 * own id, as pthread_getattr_np (sched_getaffinity on the thread's id; the JVM
 * calls it for every thread it starts) and thread pools do. Prints only what
 * is the same on any machine: success or the errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static void report(const char *what, long r) {
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
}

static void calls(const char *who, pid_t id) {
    char what[96];
    cpu_set_t set;
    struct sched_param sp;
    struct rlimit rl;
    CPU_ZERO(&set);
    snprintf(what, sizeof what, "%s sched_getaffinity", who);
    report(what, sched_getaffinity(id, sizeof set, &set));
    if (id > 0 && CPU_COUNT(&set) < 1)
        printf("%s: no CPU in the mask\n", who);
    snprintf(what, sizeof what, "%s sched_setaffinity", who);
    report(what, sched_setaffinity(id, sizeof set, &set));
    snprintf(what, sizeof what, "%s sched_getscheduler", who);
    report(what, sched_getscheduler(id));
    snprintf(what, sizeof what, "%s sched_getparam", who);
    report(what, sched_getparam(id, &sp));
    snprintf(what, sizeof what, "%s getpriority", who);
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, id);
    report(what, prio == -1 && errno ? -1 : 0);
    snprintf(what, sizeof what, "%s prlimit", who);
    report(what, prlimit(id, RLIMIT_NOFILE, NULL, &rl));
}

static void *thread(void *arg) {
    (void)arg;
    pthread_attr_t attr;
    size_t size = 0;
    void *addr = NULL;
    int e = pthread_getattr_np(pthread_self(), &attr);
    printf("thread pthread_getattr_np: %s\n", e ? strerror(e) : "ok");
    if (!e) {
        pthread_attr_getstack(&attr, &addr, &size);
        printf("thread stack: %s\n", size > 0 && addr ? "has one" : "none");
        pthread_attr_destroy(&attr);
    }
    calls("thread (own id)", (pid_t)syscall(SYS_gettid));
    calls("thread (process id)", getpid());
    return NULL;
}

int main(void) {
    pthread_t t;
    calls("main (0)", 0);
    calls("main (own id)", (pid_t)syscall(SYS_gettid));
    calls("no such task", 99999);
    if (pthread_create(&t, NULL, thread, NULL) != 0)
        return 1;
    pthread_join(t, NULL);
    return 0;
}
