/* SCM_CREDENTIALS as an unprivileged sender: only its own pid, uid and gid
 * may be claimed (EPERM otherwise, as Go's syscall tests check), and
 * recvmsg hands MSG_CMSG_CLOEXEC back in msg_flags. Run natively as root,
 * it first becomes uid 1000 like the guest. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *send_creds(int fd, pid_t pid, uid_t uid, gid_t gid) {
    struct ucred uc = {.pid = pid, .uid = uid, .gid = gid};
    char ctl[CMSG_SPACE(sizeof uc)];
    memset(ctl, 0, sizeof ctl);
    char byte = 'x';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_CREDENTIALS;
    c->cmsg_len = CMSG_LEN(sizeof uc);
    memcpy(CMSG_DATA(c), &uc, sizeof uc);
    if (sendmsg(fd, &m, 0) == 1)
        return "sent";
    return errno == EPERM ? "EPERM" : strerror(errno);
}

int main(void) {
    if (getuid() == 0 && (setgroups(0, NULL) < 0 || setgid(1000) < 0 || setuid(1000) < 0)) {
        perror("dropping to uid 1000");
        return 1;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    pid_t me = getpid();
    printf("claiming uid 0: %s\n", send_creds(sv[0], me, 0, getgid()));
    printf("claiming gid 0: %s\n", send_creds(sv[0], me, getuid(), 0));
    printf("claiming pid 1: %s\n", send_creds(sv[0], 1, getuid(), getgid()));
    printf("own credentials: %s\n", send_creds(sv[0], me, getuid(), getgid()));

    char buf[8], ctl[64];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                       .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC);
    printf("received %zd byte(s), msg_flags MSG_CMSG_CLOEXEC %s\n", n,
           m.msg_flags & MSG_CMSG_CLOEXEC ? "set" : "clear");
    m.msg_controllen = sizeof ctl;
    m.msg_flags = 0;
    send_creds(sv[0], me, getuid(), getgid());
    n = recvmsg(sv[1], &m, 0);
    printf("received %zd byte(s), msg_flags MSG_CMSG_CLOEXEC %s\n", n,
           m.msg_flags & MSG_CMSG_CLOEXEC ? "set" : "clear");
    return 0;
}
