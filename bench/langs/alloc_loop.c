/* Random mallocs and frees of 16..1024 bytes over 4000 slots, no probe: a CPU-bound command whose
 * time depends on the allocator (bench/compare_under_load.py).
 *   alloc_loop [ITERATIONS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define SLOTS 4000
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  static char *slot[SLOTS];
  uint64_t x = 88172645463325252ull, sum = 0;
  for (long i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned k = (unsigned)(x % SLOTS);
    if (slot[k]) {
      sum += (unsigned char)slot[k][0];
      free(slot[k]);
      slot[k] = NULL;
    } else {
      size_t size = 16 + (x >> 32) % 1009;
      slot[k] = malloc(size);
      slot[k][0] = (char)i;
    }
  }
  printf("%llu\n", (unsigned long long)sum);
  return 0;
}
