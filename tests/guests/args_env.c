/* Prints argc, every argv entry, the working directory and the whole environment in order. */
#include <stdio.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    printf("argc=%d\n", argc);
    for (int i = 0; i < argc; i++)
        printf("argv[%d]=\"%s\"\n", i, argv[i]);
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd))
        printf("cwd=\"%s\"\n", cwd);
    else
        printf("cwd=(error)\n");
    int n = 0;
    for (char **e = environ; e && *e; e++, n++)
        printf("env[%d]=\"%s\"\n", n, *e);
    printf("envc=%d\n", n);
    return argc > 3 ? 3 : 0; /* a non-zero exit status when given several args */
}
