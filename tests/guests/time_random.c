/* Clocks, sleep and randomness; prints only facts that are stable from run to run. */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>

static long long ns(const struct timespec *t)
{
    return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

int main(void)
{
    struct timespec r1, m1, m2, m3;
    int ok_r = clock_gettime(CLOCK_REALTIME, &r1) == 0;
    int ok_m = clock_gettime(CLOCK_MONOTONIC, &m1) == 0;
    printf("clock_gettime ok: %s\n", ok_r && ok_m ? "yes" : "no");
    /* 2020-01-01 < now < 2100-01-01 */
    printf("realtime plausible: %s\n", r1.tv_sec > 1577836800LL && r1.tv_sec < 4102444800LL ? "yes" : "no");

    struct timeval tv;
    int ok_tv = gettimeofday(&tv, NULL) == 0;
    printf("gettimeofday plausible: %s\n",
           ok_tv && tv.tv_sec >= r1.tv_sec - 5 && tv.tv_sec <= r1.tv_sec + 5 && tv.tv_usec >= 0 &&
                   tv.tv_usec < 1000000
               ? "yes"
               : "no");
    time_t t = time(NULL);
    printf("time plausible: %s\n", t >= r1.tv_sec - 5 && t <= r1.tv_sec + 5 ? "yes" : "no");

    clock_gettime(CLOCK_MONOTONIC, &m2);
    printf("monotonic increases: %s\n", ns(&m2) >= ns(&m1) ? "yes" : "no");
    struct timespec req = {0, 10 * 1000 * 1000};
    int ok_sleep = nanosleep(&req, NULL) == 0;
    clock_gettime(CLOCK_MONOTONIC, &m3);
    printf("nanosleep ok: %s\n", ok_sleep ? "yes" : "no");
    printf("slept >= 10ms: %s\n", ns(&m3) - ns(&m2) >= 10 * 1000 * 1000 ? "yes" : "no");

    struct timespec res;
    printf("clock_getres ok: %s\n",
           clock_getres(CLOCK_MONOTONIC, &res) == 0 && res.tv_sec == 0 && res.tv_nsec > 0 ? "yes" : "no");

    unsigned char a[32], b[32], zero[32];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    memset(zero, 0, sizeof zero);
    ssize_t na = getrandom(a, sizeof a, 0);
    ssize_t nb = getrandom(b, sizeof b, 0);
    printf("getrandom returned 32: %s\n", na == 32 && nb == 32 ? "yes" : "no");
    printf("random bytes not all zero: %s\n", memcmp(a, zero, 32) != 0 ? "yes" : "no");
    printf("two draws differ: %s\n", memcmp(a, b, 32) != 0 ? "yes" : "no");
    return 0;
}
