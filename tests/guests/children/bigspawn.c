/* A program with a large heap that starts other programs: posix_spawn,
 * vfork + execve, clone(CLONE_VFORK) without CLONE_VM + execve, a vfork
 * child that only exits, then (heap freed) a plain fork. Under `forkvm run
 * --memory M` with a heap over M/2, a vfork child must not be charged for
 * the parent's memory it only borrows until its execve.
 *
 * Usage: bigspawn HEAP_MIB            prints one line per child
 *        bigspawn HEAP_MIB hostile N  vfork children that do not exec try
 *                                     to take more: mmap N MiB, fork, a
 *                                     second vfork while one waits
 *        bigspawn child CODE          (the spawned program) exits CODE */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static const char *self;

static const char *err_name(int e)
{
    return e == ENOMEM ? "ENOMEM" : e == EAGAIN ? "EAGAIN" : strerror(e);
}

static void show(const char *what, pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        printf("%s: waitpid: %s\n", what, strerror(errno));
    else if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
    else
        printf("%s: status %#x\n", what, st);
}

static void exec_self(const char *code)
{
    char *av[] = {(char *)self, "child", (char *)code, NULL};
    execve("/proc/self/exe", av, environ);
    execve(self, av, environ);
    _exit(127);
}

static int spawn(const char *code)
{
    char *av[] = {(char *)self, "child", (char *)code, NULL};
    pid_t pid;
    int e = posix_spawn(&pid, self, NULL, NULL, av, environ);
    if (e) return e;
    show("posix_spawn", pid);
    return 0;
}

/* Maps and touches `mib` MiB: 0, or the errno. */
static int take(size_t mib)
{
    size_t size = mib << 20;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return errno;
    memset(p, 0x5a, size);
    return p[size - 1] == 0x5a ? 0 : EIO;
}

static int gate[2], ready[2];

/* A vfork child that waits (without exec) until the gate closes. */
static void *vfork_and_wait(void *arg)
{
    (void)arg;
    pid_t pid = vfork();
    if (pid == 0) {
        char b = 1;
        close(gate[1]);
        if (write(ready[1], &b, 1) != 1) _exit(2);
        while (read(gate[0], &b, 1) > 0) {}
        _exit(0);
    }
    if (pid < 0) {
        char b = 0;
        if (write(ready[1], &b, 1) != 1) return NULL;
        printf("waiting vfork: %s\n", err_name(errno));
        return NULL;
    }
    show("waiting vfork child", pid);
    return NULL;
}

static int hostile(size_t more)
{
    /* A vfork child pays for what it maps beyond its borrowed copy. */
    pid_t pid = vfork();
    if (pid == 0) _exit(take(more) == ENOMEM ? 12 : take(1) ? 1 : 0);
    if (pid < 0) printf("vfork: %s\n", err_name(errno));
    else show("vfork child mapping more (12: ENOMEM)", pid);

    /* A vfork child that forks pays for its own copy first. */
    pid = vfork();
    if (pid == 0) {
        pid_t c = fork();
        if (c == 0) _exit(0);
        if (c < 0) _exit(errno == ENOMEM ? 12 : 1);
        int st;
        waitpid(c, &st, 0);
        _exit(0);
    }
    if (pid < 0) printf("vfork: %s\n", err_name(errno));
    else show("vfork child forking (12: ENOMEM)", pid);

    /* Borrowed copies are bounded: while one vfork child waits (in another
     * thread), the next vfork child is charged. */
    if (pipe(gate) || pipe(ready)) return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, vfork_and_wait, NULL)) return 1;
    char b;
    if (read(ready[0], &b, 1) != 1) return 1;
    int e = spawn("8");
    if (e) printf("posix_spawn while a vfork child waits: %s\n", err_name(e));
    close(gate[1]);
    pthread_join(t, NULL);
    e = spawn("9");
    if (e) printf("posix_spawn afterwards: %s\n", err_name(e));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "child") == 0) return atoi(argv[2]);
    self = argv[0];
    setvbuf(stdout, NULL, _IONBF, 0);
    size_t heap = (size_t)(argc > 1 ? atoi(argv[1]) : 150) << 20;
    static char *big;
    big = malloc(heap);
    if (!big) {
        printf("malloc: %s\n", err_name(errno));
        return 1;
    }
    memset(big, 0x5a, heap);
    if (argc > 3 && strcmp(argv[2], "hostile") == 0) return hostile((size_t)atoi(argv[3]));

    int e = spawn("7");
    if (e) printf("posix_spawn: %s\n", err_name(e));

    pid_t pid = vfork();
    if (pid == 0) exec_self("8");
    if (pid < 0) printf("vfork: %s\n", err_name(errno));
    else show("vfork + execve", pid);

    /* CLONE_VFORK without CLONE_VM: a copy, and the parent waits. */
    pid = (pid_t)syscall(SYS_clone, CLONE_VFORK | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) exec_self("9");
    if (pid < 0) printf("clone(CLONE_VFORK): %s\n", err_name(errno));
    else show("clone(CLONE_VFORK) + execve", pid);

    pid = vfork();
    if (pid == 0) _exit(5);
    if (pid < 0) printf("vfork: %s\n", err_name(errno));
    else show("vfork + _exit", pid);

    printf("heap intact: %s\n", big[0] == 0x5a && big[heap - 1] == 0x5a ? "yes" : "no");
    free(big);
    pid = fork();
    if (pid == 0) _exit(3);
    if (pid < 0) printf("fork: %s\n", err_name(errno));
    else show("fork", pid);
    return 0;
}
