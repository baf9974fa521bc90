/* Directory permissions are enforced for an unprivileged user, in the
 * directory given as argv[1] (run natively as root, the program first drops
 * to uid/gid 1000 so that both runs judge as the same unprivileged user):
 *  - adding or removing a name needs write and search permission on the
 *    directory (EACCES), though a name that exists is EEXIST first and a
 *    missing one ENOENT;
 *  - a lookup needs search permission on each directory on the way;
 *  - listing a directory, or reading a file, needs read permission;
 *  - access() agrees. */
#define _GNU_SOURCE
#include "common.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-36s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-36s ok\n", what);
}

static int make(const char *name, int mode) {
    int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, mode);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static int opened(int fd) {
    if (fd >= 0) close(fd);
    return fd < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: dir_perms DIR\n"); return 1; }
    if (geteuid() == 0) {
        /* The directory the test made is root's: let uid 1000 work in it. */
        if (chmod(argv[1], 0777) < 0 || setgid(1000) < 0 || setuid(1000) < 0) {
            perror("drop privileges");
            return 1;
        }
    }
    if (chdir(argv[1]) < 0) { perror("chdir"); return 1; }
    umask(022);
    say("mkdir w", mkdir("w", 0755));
    say("chdir w", chdir("w"));

    /* A directory without write permission. */
    say("mkdir ro", mkdir("ro", 0755));
    say("make ro/f", make("ro/f", 0644));
    say("chmod ro 0555", chmod("ro", 0555));
    say("create ro/g", make("ro/g", 0644));
    say("open ro/g O_CREAT|O_EXCL", opened(open("ro/g", O_CREAT | O_EXCL | O_WRONLY, 0644)));
    say("open ro/f O_WRONLY", opened(open("ro/f", O_WRONLY)));
    say("open ro/f O_CREAT (exists)", opened(open("ro/f", O_CREAT | O_WRONLY, 0644)));
    say("unlink ro/f", unlink("ro/f"));
    say("unlink ro/missing", unlink("ro/missing"));
    say("mkdir ro/d", mkdir("ro/d", 0755));
    say("mkdir ro/f (exists)", mkdir("ro/f", 0755));
    say("rmdir ro/missing", rmdir("ro/missing"));
    say("rename ro/f f2", rename("ro/f", "f2"));
    say("make f3", make("f3", 0644));
    say("rename f3 ro/f3", rename("f3", "ro/f3"));
    say("rename f3 ro/f (replace)", rename("f3", "ro/f"));
    say("link f3 ro/l", link("f3", "ro/l"));
    say("symlink ro/s", symlink("f3", "ro/s"));
    say("mknod ro/p", mknod("ro/p", S_IFIFO | 0644, 0));
    say("access ro W_OK", access("ro", W_OK));
    say("access ro R_OK|X_OK", access("ro", R_OK | X_OK));
    say("access ro/f W_OK", access("ro/f", W_OK));

    /* A directory without search permission. */
    say("mkdir nx", mkdir("nx", 0755));
    say("make nx/f", make("nx/f", 0644));
    say("mkdir nx/sub", mkdir("nx/sub", 0755));
    say("chmod nx 0644", chmod("nx", 0644));
    struct stat st;
    say("stat nx", stat("nx", &st));
    say("stat nx/f", stat("nx/f", &st));
    say("stat nx/sub/..", stat("nx/sub/..", &st));
    say("open nx/f", opened(open("nx/f", O_RDONLY)));
    say("access nx/f F_OK", access("nx/f", F_OK));
    say("chdir nx", chdir("nx"));
    say("unlink nx/f", unlink("nx/f"));
    say("create nx/g", make("nx/g", 0644));
    DIR *d = opendir("nx");
    say("opendir nx", d ? 0 : -1);
    if (d) closedir(d);
    int dfd = open("nx", O_RDONLY | O_DIRECTORY);
    say("open nx O_DIRECTORY", dfd < 0 ? -1 : 0);
    if (dfd >= 0) {
        say("fstatat(nx fd, f)", fstatat(dfd, "f", &st, 0));
        say("fchdir(nx fd)", fchdir(dfd));
        close(dfd);
    }

    /* A directory without read permission. */
    say("mkdir nr", mkdir("nr", 0755));
    say("chmod nr 0311", chmod("nr", 0311));
    say("open nr O_DIRECTORY", opened(open("nr", O_RDONLY | O_DIRECTORY)));
    say("open nr O_PATH", opened(open("nr", O_PATH)));
    say("create nr/f", make("nr/f", 0644));
    say("stat nr/f", stat("nr/f", &st));
    say("access nr R_OK", access("nr", R_OK));

    /* A file without read permission. */
    say("make wo 0200", make("wo", 0200));
    say("open wo O_RDONLY", opened(open("wo", O_RDONLY)));
    say("open wo O_RDWR", opened(open("wo", O_RDWR)));
    say("open wo O_WRONLY", opened(open("wo", O_WRONLY)));
    say("access wo R_OK", access("wo", R_OK));

    /* Clean up, so that the other run starts afresh. */
    chmod("ro", 0755);
    chmod("nx", 0755);
    chmod("nr", 0755);
    const char *files[] = {"ro/f", "ro/f3", "f2", "f3", "nx/f", "nx/g", "nr/f", "wo"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
    const char *dirs[] = {"nx/sub", "ro", "nx", "nr"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) rmdir(dirs[i]);
    say("chdir ..", chdir(".."));
    say("rmdir w", rmdir("w"));
    return 0;
}
