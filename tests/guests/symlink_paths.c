/* Symlinks in the paths of calls that create, remove and change names, as
 * Linux resolves them, in the directory given as argv[1]:
 *  - open(O_CREAT) through a dangling link creates its target (next to the
 *    link if relative), but O_EXCL is EEXIST, O_NOFOLLOW ELOOP, a missing
 *    directory ENOENT and a target ending in '/' EISDIR;
 *  - ".." after a link leaves the link's target, not the link's directory:
 *    with a -> b/c, "a/../x" is b/x for every call taking a path;
 *  - an empty name is ENOENT.
 * Prints each result and then the tree, which must be the same natively. */
#define _GNU_SOURCE
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-40s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-40s ok\n", what);
}

static void try_open(const char *path, int flags) {
    int fd = open(path, flags, 0666);
    char what[128];
    snprintf(what, sizeof what, "open(%s, %#x)", path, flags);
    if (fd >= 0) {
        if (write(fd, "x", 1) != 1 && errno != EBADF) say("  write", -1);
        close(fd);
    }
    say(what, fd);
}

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names, types, modes and sizes under `dir`, sorted, recursively. */
static void tree(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) { say(dir, -1); return; }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    for (int i = 0; i < n; i++) {
        char path[1024], link[256] = "";
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (lstat(path, &st)) { say(path, -1); continue; }
        char ty = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : S_ISFIFO(st.st_mode) ? 'p' : S_ISREG(st.st_mode) ? 'f' : '?';
        if (ty == 'l') {
            ssize_t k = readlink(path, link, sizeof link - 1);
            link[k > 0 ? k : 0] = 0;
        }
        printf("%*s%s %c %o %ld%s%s\n", depth * 2, "", names[i], ty, st.st_mode & 07777,
               ty == 'f' ? (long)st.st_size : 0L, ty == 'l' ? " -> " : "", link);
        if (ty == 'd') tree(path, depth + 1);
        free(names[i]);
    }
}

/* Removes what `tree` lists (the native and forkvm runs share the directory). */
static int rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int r = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st)) { r = -1; continue; }
        if (S_ISDIR(st.st_mode)) r |= rm_tree(path) | rmdir(path);
        else r |= unlink(path);
    }
    closedir(d);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1])) { perror("chdir"); return 1; }
    umask(022);

    printf("== dangling links and O_CREAT\n");
    mkdir("dang", 0755);
    mkdir("dang/sub", 0755);
    symlink("target", "dang/link");
    try_open("dang/link", O_WRONLY | O_CREAT | O_TRUNC);
    try_open("dang/link", O_WRONLY | O_TRUNC); /* now it exists */
    symlink("target2", "dang/excl");
    try_open("dang/excl", O_WRONLY | O_CREAT | O_EXCL);
    symlink("target3", "dang/nofollow");
    try_open("dang/nofollow", O_WRONLY | O_CREAT | O_NOFOLLOW);
    symlink("nodir/target", "dang/missing_dir");
    try_open("dang/missing_dir", O_WRONLY | O_CREAT);
    symlink("t4/", "dang/slash");
    try_open("dang/slash", O_WRONLY | O_CREAT);
    try_open("dang/slash", O_WRONLY);
    symlink("sub/../sub/t5", "dang/deep");
    try_open("dang/deep", O_RDWR | O_CREAT);
    symlink("deep", "dang/chain"); /* chain -> deep -> sub/../sub/t5, now existing */
    try_open("dang/chain", O_WRONLY | O_APPEND);
    symlink("chain2", "dang/chain1");
    symlink("t6", "dang/chain2");
    try_open("dang/chain1", O_WRONLY | O_CREAT);
    symlink("../dang/t7", "dang/sub/up");
    try_open("dang/sub/up", O_WRONLY | O_CREAT);
    symlink("../t7", "dang/sub/up2");
    try_open("dang/sub/up2", O_WRONLY | O_CREAT);
    symlink("self", "dang/self");
    try_open("dang/self", O_WRONLY | O_CREAT);
    {
        char abs[1024];
        snprintf(abs, sizeof abs, "%s/dang/t8", argv[1]);
        symlink(abs, "dang/absolute");
        try_open("dang/absolute", O_WRONLY | O_CREAT);
    }
    int dfd = open("dang", O_RDONLY | O_DIRECTORY);
    symlink("t9", "dang/at");
    int fd = openat(dfd, "at", O_WRONLY | O_CREAT, 0600);
    say("openat(dang, at, O_CREAT)", fd);
    if (fd >= 0) close(fd);
    try_open("dang/.", O_WRONLY);
    try_open("dang/..", O_RDONLY | O_CREAT);
    try_open("dang/target/.", O_WRONLY);

    printf("== .. after a link (a -> b/c)\n");
    mkdir("dd", 0755);
    mkdir("dd/b", 0755);
    mkdir("dd/b/c", 0755);
    symlink("b/c", "dd/a");
    symlink("a/..", "dd/a2"); /* dd/a2 is dd/b */
    say("mkdir(a/../newdir)", mkdir("dd/a/../newdir", 0755));
    say("mkdir(a/../newdir2/)", mkdir("dd/a/../newdir2/", 0700));
    say("mkdir(a/../newdir) again", mkdir("dd/a/../newdir", 0755));
    say("mkdir(a/..)", mkdir("dd/a/..", 0755));
    say("mkdir(a2/x)", mkdir("dd/a2/x", 0755));
    say("mkdir(a/../nodir/x)", mkdir("dd/a/../nodir/x", 0755));
    say("rmdir(a/../newdir2)", rmdir("dd/a/../newdir2"));
    fd = open("dd/a/../f", O_WRONLY | O_CREAT, 0644);
    say("open(a/../f, O_CREAT)", fd);
    if (fd >= 0) close(fd);
    say("rename(a/../f, a/../g)", rename("dd/a/../f", "dd/a/../g"));
    say("link(a/../g, a/../h)", link("dd/a/../g", "dd/a/../h"));
    say("symlink(g, a/../s)", symlink("g", "dd/a/../s"));
    say("mknod(a/../fifo)", mknod("dd/a/../fifo", S_IFIFO | 0640, 0));
    say("mkfifo(a/../fifo) again", mkfifo("dd/a/../fifo", 0640));
    say("chmod(a/../g, 0600)", chmod("dd/a/../g", 0600));
    say("truncate(a/../g, 5)", truncate("dd/a/../g", 5));
    {
        struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
        say("utimensat(a/../g)", utimensat(AT_FDCWD, "dd/a/../g", ts, 0));
        struct stat st;
        if (stat("dd/b/g", &st) == 0) printf("  b/g mtime %ld size %ld\n", (long)st.st_mtime, (long)st.st_size);
    }
    say("unlink(a/../h)", unlink("dd/a/../h"));
    say("unlink(a/../missing)", unlink("dd/a/../missing"));
    say("unlink(a/..)", unlink("dd/a/.."));
    say("rename(a/../g, a2/../top)", rename("dd/a/../g", "dd/a2/../top"));
    int ddfd = open("dd", O_RDONLY | O_DIRECTORY);
    say("mkdirat(dd, a/../at)", mkdirat(ddfd, "a/../at", 0755));
    say("unlinkat(dd, a/../s)", unlinkat(ddfd, "a/../s", 0));
    say("symlinkat(x, dd, a/../sl)", symlinkat("x", ddfd, "a/../sl"));
    say("renameat(dd, a/../sl, dd, a/c/../sl2)", renameat(ddfd, "a/../sl", ddfd, "a/c/../sl2"));
    /* A file as a directory in the middle: ENOTDIR. */
    say("mkdir(top/../x)", mkdir("dd/top/../x", 0755));
    /* A missing directory before "..": ENOENT, never the name after it. */
    say("mkdir(missing/../x)", mkdir("dd/missing/../x", 0755));
    say("unlink(missing/../top)", unlink("dd/missing/../top"));
    /* An empty name names nothing: ENOENT, for every call that takes one. */
    say("unlink(\"\")", unlink(""));
    say("rmdir(\"\")", rmdir(""));
    say("mkdir(\"\")", mkdir("", 0755));
    say("rename(\"\", x)", rename("", "x"));
    say("rename(dd, \"\")", rename("dd", ""));
    say("symlink(a, \"\")", symlink("a", ""));
    say("symlink(\"\", x)", symlink("", "x"));
    say("mkfifo(\"\")", mkfifo("", 0644));
    say("link(dd, \"\")", link("dd", ""));

    printf("== tree\n");
    tree(".", 0);
    close(dfd);
    close(ddfd);
    say("clean up", rm_tree("."));
    return 0;
}
