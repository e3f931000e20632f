/* Shared by the allocator workloads (docs/workloads.md): random numbers, the allocator calls
 * with their sampled latency, the harness's no-op pool, threads, and the result's JSON.
 *
 * Every allocator call of a workload goes through wl_malloc/wl_free/wl_realloc. In a harness
 * phase (t->harness) they are a no-op pool: every block is the thread's one scratch area, so the
 * loop around the calls (random numbers, slot choice, writes into the block, hand-offs) runs as
 * it does for real, and its time per operation is the harness's own cost (region "harness"). */
#ifndef MS_WL_H
#define MS_WL_H
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "memsleuth/probe.h"
#include "ms_args.h"

/* Time 1 in this many allocator calls by default. Each timed call costs about 60 ns here (two
 * clock reads, the histogram, a mispredicted branch): 1 in 64 added 7% to random-mixed's 14 ns
 * ops (bench/latency_cost.py), 1 in 256 keeps it near 2%. */
#define WL_LATENCY_EVERY 256

#define EXIT_OOM 3
#define EXIT_CORRUPT 4

/* wyrand: one 64x64->128 multiply per number, passes BigCrush; cheap next to malloc. */
static inline uint64_t wl_rand(uint64_t *s) {
  *s += 0xa0761d6478bd642full;
  __uint128_t m = (__uint128_t)*s * (*s ^ 0xe7037ed1a0b428dbull);
  return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

/* Multiply-shift maps 32 random bits onto [0, n) without a division. */
static inline uint64_t wl_below(uint32_t r, uint64_t n) { return (uint64_t)(((uint64_t)r * n) >> 32); }

/* A size in [lo, hi], log-uniform by octave: an octave [lo*2^k, lo*2^(k+1)) drawn uniformly, then a
 * size uniformly inside it. As many blocks of 16..31 bytes as of 512..1023: the shape of real
 * programs' small allocations. Integer arithmetic only (pow() cost ~20 ns, more than some
 * allocators' malloc, and it would be the harness's largest part). */
static inline uint64_t wl_log_size(uint64_t *rng, uint64_t lo, uint64_t hi) {
  if (lo >= hi) return lo;
  uint64_t r = wl_rand(rng);
  unsigned octaves = 64u - (unsigned)__builtin_clzll(hi / lo); /* lo << (octaves - 1) <= hi */
  uint64_t base = lo << wl_below((uint32_t)r, octaves);
  uint64_t top = 2 * base - 1 < hi ? 2 * base - 1 : hi;
  return base + wl_below((uint32_t)(r >> 32), top - base + 1);
}

static inline uint64_t wl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Latency histogram, log-linear: values below 16 ns exactly, above that 8 buckets per power of
 * two, so a reported percentile is at most 12.5% above the true one (it is a bucket's upper edge). */
#define WL_LAT_BUCKETS (16 + 8 * 60)
enum { WL_MALLOC, WL_FREE, WL_REALLOC, WL_NOPS };
static const char *const wl_op_names[WL_NOPS] = {"malloc", "free", "realloc"};

typedef struct {
  uint64_t n, max, sum;
  uint64_t counts[WL_LAT_BUCKETS];
} wl_hist;

static inline unsigned wl_bucket(uint64_t v) {
  if (v < 16) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 4 */
  unsigned b = 16 + (e - 4) * 8 + (unsigned)((v >> (e - 3)) & 7);
  return b < WL_LAT_BUCKETS ? b : WL_LAT_BUCKETS - 1;
}

/* The largest value bucket b holds. */
static inline uint64_t wl_bucket_high(unsigned b) {
  if (b < 16) return b;
  unsigned e = (b - 16) / 8 + 4, sub = (b - 16) % 8;
  return ((uint64_t)(9 + sub) << (e - 3)) - 1;
}

/* Which operations are timed: a random countdown with mean `every`, so the sampled ones never
 * alias with a workload's own period (a fixed stride could time only frees, say). */
typedef struct {
  uint64_t every, countdown, rng;
  wl_hist h[WL_NOPS];
} wl_lat;

static inline int wl_lat_due(wl_lat *l) {
  if (!l->every || --l->countdown) return 0;
  l->countdown = 1 + wl_rand(&l->rng) % (2 * l->every - 1);
  return 1;
}

static inline void wl_lat_add(wl_lat *l, int op, uint64_t ns) {
  wl_hist *h = &l->h[op];
  h->n++;
  h->sum += ns;
  if (ns > h->max) h->max = ns;
  h->counts[wl_bucket(ns)]++;
}

/* The workers of an array start on their own cache lines, two of them (the adjacent-line
 * prefetcher pairs them): a worker's fields written at every operation would otherwise share a
 * line with its neighbour's, and the harness itself would stop scaling with the threads (16
 * threads of threads-stress on 16 cores: the harness 3.7x one thread's rate, not 16x). */
#define WL_ALIGN 128

/* n zeroed workers of `size` bytes each (a multiple of WL_ALIGN: their type is aligned), each on
 * lines of its own; NULL when out of memory. */
static inline void *wl_workers_alloc(size_t n, size_t size) {
  void *p = aligned_alloc(WL_ALIGN, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

/* One worker thread's common state, first in each workload's worker (which it aligns). */
typedef struct __attribute__((aligned(WL_ALIGN))) {
  unsigned idx;
  int harness; /* 1: the calls are the no-op pool (region "harness") */
  int failed;  /* EXIT_OOM or EXIT_CORRUPT */
  uint64_t rng;
  unsigned char *scratch; /* the no-op pool's one block, as large as the largest request */
  uint64_t phase_ops;     /* operations (or blocks, buffers) each thread does in this phase */
  uint64_t mallocs, frees, reallocs, checksum;
  wl_lat lat;
} wl_thread;

static inline void *wl_malloc(wl_thread *t, size_t n) {
  if (t->harness) return t->scratch;
  void *p;
  if (wl_lat_due(&t->lat)) {
    uint64_t t0 = wl_now_ns();
    p = malloc(n);
    wl_lat_add(&t->lat, WL_MALLOC, wl_now_ns() - t0);
  } else {
    p = malloc(n);
  }
  if (!p) t->failed = EXIT_OOM;
  t->mallocs++;
  return p;
}

static inline void wl_free(wl_thread *t, void *p) {
  t->frees++;
  if (t->harness) return;
  if (wl_lat_due(&t->lat)) {
    uint64_t t0 = wl_now_ns();
    free(p);
    wl_lat_add(&t->lat, WL_FREE, wl_now_ns() - t0);
  } else {
    free(p);
  }
}

static inline void *wl_realloc(wl_thread *t, void *p, size_t n) {
  t->reallocs++;
  if (t->harness) return t->scratch;
  void *q;
  if (wl_lat_due(&t->lat)) {
    uint64_t t0 = wl_now_ns();
    q = realloc(p, n);
    wl_lat_add(&t->lat, WL_REALLOC, wl_now_ns() - t0);
  } else {
    q = realloc(p, n);
  }
  if (!q) t->failed = EXIT_OOM;
  return q;
}

/* A cookie at both ends of a block (blocks are at least 16 bytes): a changed one is heap
 * corruption. In a harness phase every block is the same scratch area, so nothing is checked. */
static inline uint64_t wl_cookie(uint64_t a, uint64_t b) {
  return 0x6d656d736c657574ull ^ (a << 40) ^ (b * 0x9e3779b97f4a7c15ull);
}

static inline void wl_mark(void *block, size_t size, uint64_t c) {
  memcpy(block, &c, 8);
  memcpy((unsigned char *)block + size - 8, &c, 8);
}

static inline int wl_check(wl_thread *t, const void *block, size_t size, uint64_t c) {
  uint64_t head, tail;
  memcpy(&head, block, 8);
  memcpy(&tail, (const unsigned char *)block + size - 8, 8);
  if (!t->harness && (head != c || tail != c)) {
    t->failed = EXIT_CORRUPT;
    return 0;
  }
  return 1;
}

/* The cost of one timed call's two clock reads, measured: the smallest of 1000 back-to-back
 * pairs. A sampled latency includes it once. */
static inline uint64_t wl_timer_ns(void) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 1000; i++) {
    uint64_t a = wl_now_ns(), b = wl_now_ns();
    if (b - a < best) best = b - a;
  }
  return best;
}

/* Common setup of n threads: seeds, sampling, scratch areas of scratch_bytes each. */
static inline int wl_threads_init(wl_thread *ts, size_t stride, unsigned n, uint64_t seed, uint64_t every,
                                  size_t scratch_bytes) {
  for (unsigned i = 0; i < n; i++) {
    wl_thread *t = (wl_thread *)((char *)ts + i * stride);
    t->idx = i;
    t->rng = seed * 0x100000001b3ull + i + 1;
    t->lat.every = every;
    t->lat.rng = t->rng ^ 0x5851f42d4c957f2dull;
    t->lat.countdown = every ? 1 + wl_rand(&t->lat.rng) % every : 0;
    /* Cache-line aligned and rounded: the harness's blocks never share a line between threads. */
    size_t bytes = (scratch_bytes + 63) & ~(size_t)63;
    t->scratch = aligned_alloc(64, bytes ? bytes : 64);
    if (!t->scratch) return -1;
    memset(t->scratch, 0, bytes ? bytes : 64);
  }
  return 0;
}

/* Runs fn on n threads (one thread: on this one) and waits for them all. */
static inline void wl_run_threads(unsigned n, void *(*fn)(void *), void *arr, size_t stride) {
  if (n == 1) {
    fn(arr);
    return;
  }
  pthread_t *tids = calloc(n, sizeof *tids);
  for (unsigned i = 0; i < n; i++) pthread_create(&tids[i], NULL, fn, (char *)arr + i * stride);
  for (unsigned i = 0; i < n; i++) pthread_join(tids[i], NULL);
  free(tids);
}

/* One phase (main or harness) on n threads whose wl_thread is the first member of a stride-byte
 * worker: each does `ops`, with the allocator (harness 0) or the no-op pool (1). The call
 * counters restart; the checksum and the latency do not (main's result is read before the
 * harness phase). */
static inline void wl_phase(void *workers, size_t stride, unsigned n, int harness, uint64_t ops, void *(*fn)(void *)) {
  for (unsigned i = 0; i < n; i++) {
    wl_thread *t = (wl_thread *)((char *)workers + i * stride);
    t->harness = harness;
    t->phase_ops = ops;
    t->mallocs = t->frees = t->reallocs = 0;
  }
  wl_run_threads(n, fn, workers, stride);
}

/* The allocator calls n threads made in the last phase: the ops of workloads that count calls. */
static inline uint64_t wl_calls(void *workers, size_t stride, unsigned n) {
  uint64_t c = 0;
  for (unsigned i = 0; i < n; i++) {
    wl_thread *t = (wl_thread *)((char *)workers + i * stride);
    c += t->mallocs + t->frees + t->reallocs;
  }
  return c;
}

/* lo must not exceed hi: else one line and exit code 2 (for main to return). */
static inline int wl_order(const char *prog, const char *lo_name, uint64_t lo, const char *hi_name, uint64_t hi) {
  if (lo <= hi) return 0;
  fprintf(stderr, "%s: --%s must not exceed --%s\n", prog, lo_name, hi_name);
  return 2;
}

/* The block-size range of the allocator workloads: --min-size and --max-size, each in [lo, hi]. */
#define WL_SIZE_OPTS(min, max, lo, hi)                            \
  MS_U64("min-size", (min), (lo), (hi), "smallest block, bytes"), \
      MS_U64("max-size", (max), (lo), (hi), "largest block, bytes")

/* The size range in order: else one line and exit code 2 (for main to return). */
static inline int wl_size_order(const char *prog, uint64_t min, uint64_t max) {
  return wl_order(prog, "min-size", min, "max-size", max);
}

/* The first failure of n threads, reported on stderr as the workload's exit code (0: none). */
static inline int wl_failure(const char *prog, wl_thread *ts, size_t stride, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    wl_thread *t = (wl_thread *)((char *)ts + i * stride);
    if (t->failed == EXIT_OOM) {
      fprintf(stderr, "%s: out of memory (an allocation returned NULL) in thread %u\n", prog, i);
      return EXIT_OOM;
    }
    if (t->failed == EXIT_CORRUPT) {
      fprintf(stderr, "%s: heap corruption: a block's cookie changed in thread %u\n", prog, i);
      return EXIT_CORRUPT;
    }
  }
  return 0;
}

/* The latency histograms of n samplers merged, as the result's "latency" member: {"every": mean
 * operations between samples, "timer_ns", "ops": {"malloc": {n, max, sum, "buckets": [[highest
 * ns, count], ...]}}}, non-empty buckets only. */
static inline void wl_latency_json(FILE *f, wl_lat *const *lats, unsigned n, uint64_t every, uint64_t timer_ns) {
  static wl_hist all[WL_NOPS];
  memset(all, 0, sizeof all);
  for (unsigned i = 0; i < n; i++)
    for (int op = 0; op < WL_NOPS; op++) {
      const wl_hist *h = &lats[i]->h[op];
      all[op].n += h->n;
      all[op].sum += h->sum;
      if (h->max > all[op].max) all[op].max = h->max;
      for (unsigned b = 0; b < WL_LAT_BUCKETS; b++) all[op].counts[b] += h->counts[b];
    }
  fprintf(f, "\"latency\":{\"every\":%" PRIu64 ",\"timer_ns\":%" PRIu64 ",\"ops\":{", every, timer_ns);
  int first = 1;
  for (int op = 0; op < WL_NOPS; op++) {
    if (!all[op].n) continue;
    fprintf(f, "%s\"%s\":{\"n\":%" PRIu64 ",\"max\":%" PRIu64 ",\"sum\":%" PRIu64 ",\"buckets\":[", first ? "" : ",",
            wl_op_names[op], all[op].n, all[op].max, all[op].sum);
    first = 0;
    int fb = 1;
    for (unsigned b = 0; b < WL_LAT_BUCKETS; b++) {
      if (!all[op].counts[b]) continue;
      fprintf(f, "%s[%" PRIu64 ",%" PRIu64 "]", fb ? "" : ",", wl_bucket_high(b), all[op].counts[b]);
      fb = 0;
    }
    fputs("]}", f);
  }
  fputs("}}", f);
}

/* The common part of the result: the calls made, the checksum, and the merged latency. */
static inline void wl_result_common(FILE *f, wl_thread *ts, size_t stride, unsigned n, uint64_t every,
                                    uint64_t timer_ns) {
  uint64_t mallocs = 0, frees = 0, reallocs = 0, checksum = 0;
  wl_lat **lats = calloc(n, sizeof *lats);
  for (unsigned i = 0; i < n; i++) {
    wl_thread *t = (wl_thread *)((char *)ts + i * stride);
    mallocs += t->mallocs;
    frees += t->frees;
    reallocs += t->reallocs;
    checksum += t->checksum;
    lats[i] = &t->lat;
  }
  fprintf(f, "\"mallocs\":%" PRIu64 ",\"frees\":%" PRIu64 ",\"reallocs\":%" PRIu64 ",\"checksum\":\"%016" PRIx64 "\",",
          mallocs, frees, reallocs, checksum);
  wl_latency_json(f, lats, n, every, timer_ns);
  free(lats);
}

/* Region main's result, built before the harness phase (which moves the counters) and sent at
 * the end: {"workload", "ops", extra members (JSON, may be ""), the calls, checksum, latency}. */
static inline char *wl_result_json(const char *prog, uint64_t ops, const char *extra, wl_thread *ts, size_t stride,
                                   unsigned n, uint64_t every, uint64_t timer_ns) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  fprintf(f, "{\"workload\":\"%s\",\"ops\":%" PRIu64 ",%s%s", prog, ops, extra, *extra ? "," : "");
  wl_result_common(f, ts, stride, n, every, timer_ns);
  fputs("}", f);
  fclose(f); /* sets buf */
  return buf;
}

/* Sends a result (ms_result puts it on stdout and on memsleuth's channel) and frees it. */
static inline void wl_send(char *json) {
  if (json) ms_result(json);
  free(json);
}

/* The options every allocator workload shares, as entries of its option table. */
#define WL_SEED_OPTS(seed, every)                                  \
  MS_U64("seed", seed, 0, UINT64_MAX, "the random numbers' seed"), \
      MS_U64("latency-every", every, 0, UINT64_C(1) << 30,         \
             "time one allocator call in this many on average (0: none)")
#define WL_HARNESS_OPT(harness)                        \
  MS_U64("harness-ops", harness, 0, UINT64_C(1) << 40, \
         "operations per thread in region harness, on the no-op pool (default: a quarter of main's)")

/* The parameters every threaded allocator workload has (the first member of its params, `c`),
 * and their options: the per-thread operations, the threads, the seed, the latency sampling and
 * the harness phase's operations (UINT64_MAX: a quarter of the iterations, rounded up). */
typedef struct {
  uint64_t iterations, threads, seed, every, harness_ops;
} wl_common;

#define WL_COMMON_OPTS(c, iterations_about, max_threads, threads_about)                                       \
  MS_U64("iterations", &(c)->iterations, 1, UINT64_C(1) << 40, iterations_about),                             \
      MS_U64("threads", &(c)->threads, 1, max_threads, threads_about), WL_SEED_OPTS(&(c)->seed, &(c)->every), \
      WL_HARNESS_OPT(&(c)->harness_ops)

/* The lifecycle most allocator workloads share (wl_main): worker threads, each a struct whose
 * first member is its wl_thread, run a phase of `iterations` operations with the allocator
 * (region main) and a phase of `harness_ops` with the no-op pool (region harness). The program
 * fills in what differs; a hook left NULL does nothing (phase: wl_phase with run). */
typedef struct {
  const char *name;
  size_t stride;                          /* sizeof the program's worker */
  const wl_common *c;                     /* iterations and harness_ops are per worker */
  unsigned per_thread;                    /* workers per thread (0: one) */
  size_t scratch_bytes;                   /* the no-op pool's block: the largest request */
  uint64_t ops_per_iteration;             /* a phase's ops: iterations x workers x this; 0: the allocator calls made */
  void *ctx;                              /* the program's parameters and shared state, given to every hook */
  int (*setup)(void *workers, void *ctx); /* region setup; nonzero: out of memory */
  int (*warmup)(void *workers, void *ctx, uint64_t *ops); /* region warmup, if any; nonzero: out of memory */
  void *(*run)(void *worker);                             /* one worker's phase_ops, on its thread */
  void (*phase)(void *workers, void *ctx, int harness, uint64_t ops); /* replaces wl_phase(run) */
  void (*extra)(FILE *f, void *workers, void *ctx);                   /* result members after "ops" */
  void (*release)(void *workers, void *ctx, int harness);             /* frees the blocks left after a phase */
} wl_program;

static inline void wl_run_phase(const wl_program *prog, void *ws, unsigned n, int harness, uint64_t ops) {
  if (prog->phase) prog->phase(ws, prog->ctx, harness, ops);
  else wl_phase(ws, prog->stride, n, harness, ops, prog->run);
}

static inline uint64_t wl_phase_ops(const wl_program *prog, void *ws, unsigned n, uint64_t iterations) {
  if (prog->ops_per_iteration) return iterations * n * prog->ops_per_iteration;
  return wl_calls(ws, prog->stride, n);
}

/* Regions setup, [warmup], main, teardown, [harness]; the result is main's, sent last. Returns
 * the exit code: 0, EXIT_OOM or EXIT_CORRUPT (with one line on stderr). */
static inline int wl_main(const wl_program *prog) {
  const wl_common *c = prog->c;
  unsigned n = (unsigned)c->threads * (prog->per_thread ? prog->per_thread : 1);
  uint64_t harness_ops = c->harness_ops == UINT64_MAX ? (c->iterations + 3) / 4 : c->harness_ops;
  uint64_t timer_ns = wl_timer_ns();

  ms_region_begin("setup");
  void *ws = wl_workers_alloc(n, prog->stride);
  int bad = !ws || wl_threads_init(ws, prog->stride, n, c->seed, c->every, harness_ops ? prog->scratch_bytes : 64) ||
            (prog->setup && prog->setup(ws, prog->ctx));
  ms_region_end(0);
  if (bad) {
    fprintf(stderr, "%s: out of memory in setup\n", prog->name);
    return EXIT_OOM;
  }

  if (prog->warmup) {
    uint64_t ops = 0;
    ms_region_begin("warmup");
    bad = prog->warmup(ws, prog->ctx, &ops);
    ms_region_end(ops);
    if (bad) {
      fprintf(stderr, "%s: out of memory in the warm-up\n", prog->name);
      return EXIT_OOM;
    }
  }

  ms_region_begin("main");
  wl_run_phase(prog, ws, n, 0, c->iterations);
  uint64_t ops = wl_phase_ops(prog, ws, n, c->iterations);
  ms_region_end(ops);
  int rc = wl_failure(prog->name, ws, prog->stride, n);
  if (rc) return rc;

  /* The counts and checksum are main's: read before the harness phase moves them. */
  char *extra = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&extra, &len);
  if (f && prog->extra) prog->extra(f, ws, prog->ctx);
  if (f) fclose(f); /* sets extra */
  char *result = wl_result_json(prog->name, ops, extra ? extra : "", ws, prog->stride, n, c->every, timer_ns);
  free(extra);

  ms_region_begin("teardown");
  if (prog->release) prog->release(ws, prog->ctx, 0);
  ms_region_end(0);
  if (harness_ops) {
    ms_region_begin("harness");
    wl_run_phase(prog, ws, n, 1, harness_ops);
    ms_region_end(wl_phase_ops(prog, ws, n, harness_ops));
    if (prog->release) prog->release(ws, prog->ctx, 1);
  }
  for (unsigned i = 0; i < n; i++) free(((wl_thread *)((char *)ws + i * prog->stride))->scratch);
  wl_send(result);
  return 0;
}
#endif
