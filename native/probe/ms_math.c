#include "ms_math.h"

#include <string.h>

static uint64_t sub_clamped(uint64_t a, uint64_t b) { return b >= a ? b - a : 0; }

ms_reading ms_reading_delta(ms_reading a, ms_reading b) {
  ms_reading d;
  d.value = sub_clamped(a.value, b.value);
  d.enabled_ns = sub_clamped(a.enabled_ns, b.enabled_ns);
  d.running_ns = sub_clamped(a.running_ns, b.running_ns);
  return d;
}

ms_count_kind ms_scale(ms_reading r, double *out) {
  if (r.running_ns == 0) {
    /* A software event with no time at all in the interval still has an exact value (0 or
     * the count), because software events are never multiplexed; an event that was enabled
     * but never running has no value. */
    if (r.enabled_ns == 0) {
      *out = (double)r.value;
      return MS_COUNTED;
    }
    *out = 0.0;
    return MS_NOT_COUNTED;
  }
  if (r.running_ns >= r.enabled_ns) {
    *out = (double)r.value;
    return MS_COUNTED;
  }
  /* long double keeps 64 bits of mantissa: value * enabled would overflow uint64_t for
   * counts above ~2^34 over a few seconds. */
  *out = (double)((long double)r.value * (long double)r.enabled_ns / (long double)r.running_ns);
  return MS_SCALED;
}

double ms_running_fraction(ms_reading r) {
  if (r.enabled_ns == 0) return 0.0;
  if (r.running_ns >= r.enabled_ns) return 1.0;
  return (double)r.running_ns / (double)r.enabled_ns;
}

double ms_per_op(double count, uint64_t ops) { return ops ? count / (double)ops : 0.0; }

uint64_t ms_tv_ns(long sec, long usec) { return (uint64_t)sec * 1000000000ull + (uint64_t)usec * 1000ull; }

#define LN2 0.69314718055994530942

double ms_log(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  int e = (int)((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL; /* the mantissa m in [1, 2) */
  double m;
  memcpy(&m, &bits, sizeof m);
  if (m > 1.41421356237309504880) { /* m in [sqrt(1/2), sqrt(2)): |s| <= 0.172 below */
    m /= 2;
    e++;
  }
  /* log m = 2 atanh(s), s = (m - 1) / (m + 1): the series' terms s^(2k+1) / (2k+1) to s^23. */
  double s = (m - 1) / (m + 1), s2 = s * s, p = 1.0 / 23;
  for (int k = 21; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  return 2 * s * p + e * LN2;
}

double ms_one_minus_exp_neg(double y) {
  if (y < 0.5) { /* y - y^2/2! + y^3/3! - ...: terms to y^22 (< 1e-20) */
    double t = 0;
    for (int k = 22; k >= 1; k--) t = (1 - t) * y / k;
    return t;
  }
  if (y > 745) return 1; /* e^-y is below the smallest double */
  /* e^-y = 2^-n e^-r, y = n ln2 + r, |r| <= ln2 / 2: e^-r by its series to r^16 (< 1e-18). */
  int n = (int)(y / LN2 + 0.5);
  double r = y - n * LN2, t = 1;
  for (int k = 16; k >= 1; k--) t = 1 - t * r / k;
  double scale = 1; /* 2^-n by halvings: n <= 1075 */
  for (double half = 0.5; n; n >>= 1, half *= half)
    if (n & 1) scale *= half;
  return 1 - t * scale;
}
