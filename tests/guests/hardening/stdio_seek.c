// Tries to rewrite the file its stdout and stderr share with the host:
// seeks both back to 0 and far past the end, writes at offset 0 with
// pwrite and pwritev, truncates, then writes one ordinary line to each.
// Prints what each attempt returned (an errno name), so the test can check
// both the answers and that the host's file holds only what came before,
// these lines, and what comes after.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static char line[512];
static size_t used;

static void note(const char *what, long ret) {
    const char *name = ret >= 0 ? "ok" : errno == ESPIPE ? "ESPIPE" : errno == EINVAL ? "EINVAL" : "other";
    used += (size_t)snprintf(line + used, sizeof line - used, "%s=%s ", what, name);
}

int main(void) {
    note("lseek1", (long)lseek(1, 0, SEEK_SET));
    note("lseek2", (long)lseek(2, 1L << 40, SEEK_SET));
    note("tell1", (long)lseek(1, 0, SEEK_CUR));
    note("pwrite1", (long)pwrite(1, "XXXXXXXX", 8, 0));
    struct iovec v = {.iov_base = "YYYYYYYY", .iov_len = 8};
    note("pwritev2", (long)pwritev(2, &v, 1, 0));
    note("ftruncate1", (long)ftruncate(1, 0));
    line[used++] = '\n';
    if (write(1, line, used) != (ssize_t)used) return 1;
    static const char err[] = "guest: stderr line\n";
    if (write(2, err, sizeof err - 1) != (ssize_t)(sizeof err - 1)) return 1;
    return 0;
}
