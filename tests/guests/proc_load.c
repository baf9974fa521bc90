/* /proc/uptime and /proc/loadavg exist and parse as on Linux (they were
 * ENOENT: uptime(1) failed, glibc's getloadavg returned -1), and are listed
 * in /proc. */
#define _GNU_SOURCE
#include "common.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    double up = -1, idle = -1;
    FILE *f = fopen("/proc/uptime", "r");
    printf("uptime opens: %d\n", f != NULL);
    if (f) {
        printf("uptime fields: %d\n", fscanf(f, "%lf %lf", &up, &idle));
        printf("uptime sane: %d\n", up >= 0 && idle >= 0);
        fclose(f);
    }
    double l[3];
    int running = -1, total = -1, last = -1;
    f = fopen("/proc/loadavg", "r");
    printf("loadavg opens: %d\n", f != NULL);
    if (f) {
        int n = fscanf(f, "%lf %lf %lf %d/%d %d", &l[0], &l[1], &l[2], &running, &total, &last);
        printf("loadavg fields: %d\n", n);
        printf("loadavg sane: %d\n", l[0] >= 0 && running >= 1 && total >= running && last > 0);
        fclose(f);
    }
    printf("getloadavg: %d\n", getloadavg(l, 3));
    DIR *d = opendir("/proc");
    int seen = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        seen += !strcmp(e->d_name, "uptime") + !strcmp(e->d_name, "loadavg");
    printf("listed: %d\n", seen);
    return 0;
}
