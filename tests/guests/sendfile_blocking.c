/* sendfile to a blocking socket whose buffer is full waits for room (it
 * failed with EAGAIN); a short count is allowed, so only errors and the
 * bytes the reader got versus the bytes sendfile reported are compared. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    (void)argc;
    int sv[2], report[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(report) != 0) return 1;
    int fd = open(argv[0], O_RDONLY);
    if (fd < 0) return 1;
    if (fork() == 0) {
        close(sv[1]);
        usleep(100000); /* let the writer fill the buffer first */
        char b[65536];
        long got = 0;
        ssize_t r;
        while ((r = read(sv[0], b, sizeof b)) > 0) got += r;
        if (write(report[1], &got, sizeof got) != sizeof got) _exit(1);
        _exit(0);
    }
    close(sv[0]);
    long sent = 0;
    int errors = 0;
    for (int i = 0; i < 100; i++) {
        off_t off = 0;
        ssize_t r = sendfile(sv[1], fd, &off, 8192);
        if (r < 0) {
            if (errors++ == 0) printf("sendfile failed: %s\n", strerror(errno));
        } else {
            sent += r;
        }
    }
    close(sv[1]);
    long got = -1;
    if (read(report[0], &got, sizeof got) != sizeof got) return 1;
    wait(NULL);
    printf("errors %d, reader got what was sent: %s\n", errors, got == sent ? "yes" : "no");
    return 0;
}
