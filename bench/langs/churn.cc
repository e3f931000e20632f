// About SECONDS of work: a 32 MiB std::vector per step, filled and dropped.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

static std::vector<char> step(int n) { return std::vector<char>(32u << 20, static_cast<char>(n)); }

int main(int argc, char **argv) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(argc > 1 ? std::atof(argv[1]) : 1.0);
  long total = 0;
  for (int n = 0; std::chrono::steady_clock::now() < end; n++) total += step(n)[n];
  std::printf("%ld\n", total);
  return 0;
}
