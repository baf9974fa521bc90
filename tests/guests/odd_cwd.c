/* A working directory whose name is not UTF-8 (python's test_posixpath
 * test_nonascii_abspath: chdir was ENOENT), in the directory given as
 * argv[1]: chdir into it, getcwd, relative paths and exec keep it. */
#define _GNU_SOURCE
#include "common.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *what, long r) {
    if (r < 0) { printf("%-24s ", what); print_errno(stdout, errno); printf("\n"); }
    else printf("%-24s ok\n", what);
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) < 0) { perror("chdir"); return 1; }
    if (argc > 2) {
        /* After exec: still there? */
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) { say("getcwd after exec", -1); return 0; }
        printf("after exec ends with odd name: %d\n", strstr(cwd, "\xe7w\xf0") != NULL);
        return 0;
    }
    const char *odd = "\xe7w\xf0";
    say("mkdir odd", mkdir(odd, 0755));
    say("chdir odd", chdir(odd));
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) {
        size_t n = strlen(cwd);
        printf("getcwd tail:");
        for (size_t i = n >= 3 ? n - 3 : 0; i < n; i++) printf(" %02x", (unsigned char)cwd[i]);
        printf("\n");
    } else {
        say("getcwd", -1);
    }
    int fd = open("f", O_CREAT | O_WRONLY, 0644);
    say("create f", fd);
    if (fd >= 0) close(fd);
    struct stat st;
    say("stat f", stat("f", &st));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {argv[0], ".", "again", NULL};
        execv(argv[0], args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    say("unlink f", unlink("f"));
    say("chdir ..", chdir(".."));
    say("rmdir odd", rmdir(odd));
    return 0;
}
