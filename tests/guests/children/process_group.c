/* Process groups and sessions of the first process, as for a program run
 * from a shell: setpgid(0, 0) succeeds before and after it forks (it was
 * EPERM once it had a child: the first process was a session leader, and
 * perl's setpgrp failed), setsid is EPERM for a group leader, and a child's
 * setsid makes a session whose leader cannot change group. */
#define _GNU_SOURCE
#include "../common.h"
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-36s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-36s ok\n", what);
    fflush(stdout);
}

int main(void) {
    say("setpgid(0, 0) before fork", setpgid(0, 0));
    say("setpgid(0, missing group)", setpgid(0, 999999));
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, NULL, 0);
    say("setpgid(0, 0) after fork", setpgid(0, 0));
    printf("group leader: %d\n", getpgrp() == getpid());
    printf("session leader: %d\n", getsid(0) == getpid());
    say("setsid as group leader", setsid());
    say("setpgid(getpid(), getpid())", setpgid(getpid(), getpid()));

    int go[2], done[2];
    if (pipe(go) < 0 || pipe(done) < 0) return 1;
    c = fork();
    if (c == 0) {
        char b;
        long r = setsid();
        say("child setsid", r);
        printf("child session leader: %d\n", getsid(0) == getpid());
        say("child setpgid(0, 0) as session leader", setpgid(0, 0));
        fflush(stdout);
        write(done[1], "x", 1);
        read(go[0], &b, 1);
        _exit(0);
    }
    char b;
    read(done[0], &b, 1);
    printf("child in my session: %d\n", getsid(c) == getsid(0));
    say("setpgid(child in other session, 0)", setpgid(c, 0));
    say("join child's group", setpgid(0, c));
    write(go[1], "x", 1);
    int st;
    waitpid(c, &st, 0);
    printf("child exited %d\n", WEXITSTATUS(st));
    return 0;
}
