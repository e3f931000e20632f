// STEPS steps of fixed work: a 32 MiB std::vector per step, filled and dropped.
#include <cstdio>
#include <cstdlib>
#include <vector>

static std::vector<char> step(long n) { return std::vector<char>(32u << 20, static_cast<char>(n)); }

int main(int argc, char **argv) {
  long steps = argc > 1 ? std::atol(argv[1]) : 100, total = 0;
  for (long n = 0; n < steps; n++) total += step(n)[n];
  std::printf("%ld\n", total);
  return 0;
}
