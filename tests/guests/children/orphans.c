/* Orphans and prctl: an orphan leaves its dead parent (and is not the
 * first process's child), a subreaper adopts and reaps orphans, a child
 * with PR_SET_PDEATHSIG gets its signal when its parent ends, and the
 * per-process prctl settings read back what was set. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap(int ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t))
        ;
}

/* Waits (up to 5 s) until getppid() is no longer `was`; returns it. */
static pid_t new_parent(pid_t was)
{
    for (int i = 0; i < 5000 && getppid() == was; i++)
        nap(1);
    return getppid();
}

static int rc(int r) { return r < 0 ? -errno : r; }

static volatile sig_atomic_t got_usr1;
static void on_usr1(int s) { (void)s; got_usr1 = 1; }

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t me = getpid();
    int v = -1;

    printf("dumpable %d", prctl(PR_GET_DUMPABLE));
    prctl(PR_SET_DUMPABLE, 0);
    printf(" -> %d; set 2: %d\n", prctl(PR_GET_DUMPABLE), rc(prctl(PR_SET_DUMPABLE, 2)));
    prctl(PR_SET_DUMPABLE, 1);
    printf("keepcaps %d", prctl(PR_GET_KEEPCAPS));
    prctl(PR_SET_KEEPCAPS, 1);
    printf(" -> %d\n", prctl(PR_GET_KEEPCAPS));
    printf("timer slack %d", prctl(PR_GET_TIMERSLACK));
    prctl(PR_SET_TIMERSLACK, 1000);
    printf(" -> %d", prctl(PR_GET_TIMERSLACK));
    prctl(PR_SET_TIMERSLACK, 0);
    printf(" -> %d\n", prctl(PR_GET_TIMERSLACK));
    printf("no_new_privs %d", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    printf(", set 0: %d", rc(prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0)));
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    printf(", then %d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    printf("THP disabled %d", prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0));
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    printf(" -> %d\n", prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0));
    printf("seccomp mode %d, CAP_CHOWN in bounding set %d, cap 1000: %d\n", prctl(PR_GET_SECCOMP),
           prctl(PR_CAPBSET_READ, 0), rc(prctl(PR_CAPBSET_READ, 1000)));
    printf("ambient CAP_CHOWN set %d, raise %d\n", prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 0, 0, 0),
           rc(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 0, 0, 0)));
    prctl(PR_GET_PDEATHSIG, &v);
    printf("pdeathsig %d, set 99: %d\n", v, rc(prctl(PR_SET_PDEATHSIG, 99)));
    printf("unknown option: %d\n", rc(prctl(12345, 0, 0, 0, 0)));

    /* 1. No subreaper: the orphan leaves its parent and is not ours. */
    int ready[2];
    pipe(ready);
    pid_t m = fork();
    if (m == 0) {
        pid_t mid = getpid();
        if (fork() == 0) {
            pid_t np = new_parent(mid);
            printf("orphan left its dead parent: %s; adopted by the first process: %s\n",
                   np != mid ? "yes" : "no", np == me ? "yes" : "no");
            write(ready[1], "x", 1);
            _exit(0);
        }
        _exit(0);
    }
    int st;
    waitpid(m, &st, 0);
    char c;
    read(ready[0], &c, 1);
    printf("wait for any child after that: %d\n", rc(wait(NULL)));

    /* 2. A subreaper adopts the orphan and reaps it. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_GET_CHILD_SUBREAPER, &v);
    printf("subreaper %d\n", v);
    m = fork();
    if (m == 0) {
        pid_t mid = getpid();
        if (fork() == 0) {
            pid_t np = new_parent(mid);
            printf("orphan adopted by the subreaper: %s\n", np == me ? "yes" : "no");
            _exit(5);
        }
        _exit(0);
    }
    waitpid(m, &st, 0);
    pid_t g = wait(&st);
    printf("subreaper reaped the orphan: %s, exit %d\n", g > 0 && g != m ? "yes" : "no", WEXITSTATUS(st));

    /* 3. PR_SET_PDEATHSIG: SIGUSR1 when the parent ends; not kept by fork. */
    m = fork();
    if (m == 0) {
        pid_t mid = getpid();
        if (fork() == 0) {
            signal(SIGUSR1, on_usr1);
            prctl(PR_SET_PDEATHSIG, SIGUSR1);
            prctl(PR_GET_PDEATHSIG, &v);
            if (getppid() != mid)
                _exit(9);
            if (fork() == 0) {
                prctl(PR_GET_PDEATHSIG, &v);
                _exit(v);
            }
            int s2;
            wait(&s2);
            printf("pdeathsig %d, its child's %d\n", v, WEXITSTATUS(s2));
            write(ready[1], "x", 1);
            for (int i = 0; i < 5000 && !got_usr1; i++)
                nap(1);
            printf("parent died, SIGUSR1 came: %s\n", got_usr1 ? "yes" : "no");
            _exit(0);
        }
        read(ready[0], &c, 1);
        _exit(0);
    }
    waitpid(m, &st, 0);
    wait(&st);
    printf("done\n");
    return 0;
}
