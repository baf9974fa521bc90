/* recv(MSG_WAITALL) on a blocking stream socket returns only when the whole
 * length is in (it returned the first half), over AF_UNIX and loopback TCP;
 * at the peer's close it returns what it got. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void pair(int tcp, int sv[2]) {
    if (!tcp) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) _exit(2);
        return;
    }
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (bind(l, (void *)&a, sizeof a) || listen(l, 1) || getsockname(l, (void *)&a, &n)) _exit(2);
    sv[1] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sv[1], (void *)&a, sizeof a) != 0) _exit(2);
    sv[0] = accept(l, NULL, NULL);
    close(l);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int tcp = 0; tcp < 2; tcp++) {
        int sv[2];
        pair(tcp, sv);
        pid_t c = fork();
        if (c == 0) {
            close(sv[0]);
            if (write(sv[1], "hello", 5) != 5) _exit(1);
            usleep(50000);
            if (write(sv[1], "world", 5) != 5) _exit(1);
            usleep(50000);
            if (write(sv[1], "!", 1) != 1) _exit(1);
            _exit(0); /* closes: the second receive ends short */
        }
        close(sv[1]);
        char b[16] = {0};
        ssize_t r = recv(sv[0], b, 10, MSG_WAITALL);
        printf("%s: recv(10, MSG_WAITALL) = %zd \"%s\"\n", tcp ? "tcp" : "unix", r, b);
        char more[16] = {0};
        r = recv(sv[0], more, 10, MSG_WAITALL);
        printf("%s: at close = %zd \"%s\"\n", tcp ? "tcp" : "unix", r, more);
        waitpid(c, NULL, 0);
        close(sv[0]);
    }
    return 0;
}
