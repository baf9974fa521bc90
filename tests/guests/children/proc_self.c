/* /proc/self/status, /proc/self/stat and /proc/<pid>/stat name the process
 * that reads them (and its parent), in a child as in the first process. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
static void show(const char *who) {
    char buf[4096] = {0};
    FILE *f = fopen("/proc/self/status", "r");
    int pid = -1, ppid = -1;
    while (f && fgets(buf, sizeof buf, f)) {
        if (!strncmp(buf, "Pid:", 4)) pid = atoi(buf + 5);
        if (!strncmp(buf, "PPid:", 5)) ppid = atoi(buf + 6);
    }
    if (f) fclose(f);
    int spid = -1, sppid = -1; char name[64];
    f = fopen("/proc/self/stat", "r");
    if (f) { if (fscanf(f, "%d %63s %*c %d", &spid, name, &sppid) != 3) spid = -2; fclose(f); }
    char path[64]; snprintf(path, sizeof path, "/proc/%d/stat", (int)getpid());
    f = fopen(path, "r"); int bypid = f != NULL; if (f) fclose(f);
    printf("%s: status pid ok %d ppid ok %d; stat pid ok %d ppid ok %d; /proc/<pid>/stat opens %d\n", who,
           pid == getpid(), ppid == getppid(), spid == getpid(), sppid == getppid(), bypid);
    fflush(stdout);
}
int main(void) {
    show("parent");
    pid_t c = fork();
    if (c == 0) { show("child"); _exit(0); }
    waitpid(c, NULL, 0);
    return 0;
}
