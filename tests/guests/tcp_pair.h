/* Connected loopback TCP pairs for the TCP guests (tcp_close.c,
 * tcp_urgent.c): one listener on 127.0.0.1, port chosen by the kernel. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static int listener;
static struct sockaddr_in addr;

/* Makes the listener; exits with a message if it cannot. */
static void listen_on_loopback(void) {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof addr;
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 8) ||
        getsockname(listener, (struct sockaddr *)&addr, &n)) {
        printf("listen failed\n");
        exit(1);
    }
}

/* A client end `c` connected to the accepted end `s`. */
static void pair(int *c, int *s) {
    *c = socket(AF_INET, SOCK_STREAM, 0);
    if (*c < 0 || connect(*c, (struct sockaddr *)&addr, sizeof addr) != 0) {
        printf("connect failed\n");
        exit(1);
    }
    *s = accept(listener, NULL, NULL);
    if (*s < 0) {
        printf("accept failed\n");
        exit(1);
    }
}
