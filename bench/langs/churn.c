/* STEPS steps of fixed work: a 32 MiB buffer per step, written page by page and freed. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  long steps = argc > 1 ? atol(argv[1]) : 100, total = 0;
  for (long n = 0; n < steps; n++) {
    char *b = malloc(32 << 20);
    for (long i = 0; i < 32 << 20; i += 4096) b[i] = (char)i;
    total += b[4096];
    free(b);
  }
  printf("%ld\n", total);
  return 0;
}
