/* random-mixed: the allocator benchmark of seed 003 (mimalloc-bench's "random mixed" shape).
 *
 *   random-mixed --iterations=N --ws=SLOTS --seed=S --min-size=16 --max-size=1024 --threads=T
 *
 * Each thread owns `ws` slots. Each operation picks a slot at random: if it holds a block, the
 * block is checked and freed; otherwise a block of a random size in [min-size, max-size] is
 * malloc'd and written (a cookie at both ends, so that both ends' pages are touched). One
 * operation is one malloc or one free.
 *
 * Self-check: every freed block's cookies must be intact (else exit 4, "heap corruption"), and
 * the checksum (a sum over the sizes and slots allocated) depends only on the parameters and the
 * seed, never on the allocator: memsleuth compares it across allocators.
 *
 * --harness-only=1 runs the same loop with the same random numbers and slot choices but no
 * malloc or free, to measure the harness's own cost per operation (docs/workloads.md).
 *
 * Latency: a random 1 in --latency-every (default 256) of main's mallocs and frees is timed into
 * a histogram (ms_wl.h); --harness-ops (default iterations / 4) runs the loop once more after
 * main, in region "harness", with no malloc or free: the harness's own cost in every run.
 *
 * Regions: setup (slot arrays), warmup (--warmup-ops per thread, default 2 x ws: fills the
 * working set, so the heap's growth is not timed in main), main (the operations; ops =
 * iterations x threads), harness, teardown (freeing what is left). On malloc returning NULL: "out of
 * memory", exit 3. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memsleuth/probe.h"
#include "ms_args.h"
#include "ms_wl.h"

typedef struct {
  uint64_t iterations, ws, seed, min_size, max_size, threads, harness_only, warmup_ops, every, harness_ops;
} params;

typedef struct __attribute__((aligned(WL_ALIGN))) { /* each thread's on lines of its own (ms_wl.h) */
  const params *p;
  pthread_barrier_t *ready, *go; /* threads: warm up, wait for region main to start, run */
  uint64_t rng;
  unsigned idx;
  void **slots;
  uint32_t *sizes;
  uint64_t checksum, live_bytes, peak_live_bytes, mallocs, frees;
  int failed;  /* EXIT_OOM or EXIT_CORRUPT */
  int harness; /* no malloc or free: the harness alone (--harness-only, region harness) */
  wl_lat lat;  /* sampled latency of malloc and free (ms_wl.h) */
} worker;

static inline uint64_t cookie(unsigned idx, uint64_t slot, uint32_t size) {
  return 0x6d656d736c657574ull ^ ((uint64_t)idx << 48) ^ (slot << 16) ^ size;
}

static void run_ops(worker *w, uint64_t n) {
  const params *p = w->p;
  uint64_t rng = w->rng;
  uint64_t span = p->max_size - p->min_size + 1;
  for (uint64_t i = 0; i < n; i++) {
    /* One random number per operation: the high half picks the slot, the low half the size. */
    uint64_t r = wl_rand(&rng);
    uint64_t slot = wl_below((uint32_t)(r >> 32), p->ws);
    if (w->sizes[slot]) {
      uint32_t size = w->sizes[slot];
      if (!w->harness) {
        unsigned char *b = w->slots[slot];
        uint64_t c = cookie(w->idx, slot, size), head, tail;
        memcpy(&head, b, 8);
        memcpy(&tail, b + size - 8, 8);
        if (head != c || tail != c) {
          w->failed = EXIT_CORRUPT;
          w->rng = rng;
          return;
        }
        if (wl_lat_due(&w->lat)) {
          uint64_t t0 = wl_now_ns();
          free(b);
          wl_lat_add(&w->lat, WL_FREE, wl_now_ns() - t0);
        } else {
          free(b);
        }
        w->slots[slot] = NULL;
      }
      w->sizes[slot] = 0;
      w->live_bytes -= size;
      w->frees++;
    } else {
      uint32_t size = (uint32_t)(p->min_size + wl_below((uint32_t)r, span));
      if (!w->harness) {
        unsigned char *b;
        if (wl_lat_due(&w->lat)) {
          uint64_t t0 = wl_now_ns();
          b = malloc(size);
          wl_lat_add(&w->lat, WL_MALLOC, wl_now_ns() - t0);
        } else {
          b = malloc(size);
        }
        if (!b) {
          w->failed = EXIT_OOM;
          w->rng = rng;
          return;
        }
        uint64_t c = cookie(w->idx, slot, size);
        memcpy(b, &c, 8);
        memcpy(b + size - 8, &c, 8);
        w->slots[slot] = b;
      }
      w->sizes[slot] = size;
      w->live_bytes += size;
      if (w->live_bytes > w->peak_live_bytes) w->peak_live_bytes = w->live_bytes;
      w->checksum += size * (slot + 1);
      w->mallocs++;
    }
  }
  w->rng = rng;
}

/* Latency is sampled in region main only (the warm-up's heap growth is not an operation's cost). */
static void start_sampling(worker *w) {
  w->lat.every = w->p->every;
  w->lat.rng = w->rng ^ 0x5851f42d4c957f2dull;
  w->lat.countdown = w->lat.every ? 1 + wl_rand(&w->lat.rng) % w->lat.every : 0;
}

static void *run_harness(void *arg) {
  worker *w = arg;
  run_ops(w, w->p->harness_ops);
  return NULL;
}

/* Warm-up ops first (outside region main: they fill the working set, so the heap's growth and
 * its first-touch faults are measured in region "warmup"), then the measured ops. */
static void *run_worker(void *arg) {
  worker *w = arg;
  run_ops(w, w->p->warmup_ops);
  if (w->ready) pthread_barrier_wait(w->ready);
  if (w->go) pthread_barrier_wait(w->go);
  start_sampling(w);
  if (!w->failed) run_ops(w, w->p->iterations);
  return NULL;
}

int main(int argc, char **argv) {
  params p = {1000000, 400, 1, 16, 1024, 1, 0, UINT64_MAX, WL_LATENCY_EVERY, UINT64_MAX};
  const ms_opt opts[] = {MS_U64("iterations", &p.iterations, 1, UINT64_C(1) << 40, "operations per thread"),
                         MS_U64("ws", &p.ws, 1, UINT64_C(1) << 28, "slots per thread (the working set)"),
                         WL_SIZE_OPTS(&p.min_size, &p.max_size, 16, UINT64_C(1) << 30),
                         MS_U64("threads", &p.threads, 1, 1024, "threads"),
                         MS_U64("harness-only", &p.harness_only, 0, 1, "1: region main runs on the no-op pool"),
                         MS_U64("warmup-ops", &p.warmup_ops, 0, UINT64_C(1) << 40,
                                "operations per thread before main (default: two per slot)"),
                         WL_SEED_OPTS(&p.seed, &p.every),
                         WL_HARNESS_OPT(&p.harness_ops),
                         MS_END};
  ms_parse("random-mixed", "random mallocs and frees over a working set", opts, argc, argv);
  if (wl_size_order("random-mixed", p.min_size, p.max_size)) return 2;
  /* Default warm-up: two operations per slot, which brings the working set near its steady
   * occupancy (about half the slots full). */
  if (p.warmup_ops == UINT64_MAX) p.warmup_ops = 2 * p.ws;
  /* The harness phase after main: a quarter of main's operations (none when main is the harness). */
  if (p.harness_ops == UINT64_MAX) p.harness_ops = p.harness_only ? 0 : p.iterations / 4;
  uint64_t timer_ns = wl_timer_ns();

  ms_region_begin("setup");
  worker *ws = wl_workers_alloc(p.threads, sizeof *ws);
  for (unsigned t = 0; ws && t < p.threads; t++) {
    ws[t].p = &p;
    ws[t].idx = t;
    ws[t].harness = (int)p.harness_only;
    ws[t].rng = p.seed * 0x100000001b3ull + t + 1;
    ws[t].slots = calloc(p.ws, sizeof(void *));
    ws[t].sizes = calloc(p.ws, sizeof(uint32_t));
    if (!ws[t].slots || !ws[t].sizes) {
      ws = NULL;
      break;
    }
  }
  ms_region_end(0);
  if (!ws) {
    fprintf(stderr, "random-mixed: out of memory for the slot arrays\n");
    return EXIT_OOM;
  }

  pthread_t *tids = p.threads > 1 ? calloc(p.threads, sizeof *tids) : NULL;
  pthread_barrier_t ready, go;
  if (p.threads == 1) {
    ms_region_begin("warmup");
    run_ops(&ws[0], p.warmup_ops);
    ms_region_end(p.warmup_ops);
    ms_region_begin("main");
    start_sampling(&ws[0]);
    if (!ws[0].failed) run_ops(&ws[0], p.iterations);
    ms_region_end(p.iterations);
  } else {
    /* Every thread warms up, then all wait until region main has begun. */
    pthread_barrier_init(&ready, NULL, (unsigned)p.threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)p.threads + 1);
    ms_region_begin("warmup");
    for (unsigned t = 0; t < p.threads; t++) {
      ws[t].ready = &ready;
      ws[t].go = &go;
      pthread_create(&tids[t], NULL, run_worker, &ws[t]);
    }
    pthread_barrier_wait(&ready);
    ms_region_end(p.warmup_ops * p.threads);
    ms_region_begin("main");
    pthread_barrier_wait(&go);
    for (unsigned t = 0; t < p.threads; t++) pthread_join(tids[t], NULL);
    ms_region_end(p.iterations * p.threads);
  }

  uint64_t checksum = 0, peak = 0, mallocs = 0, frees = 0;
  for (unsigned t = 0; t < p.threads; t++) {
    if (ws[t].failed == EXIT_OOM) {
      fprintf(stderr, "random-mixed: out of memory (malloc returned NULL) in thread %u\n", t);
      return EXIT_OOM;
    }
    if (ws[t].failed == EXIT_CORRUPT) {
      fprintf(stderr, "random-mixed: heap corruption: a block's cookie changed in thread %u\n", t);
      return EXIT_CORRUPT;
    }
    checksum += ws[t].checksum;
    peak += ws[t].peak_live_bytes;
    mallocs += ws[t].mallocs;
    frees += ws[t].frees;
  }

  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fprintf(f,
          "{\"workload\":\"random-mixed\",\"ops\":%" PRIu64 ",\"warmup_ops\":%" PRIu64 ",\"mallocs\":%" PRIu64
          ",\"frees\":%" PRIu64 ",\"checksum\":\"%016" PRIx64 "\",\"peak_live_bytes\":%" PRIu64 ",",
          p.iterations * p.threads, p.warmup_ops * p.threads, mallocs, frees, checksum, peak);
  wl_lat **lats = calloc(p.threads, sizeof *lats);
  for (unsigned t = 0; t < p.threads; t++) lats[t] = &ws[t].lat;
  wl_latency_json(f, lats, (unsigned)p.threads, p.every, timer_ns);
  fputs("}", f);
  fclose(f); /* sets buf */

  /* The harness phase: the same loop, same kind of slot choices, no malloc or free, on the
   * slots as main left them (their blocks stay where they are, freed in teardown). */
  if (p.harness_ops) {
    for (unsigned t = 0; t < p.threads; t++) ws[t].harness = 1, ws[t].lat.every = 0;
    ms_region_begin("harness");
    wl_run_threads((unsigned)p.threads, run_harness, ws, sizeof *ws);
    ms_region_end(p.harness_ops * p.threads);
  }

  ms_region_begin("teardown");
  for (unsigned t = 0; t < p.threads; t++) {
    if (!p.harness_only)
      for (uint64_t s = 0; s < p.ws; s++) free(ws[t].slots[s]);
  }
  ms_region_end(0);
  wl_send(buf);
  return 0;
}
