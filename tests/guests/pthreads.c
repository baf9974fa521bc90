#include <pthread.h>
#include <stdio.h>
#define N 8
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static long total, turn;
static void *work(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&m);
        total += id;
        pthread_mutex_unlock(&m);
    }
    pthread_mutex_lock(&m);
    while (turn != id) pthread_cond_wait(&c, &m);
    turn++;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    return (void *)(id * 2);
}
int main(void) {
    pthread_t t[N];
    for (long i = 0; i < N; i++) pthread_create(&t[i], NULL, work, (void *)i);
    long sum = 0;
    for (int i = 0; i < N; i++) { void *r; pthread_join(t[i], &r); sum += (long)r; }
    printf("total=%ld turn=%ld sum=%ld\n", total, turn, sum);
    return 0;
}
