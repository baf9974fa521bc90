/* /proc/self/cmdline holds the argument strings, each ending in a NUL
 * (Go's os tests copy it; ps and psutil read it), and reads them from the
 * program's memory: an argv[0] rewritten in place shows. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void show(const char *when) {
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY);
    if (fd < 0) {
        printf("%s: open failed\n", when);
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    printf("%s: %zd bytes:", when, n);
    for (ssize_t i = 0; i < n; i++)
        putchar(buf[i] ? buf[i] : '|');
    putchar('\n');
}

int main(int argc, char **argv) {
    (void)argc;
    /* argv[0] differs between the native and the forkvm run: show it as its length. */
    size_t len = strlen(argv[0]);
    memset(argv[0], 'p', len);
    show("after rewriting argv[0]");
    return 0;
}
