/* When a sampler's samples were taken, per stack: MSR_WHEN buckets of equal width from the run's
 * first record, the width doubling (neighbours merged, in every stack) whenever the run outgrows
 * them, so a run of any length fills between half and all of them. Both samplers keep it (msr_cpu:
 * the kernel paths; msr_sites: the CPU time's user chains), so a cost's phase is read from the
 * times of its own samples (src/memsleuth/analysis/phase.py). */
#ifndef MSR_WHEN_H
#define MSR_WHEN_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MSR_WHEN 32
#define MSR_WHEN_NS 1000000ull /* the first width: 1 ms */

typedef struct {
  uint64_t t0, t_last; /* the first record's time, the last sample's (the kernel's clock) */
  uint64_t width;      /* of a bucket, now */
} msr_when;

/* The bucket of a sample taken at `time`; the `n` histograms at base + k * stride are merged
 * pairwise while it falls beyond the last bucket. */
static inline int msr_when_bucket(msr_when *w, uint64_t time, void *base, int n, size_t stride) {
  if (!w->width) w->width = MSR_WHEN_NS;
  if (!w->t0) w->t0 = time;
  if (time > w->t_last) w->t_last = time;
  uint64_t at = time > w->t0 ? time - w->t0 : 0;
  while (at / w->width >= MSR_WHEN) {
    for (int k = 0; k < n; k++) {
      uint32_t *h = (uint32_t *)((char *)base + (size_t)k * stride);
      for (int b = 0; b < MSR_WHEN / 2; b++) h[b] = h[2 * b] + h[2 * b + 1];
      memset(h + MSR_WHEN / 2, 0, MSR_WHEN / 2 * sizeof *h);
    }
    w->width *= 2;
  }
  return (int)(at / w->width);
}

static inline uint64_t msr_when_span(const msr_when *w) { return w->t_last > w->t0 ? w->t_last - w->t0 : 0; }
#endif
