/* A copy benchmark with seed 001's mistake: the destination comes fresh from malloc, so the
 * timed memcpy also pays a page fault for every 4 KiB of it, and reports a bandwidth several
 * times too low. Usage: copy_bad [MiB] (default 256). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <memsleuth/probe.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 256) << 20;
  char *src = malloc(n), *dst = malloc(n);
  if (!src || !dst) return 1;
  memset(src, 1, n);          /* the source is written, so it is backed */

  ms_region_begin("copy");    /* BUG: dst has never been touched */
  double t0 = now();
  memcpy(dst, src, n);
  double t1 = now();
  ms_region_end(n);

  printf("copy_bad: %zu MiB in %.1f ms = %.2f GB/s (check: %d)\n", n >> 20, (t1 - t0) * 1e3, n / (t1 - t0) / 1e9,
         dst[n - 1]);
  return 0;
}
