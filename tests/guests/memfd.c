/* memfd_create: flags, fstat, read/write, ftruncate, MAP_SHARED and
 * MAP_PRIVATE mappings, seals, and its /proc/self/fd link. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x1
#define F_SEAL_SHRINK 0x2
#define F_SEAL_GROW 0x4
#define F_SEAL_WRITE 0x8
#endif

static int mfd(const char *name, unsigned flags) { return (int)syscall(SYS_memfd_create, name, flags); }

static void say(const char *what, long r) {
    if (r < 0) { printf("%s: ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%s: %ld\n", what, r);
}

int main(void) {
    int fd = mfd("test", 1 /* MFD_CLOEXEC */ | 2 /* MFD_ALLOW_SEALING */);
    say("memfd_create", fd >= 0 ? 0 : -1);
    say("F_GETFD", fcntl(fd, F_GETFD));
    say("F_GETFL accmode", fcntl(fd, F_GETFL) & O_ACCMODE);
    struct stat st;
    say("fstat", fstat(fd, &st));
    printf("reg %d size %ld nlink %ld mode %o\n", S_ISREG(st.st_mode), (long)st.st_size,
           (long)st.st_nlink, st.st_mode & 07777);
    char link[256] = {0}, want[64];
    snprintf(want, sizeof want, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(want, link, sizeof link - 1);
    printf("link: %s\n", n > 0 ? link : "(none)");

    say("write", write(fd, "hello memfd", 11));
    char buf[64] = {0};
    say("pread", pread(fd, buf, sizeof buf, 6));
    printf("read: %s\n", buf);
    say("ftruncate", ftruncate(fd, 8192));
    fstat(fd, &st);
    printf("size %ld\n", (long)st.st_size);

    char *shared = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *priv = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (shared == MAP_FAILED || priv == MAP_FAILED) { perror("mmap"); return 1; }
    printf("mapped: %.5s %.5s\n", shared, priv);
    memcpy(shared + 4096, "via map", 7);
    memset(buf, 0, sizeof buf);
    pread(fd, buf, 7, 4096);
    printf("shared write seen by read: %s\n", buf);
    memcpy(priv, "PRIVATE", 7);
    memset(buf, 0, sizeof buf);
    pread(fd, buf, 7, 0);
    printf("private write kept private: %s / %.7s\n", buf, priv);
    pwrite(fd, "again", 5, 100);
    printf("write seen by shared map: %.5s\n", shared + 100);

    say("F_GET_SEALS", fcntl(fd, F_GET_SEALS));
    say("F_ADD_SEALS shrink", fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK));
    say("ftruncate smaller", ftruncate(fd, 4096));
    say("ftruncate larger", ftruncate(fd, 16384));
    say("F_ADD_SEALS write, mapped shared", fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
    munmap(shared, 8192);
    munmap(priv, 8192);
    say("F_ADD_SEALS write", fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
    say("write, sealed", write(fd, "x", 1));
    say("mmap shared writable, sealed",
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED ? -1 : 0);
    say("F_ADD_SEALS seal", fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL));
    say("F_ADD_SEALS grow, sealed", fcntl(fd, F_ADD_SEALS, F_SEAL_GROW));
    say("F_GET_SEALS", fcntl(fd, F_GET_SEALS));
    memset(buf, 0, sizeof buf);
    say("pread sealed", pread(fd, buf, 5, 0));
    printf("read: %s\n", buf);

    /* Without MFD_ALLOW_SEALING: F_SEAL_SEAL from the start. */
    int plain = mfd("plain", 0);
    say("F_GETFD plain", fcntl(plain, F_GETFD));
    say("F_GET_SEALS plain", fcntl(plain, F_GET_SEALS));
    say("F_ADD_SEALS plain", fcntl(plain, F_ADD_SEALS, F_SEAL_WRITE));
    /* Reopened through its link, for reading and writing. */
    snprintf(want, sizeof want, "/proc/self/fd/%d", plain);
    int again = open(want, O_RDWR);
    say("reopen", again >= 0 ? 0 : -1);
    say("write reopened", write(again, "abc", 3));
    memset(buf, 0, sizeof buf);
    say("pread plain", pread(plain, buf, 3, 0));
    printf("read: %s\n", buf);

    /* Bad arguments. */
    say("bad flags", mfd("x", 0x100));
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    say("long name", mfd(longname, 0));
    longname[249] = 0;
    int ok = mfd(longname, 0);
    say("249-byte name", ok >= 0 ? 0 : -1);
    say("bad pointer", mfd((const char *)8, 0));
    say("F_GET_SEALS on a pipe", ({ int p[2]; pipe(p); fcntl(p[0], F_GET_SEALS); }));
    return 0;
}
