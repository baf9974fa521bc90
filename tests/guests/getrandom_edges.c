/* getrandom(2) at the edges, for comparing forkvm's in-guest answer (RDRAND
 * in the syscall dispatcher), its host answer (--syscalls exit) and Linux:
 * sizes around the word size and the in-guest limit, flags, and buffers the
 * call must refuse with EFAULT. Prints only what is the same on every run. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long grnd(void *buf, size_t len, unsigned flags) {
    long r = syscall(SYS_getrandom, buf, len, flags);
    return r < 0 ? -errno : r;
}

int main(void) {
    static unsigned char buf[2048];
    size_t sizes[] = {0, 1, 7, 8, 9, 16, 255, 256, 257, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        memset(buf, 0xa5, sizeof buf);
        long r = grnd(buf, n, 0);
        int canary = 1;
        for (size_t j = n; j < n + 64; j++) canary &= buf[j] == 0xa5;
        size_t zeros = 0;
        for (size_t j = 0; j < n; j++) zeros += buf[j] == 0;
        /* 16+ random bytes all 0xa5 or mostly zero would mean nothing was written. */
        int changed = n < 16 || memcmp(buf, buf + 1024, n) != 0;
        printf("len %zu -> %ld, bytes past the end untouched: %s, looks random: %s\n", n, r,
               canary ? "yes" : "no", changed && zeros < n / 2 + 4 ? "yes" : "no");
    }
    unsigned char a[32], b[32];
    grnd(a, sizeof a, 0);
    grnd(b, sizeof b, 0);
    printf("two calls differ: %s\n", memcmp(a, b, sizeof a) ? "yes" : "no");
    printf("GRND_NONBLOCK -> %ld\n", grnd(a, 16, 1));
    printf("GRND_RANDOM -> %ld\n", grnd(a, 16, 2));
    printf("GRND_INSECURE -> %ld\n", grnd(a, 16, 4));
    printf("unknown flag -> %ld\n", grnd(a, 16, 8));
    printf("RANDOM|INSECURE -> %ld\n", grnd(a, 16, 6));
    printf("NULL -> %ld\n", grnd(NULL, 8, 0));
    printf("low page -> %ld\n", grnd((void *)0x1000, 8, 0));
    printf("far address -> %ld\n", grnd((void *)0x7ff000000000, 8, 0));
    printf("len 0 at NULL -> %ld\n", grnd(NULL, 0, 0));
    return 0;
}
