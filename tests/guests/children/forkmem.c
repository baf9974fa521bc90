/* Children that each malloc and touch a chunk while all of them stay
 * alive: under `forkvm run --memory M` the run's processes share one limit,
 * so once it is used up a child's malloc (or the fork itself) fails with
 * ENOMEM. Then every child ends, and the parent's own malloc of a chunk
 * works again (their memory was given back).
 * Usage: forkmem [children] [chunk MiB]; prints one line per child. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int touch(size_t size)
{
    char *p = malloc(size);
    if (!p) return errno;
    memset(p, 0x5a, size);
    int ok = p[size - 1] == 0x5a;
    free(p);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 6;
    size_t chunk = (size_t)(argc > 2 ? atoi(argv[2]) : 16) << 20;
    int gate[2];
    if (pipe(gate)) return 1;
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 0; i < n; i++) {
        int res[2];
        if (pipe(res)) return 1;
        pid_t c = fork();
        if (c < 0) {
            printf("fork %d: %s\n", i, errno == ENOMEM ? "ENOMEM" : strerror(errno));
            close(res[0]);
            close(res[1]);
            continue;
        }
        if (c == 0) {
            /* Keep the chunk while the later children allocate theirs. */
            close(gate[1]);
            char *p = malloc(chunk);
            int err = p ? 0 : errno;
            if (p) memset(p, 0x5a, chunk);
            if (write(res[1], &err, sizeof err) != sizeof err) _exit(2);
            char b;
            while (read(gate[0], &b, 1) > 0) {}
            _exit(p ? 0 : 1);
        }
        close(res[1]);
        int err = -1;
        if (read(res[0], &err, sizeof err) != sizeof err) err = -1;
        close(res[0]);
        printf("child %d: %s\n", i, err == 0 ? "ok" : err == ENOMEM ? "ENOMEM" : "error");
    }
    close(gate[1]);
    int st, ok = 0, failed = 0;
    while (wait(&st) > 0) {
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        else failed++;
    }
    printf("reaped %d with the chunk, %d without\n", ok, failed);
    int err = touch(chunk);
    printf("parent afterwards: %s\n", err == 0 ? "ok" : err == ENOMEM ? "ENOMEM" : "error");
    return 0;
}
