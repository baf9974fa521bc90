/* /proc/<pid> of the other processes of the run: a child reads its
 * parent's, the parent its child's, running (renamed with PR_SET_NAME), as
 * a zombie and once reaped; /proc lists them. ps, pgrep and a shell's
 * `cat /proc/$$/status` read these. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int slurp(const char *path, char *buf, int size) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = (int)fread(buf, 1, size - 1, f);
    buf[n] = 0;
    fclose(f);
    return n;
}

/* Fields 1, 3, 4 and 5 of /proc/<pid>/stat: pid, state, ppid, pgrp. */
static int stat_of(int pid, int *spid, char *state, int *ppid, int *pgrp) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (slurp(path, buf, sizeof buf) < 0) return -1;
    char *close = strrchr(buf, ')');
    if (!close) return -1;
    *spid = atoi(buf);
    return sscanf(close + 2, "%c %d %d", state, ppid, pgrp) == 3 ? 0 : -1;
}

/* How many fields /proc/<pid>/stat has (52 on Linux 5.x and 6.x). */
static int stat_fields(int pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (slurp(path, buf, sizeof buf) < 0) return -1;
    char *at = strrchr(buf, ')');
    int n = 2;
    for (char *tok = at ? strtok(at + 1, " \n") : NULL; tok; tok = strtok(NULL, " \n")) n++;
    return n;
}

static int status_ppid(int pid) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (slurp(path, buf, sizeof buf) < 0) return -1;
    char *at = strstr(buf, "\nPPid:");
    return at ? atoi(at + 6) : -1;
}

static int listed(int pid) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    char want[32];
    snprintf(want, sizeof want, "%d", pid);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strcmp(e->d_name, want)) found = 1;
    closedir(d);
    return found;
}

int main(void) {
    char mine[4096], theirs[4096], path[64];
    int own_cmdline = slurp("/proc/self/cmdline", mine, sizeof mine);
    char own_exe[512] = {0}, exe[512] = {0};
    if (readlink("/proc/self/exe", own_exe, sizeof own_exe - 1) < 0) return 1;
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) return 1;
    pid_t c = fork();
    if (c == 0) {
        close(go[1]);
        char comm[64], pcomm[64];
        slurp("/proc/self/comm", comm, sizeof comm);
        snprintf(path, sizeof path, "/proc/%d/comm", (int)getppid());
        int got = slurp(path, pcomm, sizeof pcomm);
        printf("child: parent's comm readable %d, same as mine %d\n", got > 0, got > 0 && !strcmp(comm, pcomm));
        int spid, ppid, pgrp;
        char state;
        int ok = stat_of(getppid(), &spid, &state, &ppid, &pgrp) == 0;
        printf("child: parent's stat %d pid %d pgrp %d, status PPid matches stat %d, fields %d\n", ok,
               ok && spid == getppid(), ok && pgrp == getpgrp(), ok && status_ppid(getppid()) == ppid,
               stat_fields(getppid()));
        fflush(stdout);
        prctl(PR_SET_NAME, "kid");
        char b = 0;
        if (write(ready[1], &b, 1) != 1) _exit(1);
        if (read(go[0], &b, 1) < 0) _exit(1);
        _exit(3);
    }
    char b;
    if (read(ready[0], &b, 1) != 1) return 1;
    snprintf(path, sizeof path, "/proc/%d/comm", (int)c);
    char comm[64] = {0};
    slurp(path, comm, sizeof comm);
    printf("parent: child's comm %s", comm);
    int spid, ppid, pgrp;
    char state;
    int ok = stat_of(c, &spid, &state, &ppid, &pgrp) == 0;
    printf("parent: child's stat %d pid %d ppid %d pgrp %d running %d\n", ok, ok && spid == c,
           ok && ppid == getpid(), ok && pgrp == getpgrp(), ok && (state == 'S' || state == 'R'));
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)c);
    int n = slurp(path, theirs, sizeof theirs);
    printf("parent: child's cmdline as mine %d\n", n == own_cmdline && !memcmp(mine, theirs, n));
    snprintf(path, sizeof path, "/proc/%d/exe", (int)c);
    printf("parent: child's exe as mine %d\n", readlink(path, exe, sizeof exe - 1) > 0 && !strcmp(exe, own_exe));
    printf("parent: /proc lists the child %d and me %d\n", listed(c), listed(getpid()));
    fflush(stdout);
    close(go[1]);
    siginfo_t si;
    if (waitid(P_PID, c, &si, WEXITED | WNOWAIT)) return 1;
    ok = stat_of(c, &spid, &state, &ppid, &pgrp) == 0;
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)c);
    n = slurp(path, theirs, sizeof theirs);
    printf("parent: zombie stat %d state %c, cmdline empty %d\n", ok, ok ? state : '?', n == 0);
    waitpid(c, NULL, 0);
    snprintf(path, sizeof path, "/proc/%d", (int)c);
    struct stat st;
    printf("parent: reaped child gone %d, unlisted %d\n", stat(path, &st) != 0, !listed(c));
    return 0;
}
