/* Directory descriptors and the working directory follow their directory
 * when it is renamed, as on Linux, in the directory given as argv[1]:
 *  - open("d", O_DIRECTORY), rename d to e: openat, fstatat, mkdirat and
 *    unlinkat with that descriptor act in e;
 *  - chdir into a directory, rename it from inside: getcwd names the new
 *    place and relative paths still work;
 *  - fchdir to a descriptor of a directory renamed since it was opened. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-32s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-32s ok\n", what);
}

static const char *top;

/* The working directory, below the directory given. */
static void where(const char *what) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) { say(what, -1); return; }
    size_t n = strlen(top);
    if (strncmp(cwd, top, n) == 0) printf("%-32s TOP%s\n", what, cwd + n);
    else printf("%-32s %s\n", what, cwd);
}

static int make(int dir, const char *name) {
    int fd = openat(dir, name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int ok = write(fd, "x", 1) == 1;
    close(fd);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) < 0) { perror("chdir"); return 1; }
    static char real[4096];
    if (!getcwd(real, sizeof real)) { perror("getcwd"); return 1; }
    top = real;
    say("mkdir d", mkdir("d", 0755));
    say("make d/f", make(AT_FDCWD, "d/f"));
    int d = open("d", O_RDONLY | O_DIRECTORY);
    say("open d", d);
    int p = open("d", O_PATH | O_DIRECTORY);
    say("open d O_PATH", p);
    say("rename d e", rename("d", "e"));
    int f = openat(d, "f", O_RDONLY);
    say("openat(d, f)", f);
    close(f);
    struct stat st;
    say("fstatat(O_PATH d, f)", fstatat(p, "f", &st, 0));
    say("mkdirat(d, sub)", mkdirat(d, "sub", 0755));
    say("stat e/sub", stat("e/sub", &st));
    say("make (d, g)", make(d, "g"));
    say("unlinkat(d, g)", unlinkat(d, "g", 0));
    say("stat e/g", stat("e/g", &st));
    say("openat(d, ..)", f = openat(d, "..", O_RDONLY | O_DIRECTORY));
    say("fstatat(.., e/f)", fstatat(f, "e/f", &st, 0));
    close(f);

    /* The working directory, renamed from inside. */
    say("chdir e", chdir("e"));
    say("rename ../e ../h", rename("../e", "../h"));
    where("getcwd");
    say("open f", f = open("f", O_RDONLY));
    close(f);
    say("stat ../h/f", stat("../h/f", &st));
    say("make k", make(AT_FDCWD, "k"));
    say("stat ../h/k", stat("../h/k", &st));
    say("chdir ..", chdir(".."));
    where("getcwd");

    /* fchdir to a descriptor whose directory moved. */
    say("rename h m", rename("h", "m"));
    say("fchdir(d)", fchdir(d));
    where("getcwd");
    say("open f", f = open("f", O_RDONLY));
    close(f);
    say("chdir ..", chdir(".."));
    say("unlink m/f", unlink("m/f"));
    say("unlink m/k", unlink("m/k"));
    say("rmdir m/sub", rmdir("m/sub"));
    say("rmdir m", rmdir("m"));
    return 0;
}
