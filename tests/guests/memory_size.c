/* The machine's memory as a program sees it: sysinfo(2), /proc/meminfo and
 * sysconf(_SC_PHYS_PAGES) (what the JVM, glibc and allocators size themselves
 * by) must agree. Prints that they do, and with "print" the size in KiB. */
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct sysinfo si;
    if (sysinfo(&si) != 0) {
        perror("sysinfo");
        return 1;
    }
    unsigned long long total = (unsigned long long)si.totalram * si.mem_unit;
    unsigned long long free = (unsigned long long)si.freeram * si.mem_unit;
    unsigned long long pages = (unsigned long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    unsigned long long meminfo = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &meminfo) == 1)
            break;
    printf("sysinfo total is MemTotal: %s\n", total / 1024 == meminfo ? "yes" : "no");
    printf("sysconf pages are MemTotal: %s\n", pages / 1024 == meminfo ? "yes" : "no");
    printf("free within total: %s\n", free <= total ? "yes" : "no");
    if (argc > 1 && strcmp(argv[1], "print") == 0)
        printf("MemTotal %llu kB\n", meminfo);
    return 0;
}
