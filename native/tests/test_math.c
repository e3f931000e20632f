/* Unit tests of the counter arithmetic (native/probe/ms_math.c). */
#include <math.h>
#include <stdio.h>
#include "../probe/ms_math.h"

static int passed, failed;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (cond) passed++;                                               \
    else {                                                            \
      failed++;                                                       \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)
#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-9 * (fabs((double)(b)) + 1))

int main(void) {
  double v;
  /* Exact: ran the whole interval. */
  ms_reading r = {1000, 500, 500};
  CHECK(ms_scale(r, &v) == MS_COUNTED && v == 1000);
  /* Multiplexed half the time: the estimate doubles. */
  r = (ms_reading){1000, 1000, 500};
  CHECK(ms_scale(r, &v) == MS_SCALED && NEAR(v, 2000));
  CHECK(NEAR(ms_running_fraction(r), 0.5));
  /* Enabled but never scheduled: no value. */
  r = (ms_reading){0, 1000, 0};
  CHECK(ms_scale(r, &v) == MS_NOT_COUNTED && v == 0);
  /* An empty interval is an exact zero, not "not counted". */
  r = (ms_reading){0, 0, 0};
  CHECK(ms_scale(r, &v) == MS_COUNTED && v == 0);
  /* Large counts do not overflow: 2^40 events over a third of 2^33 ns. */
  r = (ms_reading){1ull << 40, 3ull << 33, 1ull << 33};
  CHECK(ms_scale(r, &v) == MS_SCALED && NEAR(v, 3.0 * (double)(1ull << 40)));
  /* Delta first, then scale: region 100..300 values over 1000 ns enabled, 250 running. */
  ms_reading a = {100, 1000, 1000}, b = {300, 2000, 1250};
  ms_reading d = ms_reading_delta(a, b);
  CHECK(d.value == 200 && d.enabled_ns == 1000 && d.running_ns == 250);
  CHECK(ms_scale(d, &v) == MS_SCALED && NEAR(v, 800));
  /* A backwards read clamps to zero instead of wrapping. */
  d = ms_reading_delta(b, a);
  CHECK(d.value == 0 && d.enabled_ns == 0 && d.running_ns == 0);
  /* running never exceeds enabled in a sane read, but if it does the value is taken as exact. */
  r = (ms_reading){10, 5, 6};
  CHECK(ms_scale(r, &v) == MS_COUNTED && v == 10 && ms_running_fraction(r) == 1.0);
  CHECK(NEAR(ms_per_op(1000, 4), 250) && ms_per_op(5, 0) == 0);
  CHECK(ms_tv_ns(2, 500000) == 2500000000ull);
  /* libmsheap's sampling functions against libm's, over the ranges it uses. */
  double worst_log = 0, worst_exp = 0;
  for (double x = 1e-300; x <= 1; x *= 1.0137) {
    double err = fabs(ms_log(x) - log(x)) / (fabs(log(x)) > 1e-300 ? fabs(log(x)) : 1);
    if (err > worst_log) worst_log = err;
  }
  for (double x = 0.5; x < 1; x += 1e-4) {
    double err = fabs(ms_log(x) - log(x)) / fabs(log(x));
    if (err > worst_log) worst_log = err;
  }
  CHECK(ms_log(1) == 0 && worst_log < 1e-14);
  for (double y = 1e-12; y < 800; y *= 1.0091) {
    double want = -expm1(-y), err = fabs(ms_one_minus_exp_neg(y) - want) / want;
    if (err > worst_exp) worst_exp = err;
  }
  CHECK(ms_one_minus_exp_neg(0) == 0 && worst_exp < 1e-14);
  if (worst_log >= 1e-14 || worst_exp >= 1e-14) fprintf(stderr, "log %g, 1 - exp(-y) %g\n", worst_log, worst_exp);
  printf("test_math: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
