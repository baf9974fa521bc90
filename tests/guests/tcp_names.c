/* TCP names: a socket bound before connect keeps its port (the server sees
 * it), and an IPV6_V6ONLY socket and an IPv4 one share a port (a dual-stack
 * server); the same IPv4 address and port twice is EADDRINUSE. A send
 * names no address on TCP: ignored on a connection, EPIPE (and SIGPIPE)
 * where there is none. */
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>
#include <errno.h>
#include <signal.h>
int main(void){
 int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={.sin_family=AF_INET,.sin_addr.s_addr=htonl(INADDR_LOOPBACK)};
 bind(l,(void*)&a,sizeof a); listen(l,4); socklen_t al=sizeof a; getsockname(l,(void*)&a,&al);
 int c=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in b={.sin_family=AF_INET,.sin_port=htons(45123),.sin_addr.s_addr=htonl(INADDR_LOOPBACK)};
 printf("bind: %d\n", bind(c,(void*)&b,sizeof b)); printf("connect: %d\n", connect(c,(void*)&a,sizeof a));
 struct sockaddr_in g; socklen_t gl=sizeof g; getsockname(c,(void*)&g,&gl); printf("client port %d\n", ntohs(g.sin_port));
 int s=accept(l,(void*)&g,&gl); printf("server sees port %d (accepted %d)\n", ntohs(g.sin_port), s >= 0);
 int s6=socket(AF_INET6,SOCK_STREAM,0); int one=1; setsockopt(s6,IPPROTO_IPV6,IPV6_V6ONLY,&one,sizeof one);
 struct sockaddr_in6 a6={.sin6_family=AF_INET6,.sin6_port=htons(45200)}; int s4=socket(AF_INET,SOCK_STREAM,0);
 struct sockaddr_in a4={.sin_family=AF_INET,.sin_port=htons(45200)};
 printf("dual stack: %d", bind(s6,(void*)&a6,sizeof a6)); printf(" %d\n", bind(s4,(void*)&a4,sizeof a4));
 int s7=socket(AF_INET,SOCK_STREAM,0); int r7=bind(s7,(void*)&a4,sizeof a4); printf("same v4 again: %d %s\n", r7, r7 < 0 && errno==EADDRINUSE ? "EADDRINUSE" : "-");
 signal(SIGPIPE, SIG_IGN);
 printf("sendto on a connection: %zd\n", sendto(c,"hi",2,0,(void*)&b,sizeof b));
 char got[4]={0}; printf("peer got %zd %s\n", recv(s,got,2,0), got);
 int u=socket(AF_INET,SOCK_STREAM,0);
 ssize_t r=send(u,"x",1,0); printf("send unconnected: %zd %s\n", r, strerror(errno));
 r=sendto(u,"x",1,0,(void*)&a,sizeof a); printf("sendto unconnected: %zd %s\n", r, strerror(errno));
 r=write(l,"x",1); printf("write on a listener: %zd %s\n", r, strerror(errno));
 return 0; }
