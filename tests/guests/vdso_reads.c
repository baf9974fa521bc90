/* System calls that read from the vDSO work as on Linux: its pages are
 * ordinary readable user memory there. glibc's ldd prints the vDSO's name
 * straight from its string table with writev; forkvm refused such pointers
 * (EFAULT: below its user area), and the "linux-vdso.so.1" line vanished.
 * Writing into it is EFAULT on both (read-only). Prints only what both
 * kernels agree on. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <unistd.h>

int main(void)
{
    const char *vdso = (const char *)getauxval(AT_SYSINFO_EHDR);
    if (!vdso) {
        puts("no vdso");
        return 0;
    }
    int p[2];
    if (pipe(p) != 0) return 1;

    /* write(2) from the vDSO: its ELF magic. */
    ssize_t n = write(p[1], vdso, 4);
    char buf[8] = {0};
    ssize_t m = n > 0 ? read(p[0], buf, sizeof buf) : -1;
    printf("write from the vdso: %zd, read back %zd, magic %s\n", n, m,
           memcmp(buf, "\177ELF", 4) == 0 ? "ok" : "wrong");

    /* writev(2) with one piece from the vDSO, as ld.so's _dl_printf does. */
    struct iovec iov[3] = {{"[", 1}, {(void *)(vdso + 1), 3}, {"]", 1}};
    n = writev(p[1], iov, 3);
    memset(buf, 0, sizeof buf);
    m = n > 0 ? read(p[0], buf, sizeof buf) : -1;
    printf("writev with the vdso: %zd, read back %zd: %.5s\n", n, m, buf);

    /* read(2) into the vDSO: not writable, EFAULT. */
    if (write(p[1], "xyz", 3) != 3) return 1;
    errno = 0;
    n = read(p[0], (void *)vdso, 3);
    printf("read into the vdso: %zd %s\n", n, n < 0 ? strerror(errno) : "");
    return 0;
}
