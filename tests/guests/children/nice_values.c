/* setpriority/nice are remembered, and a child inherits the value: `nice -n 5
 * nice` printed 0. (Lowering it is refused to a non-root process only, so it
 * is not compared here: the native run may be root.) */
#include <stdio.h>
#include <errno.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

int main(void)
{
    printf("start %d\n", getpriority(PRIO_PROCESS, 0));
    printf("set 5: %d\n", setpriority(PRIO_PROCESS, 0, 5));
    printf("now %d\n", getpriority(PRIO_PROCESS, 0));
    errno = 0;
    printf("nice(1): %d\n", nice(1));
    int r = setpriority(PRIO_PROCESS, 0, 40);
    printf("clamped: %d then %d\n", r, getpriority(PRIO_PROCESS, 0));
    fflush(stdout);
    if (fork() == 0) {
        printf("child %d\n", getpriority(PRIO_PROCESS, 0));
        fflush(stdout);
        _exit(0);
    }
    wait(NULL);
    return 0;
}
