/* A minimal cat: copies each FILE (or stdin when none) to stdout. On an error prints
 * "cat: FILE: -ENAME" to stderr, carries on, and exits 1 at the end. */
#include "common.h"

#include <fcntl.h>
#include <unistd.h>

static int copy(int fd)
{
    static char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(1, buf + off, (size_t)(n - off));
            if (w < 0)
                return -1;
            off += w;
        }
    }
}

int main(int argc, char **argv)
{
    int status = 0;
    if (argc < 2)
        return copy(0) == 0 ? 0 : 1;
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0 || copy(fd) != 0) {
            fprintf(stderr, "cat: %s: ", argv[i]);
            print_errno(stderr, errno);
            fprintf(stderr, "\n");
            status = 1;
        }
        if (fd >= 0)
            close(fd);
    }
    return status;
}
