/* TCP names: a socket bound before connect keeps its port (the server sees
 * it), and an IPV6_V6ONLY socket and an IPv4 one share a port (a dual-stack
 * server); the same IPv4 address and port twice is EADDRINUSE. */
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>
#include <errno.h>
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
 return 0; }
