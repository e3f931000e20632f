/* The same copy benchmark, fixed: the destination is pre-faulted (written once) before the
 * timed region, in a region of its own, so "copy" measures the copy. Usage: copy_fixed [MiB]. */
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
  memset(src, 1, n);

  ms_region_begin("prefault"); /* FIX: take the first-touch faults here, not in the timed copy */
  memset(dst, 0, n);
  ms_region_end(n);

  ms_region_begin("copy");
  double t0 = now();
  memcpy(dst, src, n);
  double t1 = now();
  ms_region_end(n);

  printf("copy_fixed: %zu MiB in %.1f ms = %.2f GB/s (check: %d)\n", n >> 20, (t1 - t0) * 1e3, n / (t1 - t0) / 1e9,
         dst[n - 1]);
  return 0;
}
