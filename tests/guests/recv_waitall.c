/* recv(MSG_WAITALL) and recvmsg(MSG_WAITALL) on a blocking stream socket
 * return only when the whole length is in (they returned the first half;
 * recvmsg did after recv was fixed), over AF_UNIX and loopback TCP; at the
 * peer's close they return what they got. recvmsg scatters into two
 * buffers, so each part lands where it belongs. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
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

/* recvmsg(MSG_WAITALL) of 10 bytes into a 4- and a 6-byte buffer. */
static ssize_t recvmsg10(int s, char *out) {
    char a[4], b[6];
    struct iovec iov[2] = {{.iov_base = a, .iov_len = sizeof a}, {.iov_base = b, .iov_len = sizeof b}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t r = recvmsg(s, &m, MSG_WAITALL);
    if (r > 0) {
        memcpy(out, a, r < 4 ? (size_t)r : 4);
        if (r > 4) memcpy(out + 4, b, (size_t)r - 4);
    }
    return r;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int round = 0; round < 4; round++) {
        int tcp = round & 1, msg = round >> 1;
        const char *how = msg ? "recvmsg" : "recv";
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
        ssize_t r = msg ? recvmsg10(sv[0], b) : recv(sv[0], b, 10, MSG_WAITALL);
        printf("%s: %s(10, MSG_WAITALL) = %zd \"%s\"\n", tcp ? "tcp" : "unix", how, r, b);
        char more[16] = {0};
        r = msg ? recvmsg10(sv[0], more) : recv(sv[0], more, 10, MSG_WAITALL);
        printf("%s: %s at close = %zd \"%s\"\n", tcp ? "tcp" : "unix", how, r, more);
        waitpid(c, NULL, 0);
        close(sv[0]);
    }
    return 0;
}
