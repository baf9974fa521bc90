/* open(O_TMPFILE): an unnamed file in a directory (/dev/shm), read and
 * written; its link names it "DIR/#INODE (deleted)"; O_EXCL; bad uses. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%s: %ld\n", what, r);
}

int main(void) {
    char dir[64];
    strcpy(dir, "/dev/shm/tmpfile_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    umask(022);
    int fd = open(dir, O_TMPFILE | O_RDWR, 0640);
    say("O_TMPFILE", fd >= 0 ? 0 : -1);
    struct stat st;
    say("fstat", fstat(fd, &st));
    printf("reg %d nlink %ld mode %o size %ld\n", S_ISREG(st.st_mode), (long)st.st_nlink,
           st.st_mode & 07777, (long)st.st_size);
    say("write", write(fd, "unnamed data", 12));
    char buf[64] = {0};
    say("pread", pread(fd, buf, sizeof buf, 0));
    printf("read: %s\n", buf);
    char link[256] = {0}, want[256], at[64];
    snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(at, link, sizeof link - 1);
    snprintf(want, sizeof want, "%s/#%lu (deleted)", dir, (unsigned long)st.st_ino);
    printf("link is DIR/#INODE (deleted): %d\n", n > 0 && strcmp(link, want) == 0);
    /* Nothing shows in the directory. */
    int entries = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    char dents[1024];
    long got = syscall(217, dfd, dents, sizeof dents);
    for (long off = 0; off < got;) {
        unsigned short reclen = *(unsigned short *)(dents + off + 16);
        const char *name = dents + off + 19;
        if (strcmp(name, ".") && strcmp(name, "..")) entries++;
        off += reclen;
    }
    printf("entries: %d\n", entries);
    close(dfd);
    close(fd);

    int ex = open(dir, O_TMPFILE | O_WRONLY | O_EXCL, 0600);
    say("O_TMPFILE|O_EXCL", ex >= 0 ? 0 : -1);
    say("write excl", write(ex, "x", 1));
    say("read write-only", read(ex, buf, 1));
    close(ex);

    say("O_TMPFILE read-only", open(dir, O_TMPFILE | O_RDONLY, 0600));
    say("O_TMPFILE|O_CREAT", open(dir, O_TMPFILE | O_CREAT | O_RDWR, 0600));
    char file[96];
    snprintf(file, sizeof file, "%s/f", dir);
    close(open(file, O_CREAT | O_WRONLY, 0600));
    say("O_TMPFILE on a file", open(file, O_TMPFILE | O_RDWR, 0600));
    snprintf(file, sizeof file, "%s/missing", dir);
    say("O_TMPFILE on a missing dir", open(file, O_TMPFILE | O_RDWR, 0600));
    snprintf(file, sizeof file, "%s/f", dir);
    unlink(file);
    say("rmdir", rmdir(dir));
    return 0;
}
