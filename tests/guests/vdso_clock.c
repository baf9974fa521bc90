// Time through the vDSO: whether there is one, that CLOCK_MONOTONIC never goes backwards
// over many calls (crossing the one-second pieces of forkvm's time function), that the
// realtime clocks agree with each other, and the realtime second for the test to compare
// with the host's.
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <time.h>

static long long ns(struct timespec t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    struct timespec first, t, last = {0, 0};
    int backwards = 0;
    clock_gettime(CLOCK_MONOTONIC, &first);
    // Spin until more than a second has passed, so at least one new piece starts.
    for (long i = 0; i < n || ns(last) - ns(first) < 1200000000LL; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (ns(t) < ns(last)) backwards++;
        last = t;
    }
    struct timespec r, b;
    struct timeval tv;
    clock_gettime(CLOCK_REALTIME, &r);
    gettimeofday(&tv, NULL);
    time_t s = time(NULL);
    clock_gettime(CLOCK_BOOTTIME, &b);
    int agree = tv.tv_sec - r.tv_sec <= 1 && s - r.tv_sec <= 1 && s >= r.tv_sec;
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    printf("vdso %s\n", getauxval(AT_SYSINFO_EHDR) ? "present" : "absent");
    printf("monotonic backwards: %d\n", backwards);
    printf("realtime clocks agree: %s\n", agree ? "yes" : "no");
    printf("boottime >= monotonic: %s\n", ns(b) >= ns(last) ? "yes" : "no");
    printf("resolution %ld ns\n", (long)res.tv_nsec);
    fprintf(stderr, "realtime %lld\n", (long long)r.tv_sec);
    return 0;
}
