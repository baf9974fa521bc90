/* Two things a program cannot check for itself:
 * - fcntl(F_SETFL) turning O_APPEND off and on changes where writes land
 *   (forkvm changed the flag F_GETFL reports but kept appending, and then
 *   overwrote the start of the file);
 * - the CPU-time clocks never go backwards, whichever way the calls around
 *   them are answered (the poller answered with its own thread's time). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void show(int fd, const char *when) {
    char buf[32] = {0};
    pread(fd, buf, sizeof buf - 1, 0);
    printf("%s: %s\n", when, buf);
}

static double cpu(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/append", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0 || write(fd, "0123", 4) != 4) return 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_APPEND);
    lseek(fd, 0, SEEK_SET);
    if (write(fd, "Q", 1) != 1) return 1;
    show(fd, "O_APPEND off, write at 0");
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_APPEND);
    lseek(fd, 0, SEEK_SET);
    if (write(fd, "Z", 1) != 1) return 1;
    show(fd, "O_APPEND on, write at 0");

    clockid_t clocks[2] = {CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID};
    for (int c = 0; c < 2; c++) {
        int back = 0;
        double prev = cpu(clocks[c]);
        for (int k = 0; k < 40; k++) {
            volatile double x = 0;
            for (long i = 0; i < 2000000; i++) x += i;
            struct stat st;
            fstat(fd, &st); /* a call the host's poller may answer */
            double t = cpu(clocks[c]);
            back += t < prev;
            prev = t;
        }
        printf("cpu clock %d went backwards %d times\n", c, back);
    }
    return 0;
}
