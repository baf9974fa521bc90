/* Tries to open/stat argv[1..]; under forkvm these live outside every --allow-read root,
 * so each must fail. Natively they succeed. Prints "opened"/"open failed: -ENAME" per path. */
#include "common.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            char c;
            ssize_t n = read(fd, &c, 1);
            printf("%s: opened (read %zd)\n", path, n);
            close(fd);
        } else {
            printf("%s: open failed: ", path);
            print_errno(stdout, errno);
            printf("\n");
        }
        struct stat st;
        if (stat(path, &st) == 0) {
            printf("%s: stat ok\n", path);
        } else {
            printf("%s: stat failed: ", path);
            print_errno(stdout, errno);
            printf("\n");
        }
    }
    return 0;
}
