/* About SECONDS of work: a 32 MiB buffer per step, written page by page and freed. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
  long total = 0;
  while (now() < end) {
    char *b = malloc(32 << 20);
    for (long i = 0; i < 32 << 20; i += 4096) b[i] = (char)i;
    total += b[4096];
    free(b);
  }
  printf("%ld\n", total);
  return 0;
}
