/* Forks until refused (at most 300 children), each child waiting on a pipe;
 * then lets them all go and reaps them. Under `forkvm run --max-processes N`
 * fork fails with EAGAIN once N processes are alive. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    int gate[2];
    if (pipe(gate)) return 1;
    int n = 0, err = 0;
    for (; n < 300; n++) {
        pid_t c = fork();
        if (c < 0) {
            err = errno;
            break;
        }
        if (c == 0) {
            char b;
            close(gate[1]);
            while (read(gate[0], &b, 1) > 0) {}
            _exit(0);
        }
    }
    close(gate[1]);
    int reaped = 0, st;
    while (wait(&st) > 0) reaped++;
    printf("forked %d, then %s; reaped %d\n", n, err == EAGAIN ? "EAGAIN" : err ? strerror(err) : "stopped", reaped);
    return 0;
}
