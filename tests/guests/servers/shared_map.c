/* A server whose state lives in MAP_SHARED|MAP_ANONYMOUS memory made before
 * it listens, as opcache's (php -S) and pre-forking servers' scoreboards do
 * (crates/forkvm-cli/tests/servers.rs), natively and under forkvm serve:
 *
 *   shared_map PORT [LOCKFILE]
 *
 * Every request is answered with what the shared pages hold (set before
 * listening: a marker on the first page, one on a later page, a function
 * pointer that is called) and a counter kept there, then the connection is
 * closed. With LOCKFILE (opened before listening, as opcache's lock file),
 * each request holds a POSIX write lock on it (F_SETLKW) from before it
 * answers until after, as php does; GET /slow holds it a second longer. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <time.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAGES 64

struct state {
    unsigned long marker;
    long count;
    const char *(*greet)(void);
};

static const char *greet(void) { return "hello"; }

int main(int argc, char **argv) {
    if (argc < 2) { fputs("usage: shared_map PORT\n", stderr); return 2; }
    char *shm = mmap(NULL, PAGES * 4096, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) { perror("mmap"); return 1; }
    struct state *st = (struct state *)shm;
    st->marker = 0x5eed5eedUL;
    st->greet = greet;
    strcpy(shm + 40 * 4096, "far page");
    int lock_fd = argc > 2 ? open(argv[2], O_RDWR | O_CREAT, 0600) : -1;
    if (argc > 2 && lock_fd < 0) { perror("open lock file"); return 1; }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64)) { perror("listen"); return 1; }
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        char req[4096];
        ssize_t n = read(c, req, sizeof req);
        if (n <= 0) { close(c); continue; }
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (lock_fd >= 0 && fcntl(lock_fd, F_SETLKW, &fl)) perror("F_SETLKW");
        if (lock_fd >= 0 && strncmp(req, "GET /slow ", 10) == 0) {
            struct timespec second = {1, 0};
            nanosleep(&second, NULL);
        }
        st->count++;
        char body[256], out[512];
        int len = snprintf(body, sizeof body, "%s marker=%lx far=%s count=%ld\n",
                           st->greet ? st->greet() : "(null greet)", st->marker,
                           shm + 40 * 4096, st->count);
        int m = snprintf(out, sizeof out,
                         "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
                         len, body);
        write(c, out, m);
        fl.l_type = F_UNLCK;
        if (lock_fd >= 0) fcntl(lock_fd, F_SETLK, &fl);
        close(c);
    }
}
