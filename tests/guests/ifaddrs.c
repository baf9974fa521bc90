/* The loopback interface as programs list it: glibc's getifaddrs and
 * if_nameindex (route netlink dumps underneath), if_nametoindex and
 * if_indextoname (interface ioctls on a socket), and a netlink request of
 * one link by index with an acknowledgement. Prints only `lo`, which is the
 * same on any Linux machine. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <stdint.h>
#include <unistd.h>

/* The netlink ABI (linux/netlink.h and rtnetlink.h, which musl lacks). */
struct nl_addr {
    unsigned short family, pad;
    uint32_t pid, groups;
};
struct nl_hdr {
    uint32_t len;
    uint16_t type, flags;
    uint32_t seq, pid;
};
struct if_info {
    unsigned char family, pad;
    unsigned short type;
    int index;
    unsigned flags, change;
};
struct nl_err {
    int error;
    struct nl_hdr request;
};
enum { NETLINK_ROUTE_ = 0, RTM_NEWLINK_ = 16, RTM_GETLINK_ = 18, NLMSG_ERROR_ = 2,
       NLM_F_REQUEST_ = 1, NLM_F_ACK_ = 4 };

static const char *text(const struct sockaddr *a, char *buf) {
    if (!a)
        return "-";
    if (a->sa_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, buf, 64);
    if (a->sa_family == AF_INET6)
        return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, buf, 64);
    return "link";
}

int main(void) {
    struct ifaddrs *all;
    if (getifaddrs(&all) < 0) {
        perror("getifaddrs");
        return 1;
    }
    char a[64], m[64];
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (strcmp(i->ifa_name, "lo") != 0)
            continue;
        int fam = i->ifa_addr ? i->ifa_addr->sa_family : -1;
        printf("lo family %d addr %s mask %s up %d loopback %d running %d\n", fam,
               text(i->ifa_addr, a), fam == AF_PACKET ? "-" : text(i->ifa_netmask, m),
               !!(i->ifa_flags & IFF_UP), !!(i->ifa_flags & IFF_LOOPBACK),
               !!(i->ifa_flags & IFF_RUNNING));
    }
    freeifaddrs(all);

    struct if_nameindex *names = if_nameindex();
    for (struct if_nameindex *n = names; n && n->if_index; n++)
        if (strcmp(n->if_name, "lo") == 0)
            printf("if_nameindex: %u %s\n", n->if_index, n->if_name);
    if_freenameindex(names);

    printf("if_nametoindex: %u, if_indextoname: %s\n", if_nametoindex("lo"),
           if_indextoname(1, a) ? a : "-");
    printf("no such name: %u\n", if_nametoindex("forkvm-none"));

    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE_);
    struct nl_addr me = {.family = AF_NETLINK};
    socklen_t len = sizeof me;
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) < 0 ||
        getsockname(fd, (struct sockaddr *)&me, &len) < 0) {
        perror("netlink");
        return 1;
    }
    printf("port id set: %d, len %u\n", me.pid != 0, len);
    struct request {
        struct nl_hdr h;
        struct if_info i;
    } req = {.h = {.len = sizeof req, .type = RTM_GETLINK_, .flags = NLM_F_REQUEST_ | NLM_F_ACK_,
                   .seq = 42},
             .i = {.family = AF_UNSPEC, .index = 1}};
    struct nl_addr kernel = {.family = AF_NETLINK};
    sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel);
    for (int k = 0; k < 2; k++) {
        _Alignas(8) char buf[8192];
        struct nl_addr from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
        struct nl_hdr *h = (struct nl_hdr *)buf;
        printf("answer %d: from port %u, seq %u, mine %d, type %d", k, from.pid, h->seq,
               h->pid == me.pid, h->type);
        if (h->type == RTM_NEWLINK_) {
            struct if_info *i = (struct if_info *)(h + 1);
            printf(" index %d loopback %d", i->index, !!(i->flags & IFF_LOOPBACK));
        }
        if (h->type == NLMSG_ERROR_)
            printf(" error %d", ((struct nl_err *)(h + 1))->error);
        printf(" whole: %d\n", n >= (ssize_t)sizeof *h && h->len <= n);
    }
    struct request nope = req;
    nope.i.index = 424242;
    nope.h.seq = 43;
    send(fd, &nope, sizeof nope, 0);
    _Alignas(8) char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    struct nl_hdr *h = (struct nl_hdr *)buf;
    printf("no such link: seq %u type %d error %d (%d)\n", h->seq, h->type,
           ((struct nl_err *)(h + 1))->error, n > 0);
    close(fd);
    return 0;
}
