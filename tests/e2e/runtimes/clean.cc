// A C++ program that computes with a few containers built once: nothing material to find.
#include <cstdio>
#include <vector>
int main() {
  std::vector<long> v(1 << 16);
  for (size_t i = 0; i < v.size(); i++) v[i] = (long)(i % 7);
  long s = 0;
  for (int r = 0; r < 20000; r++)
    for (long x : v) s += x * r;
  std::printf("%ld\n", s);
  return 0;
}
