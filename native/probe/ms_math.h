/* Counter arithmetic: pure functions, no I/O, unit-tested in native/tests/test_math.c.
 *
 * A perf reading is (value, time_enabled, time_running). When the kernel multiplexes more
 * events than the PMU has counters, an event only counts while it is scheduled, so the raw
 * value covers `running` out of `enabled` nanoseconds and must be scaled up by enabled/running.
 * Over a region we take the difference of two readings first and scale the difference: scaling
 * each reading and subtracting would weight the region by the whole process's history. */
#ifndef MS_MATH_H
#define MS_MATH_H
#include <stdint.h>

typedef struct {
  uint64_t value;
  uint64_t enabled_ns;
  uint64_t running_ns;
} ms_reading;

typedef enum {
  MS_COUNTED = 0,    /* ran the whole time: value is exact */
  MS_SCALED = 1,     /* ran part of the time: value is an estimate */
  MS_NOT_COUNTED = 2 /* never scheduled in the interval: no value */
} ms_count_kind;

/* b - a, field by field; a counter never goes backwards, so a "negative" difference
 * (a torn or reordered read) is clamped to zero rather than wrapped to 2^64. */
ms_reading ms_reading_delta(ms_reading a, ms_reading b);

/* Scales a (delta) reading for multiplexing. Writes the estimate to *out and returns its kind. */
ms_count_kind ms_scale(ms_reading r, double *out);

/* Fraction of the interval the event was actually counting, in [0,1]; 0 when enabled is 0. */
double ms_running_fraction(ms_reading r);

/* Events per operation; 0 when ops is 0 (a region that reported no ops has no per-op rate). */
double ms_per_op(double count, uint64_t ops);

/* Nanoseconds from a struct timeval-like pair. */
uint64_t ms_tv_ns(long sec, long usec);

/* The two functions of libm that libmsheap's byte sampling needs, here so that the library does
 * not load libm into every process of a tree that would not have (0.06 ms a process here). Within
 * 1e-15 relative of libm's (4e-16 at worst: native/tests/test_math.c).
 * ms_log: the natural logarithm of x > 0 (a normal double). ms_one_minus_exp_neg: 1 - e^-y for
 * y >= 0, without the cancellation of 1.0 - exp(-y) when y is small. */
double ms_log(double x);
double ms_one_minus_exp_neg(double y);
#endif
