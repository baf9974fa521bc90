/* isolation: a `forkvm serve` test guest that changes files, globals and
 * descriptors, and checks that nothing of an earlier request is left.
 * Built by crates/forkvm-cli/tests/isolation.rs and scripts/soak.sh (with
 * the flags of examples/build.sh); used by both.
 *
 * argv: isolation [DIR]   DIR: a directory under --allow-write. Before it
 *       says ready, the program writes DIR/init.txt (its initialisation,
 *       which writes through to the host).
 *       isolation --mutate DIR   plain `forkvm run`: the same changes as
 *       op=mutate, then exit 0 (they write through to the host).
 *
 * Query parameters:
 *   op=list      DIR's sorted entries ("name size" lines), then the text of
 *                DIR/data.txt after "data=".
 *   op=mutate    in DIR: create created.txt, append to data.txt, rename
 *                old.txt to moved.txt, delete victim.txt, mkdir newdir,
 *                write newdir/f; then answer as op=list.
 *   op=normal    check for leftovers (500 "leak: ..." if any), then leave
 *                some: a global, an open fd, /tmp/leftover, and with DIR,
 *                DIR/leftover (soak: every request finds a clean state).
 *   op=crash     leave leftovers, then write through a null pointer.
 *   op=spin      leave leftovers, then loop forever (a timeout).
 *   op=big       leave leftovers; answer with the body's length and a
 *                256 KiB body.
 *   persist=P    with op=mutate: also append one line to P/log.txt (a
 *                --persist directory).
 */
#include "forkvm.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;
static int dirty;
static int first_free_fd = -1;

static long param(const struct forkvm_request *r, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name), i = 0;
    while (i <= r->query_len) {
        size_t e = i;
        while (e < r->query_len && r->query[e] != '&') e++;
        if (e - i > n && r->query[i + n] == '=' && memcmp(r->query + i, name, n) == 0) {
            size_t v = e - i - n - 1;
            if (v >= cap) v = cap - 1;
            memcpy(out, r->query + i + n + 1, v);
            out[v] = '\0';
            return (long)v;
        }
        i = e + 1;
    }
    return -1;
}

static char out[65536];
static size_t out_len;

static void say(const char *fmt, const char *a, long b)
{
    if (out_len >= sizeof out) return;
    int n = snprintf(out + out_len, sizeof out - out_len, fmt, a, b);
    if (n > 0) out_len += (size_t)n;
    if (out_len > sizeof out) out_len = sizeof out;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list(const char *d)
{
    char *names[256];
    int n = 0;
    DIR *dp = opendir(d);
    if (!dp) {
        say("opendir %s failed %ld\n", d, 0);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dp)) && n < 256) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
    }
    closedir(dp);
    qsort(names, (size_t)n, sizeof names[0], cmp);
    for (int i = 0; i < n; i++) {
        char p[512];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        say("%s %ld\n", names[i], stat(p, &st) == 0 ? (long)st.st_size : -1L);
        free(names[i]);
    }
    char p[512], buf[256];
    snprintf(p, sizeof p, "%s/data.txt", d);
    int fd = open(p, O_RDONLY);
    long got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    buf[got > 0 ? got : 0] = '\0';
    say("data=%s%ld\n", buf, got);
}

static int write_file(const char *path, int flags, const char *text)
{
    int fd = open(path, flags | O_WRONLY, 0644);
    if (fd < 0) return -1;
    long n = write(fd, text, strlen(text));
    close(fd);
    return n == (long)strlen(text) ? 0 : -1;
}

static int mutate(const char *d)
{
    char a[512], b[512];
    int bad = 0;
    snprintf(a, sizeof a, "%s/created.txt", d);
    bad |= write_file(a, O_CREAT | O_TRUNC, "created\n");
    snprintf(a, sizeof a, "%s/data.txt", d);
    bad |= write_file(a, O_APPEND, "appended\n");
    snprintf(a, sizeof a, "%s/old.txt", d);
    snprintf(b, sizeof b, "%s/moved.txt", d);
    bad |= rename(a, b);
    snprintf(a, sizeof a, "%s/victim.txt", d);
    bad |= unlink(a);
    snprintf(a, sizeof a, "%s/newdir", d);
    bad |= mkdir(a, 0755);
    snprintf(a, sizeof a, "%s/newdir/f", d);
    bad |= write_file(a, O_CREAT, "f\n");
    return bad;
}

/* Leaves state behind: a global, an open descriptor, files. */
static void leave_leftovers(void)
{
    dirty = 1;
    if (open("/dev/null", O_RDONLY) < 0) dirty = 2;
    write_file("/tmp/leftover", O_CREAT, "x");
    if (dir) {
        char p[512];
        snprintf(p, sizeof p, "%s/leftover", dir);
        write_file(p, O_CREAT, "x");
    }
}

/* Empty string when nothing of an earlier request is left, else what is. */
static const char *leftovers(void)
{
    if (dirty) return "global";
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) close(fd);
    if (fd != first_free_fd) return "fd";
    if (access("/tmp/leftover", F_OK) == 0) return "tmp file";
    if (dir) {
        char p[512];
        snprintf(p, sizeof p, "%s/leftover", dir);
        if (access(p, F_OK) == 0) return "file";
    }
    return "";
}

static void handle(const struct forkvm_request *r)
{
    char op[32] = "list", v[256];
    int status = 200;
    out_len = 0;
    param(r, "op", op, sizeof op);
    if (!strcmp(op, "list")) {
        if (dir) list(dir);
    } else if (!strcmp(op, "mutate")) {
        if (!dir || mutate(dir)) status = 500;
        if (param(r, "persist", v, sizeof v) > 0) {
            char p[512];
            snprintf(p, sizeof p, "%s/log.txt", v);
            if (write_file(p, O_CREAT | O_APPEND, "request\n")) status = 500;
        }
        if (dir) list(dir);
    } else {
        const char *left = leftovers();
        if (*left) {
            say("leak: %s%ld\n", left, 0);
            forkvm_respond(500, "", 0, out, out_len);
            return;
        }
        leave_leftovers();
        if (!strcmp(op, "crash")) {
            *(volatile int *)0 = 1;
        } else if (!strcmp(op, "spin")) {
            for (;;) __asm__ volatile("" ::: "memory");
        } else if (!strcmp(op, "big")) {
            static char big[256 * 1024];
            memset(big, 'b', sizeof big);
            say("body_len=%s%ld\n", "", (long)r->body_len);
            memcpy(big, out, out_len);
            forkvm_respond(200, "", 0, big, sizeof big);
            return;
        }
        say("ok%s%ld\n", "", 0);
    }
    forkvm_respond(status, "Content-Type: text/plain", 24, out, out_len);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--mutate")) return mutate(argv[2]) ? 1 : 0;
    if (argc > 1) {
        dir = argv[1];
        char p[512];
        snprintf(p, sizeof p, "%s/init.txt", dir);
        if (write_file(p, O_CREAT | O_TRUNC, "init\n")) return 2;
    }
    first_free_fd = open("/dev/null", O_RDONLY);
    if (first_free_fd >= 0) close(first_free_fd);
    forkvm_serve(handle);
    return 0;
}
