/* A signal another thread sends (pthread_kill) to a thread blocked in a
 * call ends that call as Linux does: a blocking read or a futex wait
 * (sem_wait) returns EINTR (no SA_RESTART) or goes on (SA_RESTART); a
 * blocking write to a pipe or a stream socket that sent part of its bytes
 * returns their count.
 * (python's test_socketserver test_write hung: the handler ran and the
 * blocked send went on waiting for a reader that waited for the handler.)
 *
 * The helper thread sends the signal until the call returns or the
 * handler has run, and gives up after 10 s, unblocking the call itself
 * (a byte to read, a drained pipe), so a wrong answer shows as output,
 * not as a hang. */
#include "common.h"
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static volatile int returned;
static pthread_t blocked;
static int rfd, wfd;
static enum { DRAIN, FEED, POST } unblock;
static sem_t sem;
static int restarting;

static void on_usr1(int s) { (void)s; handled = 1; }

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

static void *helper(void *arg)
{
    (void)arg;
    static char buf[65536];
    if (unblock == DRAIN) {
        /* The writer is blocked once the pipe is full: take a little. */
        if (read(rfd, buf, 100) != 100) return NULL;
    }
    /* A read without SA_RESTART gets signals until it returns (one may
     * come before it blocks); the others until the handler ran. */
    int i = 0;
    for (; i < 1000 && !returned && (!handled || (unblock != DRAIN && !restarting)); i++) {
        pthread_kill(blocked, SIGUSR1);
        pause_ms(10);
    }
    if (unblock == DRAIN) {
        for (; i < 1000 && !returned; i++) pause_ms(10);
    }
    if (unblock == POST) {
        sem_post(&sem);
    } else if (unblock == FEED) {
        if (write(wfd, "x", 1) != 1) return NULL;
    } else {
        while (!returned) {
            if (read(rfd, buf, sizeof buf) <= 0) break;
        }
    }
    return NULL;
}

static void setup(int restart)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGUSR1, &sa, NULL);
    handled = 0;
    returned = 0;
    restarting = restart;
    blocked = pthread_self();
}

static void read_case(const char *name, int restart)
{
    int p[2];
    if (pipe(p) != 0) return;
    rfd = p[0];
    wfd = p[1];
    setup(restart);
    unblock = FEED;
    pthread_t t;
    pthread_create(&t, NULL, helper, NULL);
    char c;
    ssize_t n = read(rfd, &c, 1);
    int e = errno;
    returned = 1;
    pthread_join(t, NULL);
    printf("%s: %s, handler %s\n", name, n < 0 ? errno_name(e) : n == 1 ? "1 byte" : "other",
           handled ? "ran" : "did not run");
    close(p[0]);
    close(p[1]);
}

/* A futex wait (sem_wait): EINTR without SA_RESTART. */
static void sem_case(const char *name, int restart)
{
    if (sem_init(&sem, 0, 0) != 0) return;
    setup(restart);
    unblock = POST;
    pthread_t t;
    pthread_create(&t, NULL, helper, NULL);
    int r = sem_wait(&sem);
    int e = errno;
    returned = 1;
    pthread_join(t, NULL);
    printf("%s: %s, handler %s\n", name, r < 0 ? errno_name(e) : "0",
           handled ? "ran" : "did not run");
    sem_destroy(&sem);
}

static void write_case(const char *name, int use_socket)
{
    int p[2];
    if (use_socket) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) != 0) return;
    } else if (pipe(p) != 0) {
        return;
    }
    rfd = p[0];
    wfd = p[1];
    setup(0);
    unblock = DRAIN;
    size_t total = 16 << 20;
    char *big = calloc(1, total);
    if (!big) return;
    pthread_t t;
    pthread_create(&t, NULL, helper, NULL);
    ssize_t n = write(wfd, big, total);
    int e = errno;
    returned = 1;
    pthread_join(t, NULL);
    printf("%s: %s, handler %s\n", name,
           n < 0 ? errno_name(e) : n > 0 && (size_t)n < total ? "part of it" : "all of it",
           handled ? "ran" : "did not run");
    free(big);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    read_case("read of an empty pipe, no SA_RESTART", 0);
    read_case("read of an empty pipe, SA_RESTART", 1);
    sem_case("sem_wait, no SA_RESTART", 0);
    sem_case("sem_wait, SA_RESTART", 1);
    write_case("16 MiB write to a pipe", 0);
    write_case("16 MiB write to a stream socket", 1);
    return 0;
}
