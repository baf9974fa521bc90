/* SysV shared memory as PostgreSQL and other servers use it: a segment
 * created, attached, shared with forked children (their writes seen by the
 * parent), shm_nattch counting attaches, forks, detaches, munmap, exec and
 * exit; keys with IPC_CREAT/IPC_EXCL; a removed segment living until its
 * last detach; permissions for an unprivileged user; the errnos Linux
 * gives. Natively the test runs as root: it takes a fresh IPC namespace
 * and drops to uid 1000, the guest's uid, so that both runs start from no
 * segment and judge permissions alike. Usage: sysv_shm DIR
 * (or sysv_shm DIR nattch ID, the exec'd child: prints ID's shm_nattch). */
#define _GNU_SOURCE
#include "common.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0)
        printf("%s: -%s\n", what, errno_name(errno) ? errno_name(errno) : "E?");
    else
        printf("%s: ok\n", what);
}

static long nattch(int id) {
    struct shmid_ds ds;
    if (shmctl(id, IPC_STAT, &ds) < 0)
        return -errno;
    return (long)ds.shm_nattch;
}

static void wait_child(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        printf("child failed (status %#x)\n", st);
}

static int fork_and_exec(const char *self, const char *dir, int id) {
    char ids[16];
    snprintf(ids, sizeof ids, "%d", id);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, dir, "nattch", ids, (char *)NULL);
        _exit(99);
    }
    wait_child(pid);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[2], "nattch") == 0) {
        printf("after exec the child holds no attach: nattch %ld\n", nattch(atoi(argv[3])));
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: sysv_shm DIR\n");
        return 1;
    }
    if (geteuid() == 0) {
        if (unshare(CLONE_NEWIPC) < 0 || setgid(1000) < 0 || setuid(1000) < 0) {
            perror("fresh IPC namespace as uid 1000");
            return 1;
        }
    }
    setvbuf(stdout, NULL, _IONBF, 0);

    /* A private segment: created, stat'ed, attached. */
    int id = shmget(IPC_PRIVATE, 10000, IPC_CREAT | 0600);
    say("shmget IPC_PRIVATE", id);
    struct shmid_ds ds;
    memset(&ds, 0xff, sizeof ds);
    say("IPC_STAT", shmctl(id, IPC_STAT, &ds));
    printf("segsz %zu nattch %lu mode %o key %d cuid-is-me %d uid-is-me %d cpid-is-me %d lpid %d atime %ld\n",
           (size_t)ds.shm_segsz, (unsigned long)ds.shm_nattch, (unsigned)ds.shm_perm.mode,
           (int)ds.shm_perm.__key, ds.shm_perm.cuid == getuid(), ds.shm_perm.uid == getuid(),
           ds.shm_cpid == getpid(), (int)ds.shm_lpid, (long)ds.shm_atime);
    char *p = shmat(id, NULL, 0);
    say("shmat", p == (void *)-1 ? -1 : 0);
    if (p == (void *)-1)
        return 1;
    printf("attached page aligned: %d, reads zero: %d\n", ((unsigned long)p & 4095) == 0,
           p[0] == 0 && p[9999] == 0);
    shmctl(id, IPC_STAT, &ds);
    printf("after shmat: nattch %lu lpid-is-me %d atime-set %d\n", (unsigned long)ds.shm_nattch,
           ds.shm_lpid == getpid(), ds.shm_atime != 0);
    strcpy(p, "from the parent");

    /* A fork child shares the attach: it reads the parent's data, the
     * parent reads its write, and it counts in nattch until it detaches. */
    pid_t pid = fork();
    if (pid == 0) {
        printf("child reads: %s, nattch %ld\n", p, nattch(id));
        strcpy(p + 5000, "from the child");
        say("child shmdt", shmdt(p));
        printf("child after shmdt: nattch %ld\n", nattch(id));
        _exit(0);
    }
    wait_child(pid);
    printf("parent reads: %s, nattch %ld\n", p + 5000, nattch(id));
    /* A child that ends (or execs) without detaching detaches. */
    pid = fork();
    if (pid == 0)
        _exit(0);
    wait_child(pid);
    printf("after a child's exit: nattch %ld\n", nattch(id));
    fork_and_exec(argv[0], argv[1], id);
    printf("after a child's exec: nattch %ld\n", nattch(id));

    /* A second attach of the same segment, then munmap detaches it. */
    char *q = shmat(id, NULL, SHM_RDONLY);
    say("second shmat read-only", q == (void *)-1 ? -1 : 0);
    printf("second attach sees: %s, nattch %ld\n", q, nattch(id));
    say("munmap of the attach", munmap(q, 12288));
    printf("after munmap: nattch %ld\n", nattch(id));

    /* Fixed addresses: SHM_RND, a taken range, SHM_REMAP. */
    char *m = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(m + 3 * 4096, 4096);
    errno = 0;
    say("shmat unaligned", shmat(id, m + 5, 0) == (void *)-1 ? -1 : 0);
    say("shmat over a mapping", shmat(id, m, 0) == (void *)-1 ? -1 : 0);
    say("shmat SHM_REMAP without address", shmat(id, NULL, SHM_REMAP) == (void *)-1 ? -1 : 0);
    char *r = shmat(id, m + 5, SHM_RND | SHM_REMAP);
    printf("SHM_RND|SHM_REMAP attaches at the rounded address: %d, sees %s\n", r == m,
           r == m ? r : "");
    printf("nattch %ld\n", nattch(id));
    say("shmdt it", shmdt(m));
    say("shmdt again", shmdt(m));
    say("shmdt unaligned", shmdt(p + 1));
    printf("nattch %ld\n", nattch(id));

    /* Keys. */
    key_t key = 0x5e11;
    say("shmget key, no IPC_CREAT", shmget(key, 4096, 0600));
    int kid = shmget(key, 4096, IPC_CREAT | 0600);
    say("shmget key IPC_CREAT", kid);
    say("shmget key IPC_CREAT|IPC_EXCL", shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0600));
    printf("shmget key IPC_CREAT again is the same: %d\n", shmget(key, 4096, IPC_CREAT | 0600) == kid);
    printf("shmget key smaller is the same: %d\n", shmget(key, 100, 0) == kid);
    say("shmget key larger", shmget(key, 8192, 0600));
    say("shmget size 0", shmget(IPC_PRIVATE, 0, IPC_CREAT | 0600));
    shmctl(kid, IPC_STAT, &ds);
    printf("key segment: key %#x segsz %zu mode %o\n", (int)ds.shm_perm.__key, (size_t)ds.shm_segsz,
           (unsigned)ds.shm_perm.mode);

    /* Permissions: read-only for its owner. */
    ds.shm_perm.mode = 0400;
    say("IPC_SET mode 0400", shmctl(kid, IPC_SET, &ds));
    say("shmget asking read-write", shmget(key, 0, 0600));
    printf("shmget asking read: %d\n", shmget(key, 0, 0400) == kid);
    say("shmat read-write", shmat(kid, NULL, 0) == (void *)-1 ? -1 : 0);
    char *ro = shmat(kid, NULL, SHM_RDONLY);
    say("shmat read-only", ro == (void *)-1 ? -1 : 0);
    say("shmdt read-only", shmdt(ro));
    ds.shm_perm.mode = 0;
    say("IPC_SET mode 0", shmctl(kid, IPC_SET, &ds));
    say("IPC_STAT without read permission", shmctl(kid, IPC_STAT, &ds));
    say("IPC_RMID key segment", shmctl(kid, IPC_RMID, NULL));
    say("shmget key after IPC_RMID", shmget(key, 0, 0));
    say("IPC_STAT after IPC_RMID", shmctl(kid, IPC_STAT, &ds));

    /* Information. */
    struct shminfo info;
    long maxidx = shmctl(0, IPC_INFO, (struct shmid_ds *)&info);
    printf("IPC_INFO: ok %d shmmin %lu shmmni>0 %d shmall>0 %d\n", maxidx >= 0,
           (unsigned long)info.shmmin, info.shmmni > 0, info.shmall > 0);
    struct shm_info sinfo;
    maxidx = shmctl(0, SHM_INFO, (struct shmid_ds *)&sinfo);
    printf("SHM_INFO: used_ids %d shm_tot %lu\n", sinfo.used_ids, (unsigned long)sinfo.shm_tot);
    printf("SHM_STAT of the highest index is the segment: %d\n", shmctl(maxidx, SHM_STAT, &ds) == id);
    say("SHM_STAT of an unused index", shmctl(maxidx + 1, SHM_STAT, &ds));

    /* Bad arguments. */
    say("shmat id -1", shmat(-1, NULL, 0) == (void *)-1 ? -1 : 0);
    say("shmat unknown id", shmat(id + 1, NULL, 0) == (void *)-1 ? -1 : 0);
    say("shmctl unknown command", shmctl(id, 12345, &ds));
    say("shmctl id -1", shmctl(-1, IPC_STAT, &ds));
    say("IPC_STAT to a bad buffer", syscall(SYS_shmctl, id, IPC_STAT, (void *)8));
    say("IPC_SET from a bad buffer", syscall(SYS_shmctl, id, IPC_SET, (void *)8));

    /* Removed while attached: lives on, without its key, until the last
     * detach (a child's included). */
    say("IPC_RMID while attached", shmctl(id, IPC_RMID, NULL));
    shmctl(id, IPC_STAT, &ds);
    printf("removed: key %d dest %d nattch %lu, still reads: %s\n", (int)ds.shm_perm.__key,
           (ds.shm_perm.mode & SHM_DEST) != 0, (unsigned long)ds.shm_nattch, p);
    pid = fork();
    if (pid == 0) {
        printf("child of a removed segment: nattch %ld\n", nattch(id));
        strcpy(p + 6000, "late child");
        _exit(0);
    }
    wait_child(pid);
    printf("parent reads: %s\n", p + 6000);
    say("shmdt the last attach", shmdt(p));
    say("IPC_STAT after the last detach", shmctl(id, IPC_STAT, &ds));
    maxidx = shmctl(0, SHM_INFO, (struct shmid_ds *)&sinfo);
    printf("SHM_INFO: used_ids %d, returns %ld\n", sinfo.used_ids, maxidx);
    return 0;
}
