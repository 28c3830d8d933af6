// Memory read bandwidth, the ceiling for batch-1 decode (every weight is read once per token).
// T threads each sum their slice of one large buffer; best of several passes. Compiled and run
// by benches/lib/bandwidth.ts at bench time:  bandwidth <MiB> <threads> <passes>
// Prints one JSON line.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  const uint64_t *data;
  size_t n;
  uint64_t sum;
  pthread_barrier_t *start, *end;
  int passes;
} Slice;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Four independent accumulators so the loop is limited by loads, not by one add chain.
static uint64_t sum(const uint64_t *p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
  return a + b + c + d;
}

static void *worker(void *arg) {
  Slice *s = arg;
  for (int p = 0; p < s->passes; p++) {
    pthread_barrier_wait(s->start);
    s->sum += sum(s->data, s->n);
    pthread_barrier_wait(s->end);
  }
  return NULL;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 2048;
  int threads = argc > 2 ? atoi(argv[2]) : 2, passes = argc > 3 ? atoi(argv[3]) : 5;
  size_t n = mib * 1024 * 1024 / 8;
  uint64_t *data = aligned_alloc(4096, n * 8);
  if (!data) return fprintf(stderr, "cannot allocate %zu MiB\n", mib), 1;
  memset(data, 1, n * 8);  // touch every page first, so the passes time reads, not page faults
  pthread_barrier_t start, end;
  pthread_barrier_init(&start, NULL, threads + 1);
  pthread_barrier_init(&end, NULL, threads + 1);
  Slice *slices = calloc(threads, sizeof(Slice));
  pthread_t *ids = calloc(threads, sizeof(pthread_t));
  for (int t = 0; t < threads; t++) {
    slices[t] = (Slice){data + t * (n / threads), n / threads, 0, &start, &end, passes};
    pthread_create(&ids[t], NULL, worker, &slices[t]);
  }
  double best = 0, total = 0;
  for (int p = 0; p < passes; p++) {
    pthread_barrier_wait(&start);
    double t0 = now();
    pthread_barrier_wait(&end);
    double gbs = (double)(n / threads) * threads * 8 / (now() - t0) / 1e9;
    if (gbs > best) best = gbs;
  }
  for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL), total += slices[t].sum;
  // The checksum is printed so the compiler cannot drop the reads.
  printf("{\"threads\":%d,\"mib\":%zu,\"passes\":%d,\"bestGBps\":%.3f,\"checksum\":%.0f}\n", threads, mib, passes, best, total);
  return 0;
}
