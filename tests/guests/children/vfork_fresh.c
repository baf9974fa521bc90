/* Each vfork child sees its parent's memory as it is at that vfork: the
 * parent changes a global, a large heap block (freed and made anew, so its
 * pages come and go) and a stack array between rounds, and every child
 * reads them and exits with what it saw. forkvm keeps the snapshot behind
 * the last vfork child and brings it up to date for the next; a page it
 * missed would show a child the previous round's bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int value;

int main(void)
{
    unsigned char *block = NULL;
    int wrong = 0;
    for (int round = 0; round < 24; round++) {
        volatile unsigned char local[256];
        value = round * 3 + 1;
        free(block);
        /* Large enough for its own mapping: munmapped at free. Every other
         * round it is left untouched (zero), so its pages go back to
         * holding nothing. */
        block = malloc(1 << 20);
        if (!block)
            return 1;
        if (round % 2)
            memset(block, round, 1 << 20);
        local[round] = (unsigned char)(round + 7);
        pid_t pid = vfork();
        if (pid == 0)
            _exit((value + block[123457] + local[round]) & 0xff);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
            printf("round %d: vfork or wait failed\n", round);
            return 1;
        }
        /* What the parent itself reads there now. */
        int want = (value + block[123457] + local[round]) & 0xff;
        if (WEXITSTATUS(st) != want) {
            printf("round %d: the child saw %d, not %d\n", round, WEXITSTATUS(st), want);
            wrong++;
        }
    }
    printf("rounds with a stale view: %d\n", wrong);
    return 0;
}
