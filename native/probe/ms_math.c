#include "ms_math.h"

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
