/* A parent with a SIGCHLD handler (no SA_RESTART) waits for each of many
 * children that exit at once: waitpid returns the child's status every
 * time, as on Linux (the signal announcing the exit does not make the
 * wait fail with EINTR; the handler runs after it returns). forkvm's wait
 * ended with EINTR now and then when the exit came between two looks. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile int seen;
static void h(int s){(void)s; seen++;}
int main(void){
  struct sigaction sa = {0}; sa.sa_handler = h; sigaction(SIGCHLD, &sa, NULL);
  int bad = 0;
  for (int i = 0; i < 200; i++) {
    pid_t c = fork();
    if (c == 0) _exit(i & 7);
    int st = -1; pid_t r;
    r = waitpid(c, &st, 0);
    if (r != c || !WIFEXITED(st) || WEXITSTATUS(st) != (i & 7)) { bad++; if (bad < 4) printf("round %d: %d %s\n", i, (int)r, r < 0 ? strerror(errno) : ""); }
  }
  printf("bad %d\n", bad);
  return 0;
}
