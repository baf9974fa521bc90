/* vfork and posix_spawn: a vfork child (vfork(), or clone with CLONE_VM |
 * CLONE_VFORK inside posix_spawn) runs in its parent's memory, so what it
 * stores there before it execs or exits is the parent's. glibc's
 * posix_spawn learns that exec failed only that way.
 * Prints only what must be the same natively and under forkvm (no pids).
 *   vfork_share        the cases
 *   vfork_share hang   a vfork child that never execs or exits */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static volatile int global_var = 1;
static char big_buffer[3 * 4096 + 100];

/* Two variables on one page: the main thread stores one while a vfork
 * child (of another thread) waits, the child stores the other. */
static struct {
    volatile int by_main;
    volatile int by_child;
} both;
static int gate[2];

/* A thread's vfork child waits until the main thread closed the gate, then
 * stores. Only the calling thread waits for a vfork child: the main thread
 * goes on (a whole process waiting would never close the gate). */
static void *vfork_in_a_thread(void *arg)
{
    (void)arg;
    pid_t pid = vfork();
    if (pid == 0) {
        char b;
        close(gate[1]);
        while (read(gate[0], &b, 1) > 0) {}
        both.by_child = 3;
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return NULL;
}

static void show(const char *what, int st)
{
    if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("%s: killed by %d\n", what, WTERMSIG(st));
    else
        printf("%s: status %#x\n", what, st);
}

static void no_child_left(const char *after)
{
    int st;
    errno = 0;
    pid_t w = waitpid(-1, &st, WNOHANG);
    printf("after %s: waitpid %s\n", after,
           w == -1 && errno == ECHILD ? "ECHILD (the child was reaped)" : "found a child");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exit-child") == 0)
        return 42;
    if (argc > 1 && strcmp(argv[1], "hang") == 0) {
        /* A vfork child that never execs: its parent waits for good. */
        pid_t pid = vfork();
        if (pid == 0)
            for (;;)
                pause();
        printf("the parent went on\n");
        return 0;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    char *missing_av[] = {"no-such-program", NULL};

    /* 1. posix_spawn of a program that does not exist. */
    pid_t pid = -1;
    int r = posix_spawn(&pid, "/nonexistent/no-such-program", NULL, NULL, missing_av, environ);
    printf("posix_spawn of a missing program: %d (%s), pid %s\n", r, strerror(r),
           pid == -1 ? "not set" : "set");
    if (r == 0)
        waitpid(pid, NULL, 0);
    no_child_left("posix_spawn");

    /* 2. posix_spawnp of a name found nowhere in PATH. */
    pid = -1;
    setenv("PATH", "/nonexistent/a:/nonexistent/b", 1);
    r = posix_spawnp(&pid, "no-such-program", NULL, NULL, missing_av, environ);
    printf("posix_spawnp of a missing program: %d (%s), pid %s\n", r, strerror(r),
           pid == -1 ? "not set" : "set");
    if (r == 0)
        waitpid(pid, NULL, 0);
    no_child_left("posix_spawnp");

    /* 3. vfork: the child stores into a global, the stack and a buffer
     * over several pages, then _exits. */
    volatile int on_stack = 1;
    int st;
    pid = vfork();
    if (pid == 0) {
        global_var = 2;
        on_stack = 3;
        memset(big_buffer, 'v', sizeof big_buffer);
        _exit(7);
    }
    waitpid(pid, &st, 0);
    show("vfork child", st);
    size_t vs = 0;
    for (size_t i = 0; i < sizeof big_buffer; i++)
        vs += big_buffer[i] == 'v';
    printf("after vfork: global %d, stack %d, buffer %zu of %zu bytes set\n", global_var,
           on_stack, vs, sizeof big_buffer);

    /* 3a. A vfork child killed by a signal, and one that crashes: what
     * they stored first is there all the same. */
    pid = vfork();
    if (pid == 0) {
        global_var = 6;
        kill(getpid(), SIGKILL);
        _exit(1);
    }
    waitpid(pid, &st, 0);
    show("vfork child killed", st);
    printf("after it: global %d\n", global_var);
    pid = vfork();
    if (pid == 0) {
        volatile int *volatile nowhere = NULL;
        on_stack = 4;
        *nowhere = 1;
        _exit(1);
    }
    waitpid(pid, &st, 0);
    show("vfork child crashed", st);
    printf("after it: stack %d\n", on_stack);

    /* 3b. vfork + a failed exec: the child reports errno through memory. */
    volatile int exec_errno = 0;
    pid = vfork();
    if (pid == 0) {
        execl("/nonexistent/no-such-program", "no-such-program", (char *)NULL);
        exec_errno = errno;
        _exit(127);
    }
    waitpid(pid, &st, 0);
    show("vfork child whose exec failed", st);
    printf("its exec errno: %d (%s)\n", exec_errno, strerror(exec_errno));

    /* 3c. vfork + a successful exec: a store made before the exec stays. */
    pid = vfork();
    if (pid == 0) {
        global_var = 5;
        char *av[] = {argv[0], "exit-child", NULL};
        execv(argv[0], av);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    show("vfork child that exec'd", st);
    printf("after its exec: global %d\n", global_var);

    /* 4. posix_spawn of a program that exists still works. */
    char *sv[] = {argv[0], "exit-child", NULL};
    pid = -1;
    r = posix_spawn(&pid, argv[0], NULL, NULL, sv, environ);
    printf("posix_spawn of ourselves: %d, pid %s\n", r, pid > 0 ? "set" : "not set");
    if (r == 0 && waitpid(pid, &st, 0) == pid)
        show("spawned child", st);
    no_child_left("the spawned child");

    /* 5. A vfork in a thread while the main thread goes on. */
    if (pipe(gate)) return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, vfork_in_a_thread, NULL)) return 1;
    usleep(20000);
    both.by_main = 2;
    close(gate[1]);
    pthread_join(t, NULL);
    printf("after a thread's vfork: main stored %d, child stored %d\n", both.by_main,
           both.by_child);

    /* A plain fork's stores stay its own. */
    pid = fork();
    if (pid == 0) {
        global_var = 9;
        _exit(0);
    }
    waitpid(pid, &st, 0);
    printf("after fork: global %d\n", global_var);
    return 0;
}
