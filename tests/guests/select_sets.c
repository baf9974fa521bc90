/* select(2) sorts poll bits as Linux does: an error condition (a pipe whose reader is gone) makes an fd readable and writable, and only POLLPRI is exceptional; it used to wait forever on such a pipe. epoll_ctl refuses a regular file with EPERM. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>
int main(void){ int p[2]; pipe(p); close(p[0]); fd_set r,w,e; FD_ZERO(&r); FD_ZERO(&w); FD_ZERO(&e); FD_SET(p[1],&r); FD_SET(p[1],&w); FD_SET(p[1],&e);
 struct timeval tv={1,0}; int n=select(p[1]+1,&r,&w,&e,&tv); printf("%d r%d w%d e%d\n",n,FD_ISSET(p[1],&r),FD_ISSET(p[1],&w),FD_ISSET(p[1],&e));
 int q[2]; pipe(q); FD_ZERO(&r); FD_ZERO(&e); FD_SET(q[0],&r); FD_SET(q[0],&e); close(q[1]); tv.tv_sec=1; n=select(q[0]+1,&r,0,&e,&tv); printf("eof: %d r%d e%d\n",n,FD_ISSET(q[0],&r),FD_ISSET(q[0],&e));
 /* epoll refuses a regular file (asyncio tells files from pipes by it). */
 int f = open("/proc/self/exe", O_RDONLY); int ep = epoll_create1(0); struct epoll_event ev = { .events = EPOLLIN };
 int rr = epoll_ctl(ep, EPOLL_CTL_ADD, f, &ev); printf("epoll_ctl on a regular file: %d %s\n", rr, rr < 0 && errno == EPERM ? "EPERM" : "-");
 return 0; }
