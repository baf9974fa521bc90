/* A removed working directory and a descriptor of a removed directory act
 * as on Linux, in the directory given as argv[1]: getcwd answers ENOENT
 * (before ERANGE), creating a name in it answers ENOENT even after a
 * directory of the same name was made again, and ".." leads to where it
 * was, and "." is still the directory (it stats with no links and lists
 * empty; forkvm answered ENOENT). node's
 * process.cwd() threw ENOENT natively and gave the old path under forkvm,
 * and names were created in the new directory of the old name. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-34s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-34s ok\n", what);
}

static char top[4096];

/* getcwd(2) itself (not libc's fallbacks), with a buffer of `size`. */
static void cwd(const char *what, size_t size) {
    char buf[4096];
    long r = syscall(SYS_getcwd, buf, size);
    if (r < 0) { say(what, r); return; }
    size_t n = strlen(top);
    printf("%-34s %s\n", what, strncmp(buf, top, n) == 0 ? buf + n : buf);
}

static char *at(const char *name) {
    static char path[2][4200];
    static int i;
    i ^= 1;
    snprintf(path[i], sizeof path[i], "%s/%s", top, name);
    return path[i];
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) < 0 || !getcwd(top, sizeof top)) { perror("setup"); return 1; }
    say("mkdir d", mkdir("d", 0755));
    say("chdir d", chdir("d"));
    cwd("getcwd in d", sizeof top);
    say("rmdir d", rmdir(at("d")));
    cwd("getcwd removed", sizeof top);
    cwd("getcwd removed, 1-byte buffer", 1);
    struct stat st;
    say("stat . removed", stat(".", &st));
    printf("%-34s %lu\n", "links of . removed", (unsigned long)st.st_nlink);
    say("stat ./ removed", stat("./", &st));
    int dot = open(".", O_RDONLY | O_DIRECTORY);
    say("open . removed", dot);
    if (dot >= 0) {
        char buf[1024];
        long n = syscall(SYS_getdents64, dot, buf, sizeof buf);
        printf("%-34s %ld\n", "listing of . removed (bytes)", n);
        close(dot);
    }
    say("open f O_CREAT", open("f", O_CREAT | O_WRONLY, 0644));
    say("mkdir sub", mkdir("sub", 0755));
    say("open ../up O_CREAT", open("../up", O_CREAT | O_WRONLY, 0644));
    say("stat ./../up", stat("./../up", &st));
    say("stat up", stat(at("up"), &st));
    say("mkdir d again", mkdir(at("d"), 0755));
    say("open f O_CREAT, d made again", open("f", O_CREAT | O_WRONLY, 0644));
    say("stat new d/f", stat(at("d/f"), &st));
    cwd("getcwd, d made again", sizeof top);
    say("chdir top", chdir(top));
    cwd("getcwd top", sizeof top);

    /* The working directory replaced by a rename over it. */
    say("mkdir e", mkdir("e", 0755));
    say("mkdir e2", mkdir("e2", 0755));
    say("chdir e", chdir("e"));
    say("rename e2 over e", rename(at("e2"), at("e")));
    cwd("getcwd renamed over", sizeof top);
    say("open g O_CREAT", open("g", O_CREAT | O_WRONLY, 0644));
    say("stat e/g", stat(at("e/g"), &st));
    say("chdir top", chdir(top));

    /* A directory descriptor of a removed directory. */
    say("mkdir h", mkdir("h", 0755));
    int h = open("h", O_RDONLY | O_DIRECTORY);
    say("open h", h);
    say("rmdir h", rmdir("h"));
    say("mkdir h again", mkdir("h", 0755));
    say("openat h x O_CREAT", openat(h, "x", O_CREAT | O_WRONLY, 0644));
    say("mkdirat h y", mkdirat(h, "y", 0755));
    say("stat h/x", stat("h/x", &st));
    say("fstatat h .", fstatat(h, ".", &st, 0));
    printf("%-34s %lu\n", "links of h", (unsigned long)st.st_nlink);
    say("fchdir h", fchdir(h));
    cwd("getcwd after fchdir", sizeof top);

    /* Leave the directory as it was, for the next run. */
    say("chdir top", chdir(top));
    say("clean up", unlink("up") | rmdir("d") | rmdir("e") | rmdir("h"));
    return 0;
}
