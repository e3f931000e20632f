// C++ numerical code whose 64 MiB temporaries are made and dropped every step: each
// std::vector comes from operator new -> malloc, which maps it (above glibc's mmap threshold), and
// its destructor unmaps it, so every step faults 64 MiB in again.
#include <cstdio>
#include <vector>

static std::vector<double> scaled(const std::vector<double> &a, double k) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); i++) out[i] = a[i] * k;
  return out;
}

int main() {
  std::vector<double> a(8u << 20, 1.0);  // 64 MiB
  double total = 0;
  for (int step = 0; step < 40; step++) total += scaled(a, 2.0)[step];
  std::printf("%g\n", total);
  return 0;
}
