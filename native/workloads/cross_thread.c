/* cross-thread: producer threads allocate, consumer threads free (mimalloc-bench's xmalloc-test
 * in kind; a pipeline, a message queue, a logger thread).
 *
 *   cross-thread --iterations=N --threads=T --min-size=16 --max-size=256 --queue=256 --seed=S
 *
 * T pairs of threads: producer k mallocs N blocks (log-uniform sizes), writes a cookie at both
 * ends and passes each through a single-producer single-consumer ring of --queue entries to
 * consumer k, which checks the cookies and frees it. Every block is freed by a thread other than
 * the one that allocated it. One operation is one malloc or one free: ops = 2 x N x T.
 *
 * Regions: setup, main, harness (--harness-ops blocks per producer through the same rings with
 * the no-op pool: the hand-off's own cost), teardown. Exit 3: out of memory; 4: a cookie changed. */
#include <sched.h>
#include <stdatomic.h>
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "cross-thread";

typedef struct {
  uint64_t iterations, threads, min_size, max_size, queue, seed, every, harness_ops;
} params;

typedef struct { void *block; uint64_t size, seq; } entry;

/* One ring per pair; head and tail on their own cache lines, so the hand-off measures the
 * allocator's cross-thread cost, not false sharing in the harness. */
typedef struct {
  _Alignas(64) _Atomic uint64_t head;   /* next to write (producer) */
  _Alignas(64) _Atomic uint64_t tail;   /* next to read (consumer) */
  _Alignas(64) entry *slots;
  uint64_t cap;
} ring;

typedef struct {
  wl_thread t;
  const params *p;
  ring *q;
  int producer;
} worker;

static void wait_a_little(unsigned *spins) {
  if (++*spins > 64) { sched_yield(); *spins = 0; }
}

static void *produce(worker *w) {
  wl_thread *t = &w->t;
  ring *q = w->q;
  for (uint64_t i = 0; i < t->phase_ops && !t->failed; i++) {
    uint64_t size = wl_log_size(&t->rng, w->p->min_size, w->p->max_size);
    unsigned char *b = wl_malloc(t, size);
    if (!b) break;
    wl_mark(b, size, wl_cookie(t->idx, i));
    t->checksum += size * (i + 1);
    uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    unsigned spins = 0;
    while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= q->cap) wait_a_little(&spins);
    q->slots[h % q->cap] = (entry){b, size, i};
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
  }
  /* A failed producer sends a NULL block, so its consumer stops too. */
  if (t->failed) {
    uint64_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    unsigned spins = 0;
    while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= q->cap) wait_a_little(&spins);
    q->slots[h % q->cap] = (entry){NULL, 0, 0};
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
  }
  return NULL;
}

static void *consume(worker *w) {
  wl_thread *t = &w->t;
  ring *q = w->q;
  unsigned pair = t->idx - (unsigned)w->p->threads;
  for (uint64_t i = 0; i < t->phase_ops; i++) {
    uint64_t tl = atomic_load_explicit(&q->tail, memory_order_relaxed);
    unsigned spins = 0;
    while (atomic_load_explicit(&q->head, memory_order_acquire) == tl) wait_a_little(&spins);
    entry e = q->slots[tl % q->cap];
    atomic_store_explicit(&q->tail, tl + 1, memory_order_release);
    if (!e.block) break;
    if (!wl_check(t, e.block, e.size, wl_cookie(pair, e.seq))) break;
    wl_free(t, e.block);
  }
  return NULL;
}

static void *run_worker(void *arg) {
  worker *w = arg;
  return w->producer ? produce(w) : consume(w);
}

static void phase(worker *ws, ring *rings, const params *p, int harness, uint64_t n) {
  for (unsigned k = 0; k < p->threads; k++) rings[k].head = rings[k].tail = 0;
  wl_phase(ws, sizeof *ws, (unsigned)(2 * p->threads), harness, n, run_worker);
}

int main(int argc, char **argv) {
  params p = {1000000, 1, 16, 256, 256, 1, WL_LATENCY_EVERY, UINT64_MAX};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ms_arg_u64(PROG, a, "iterations", &p.iterations, 1, UINT64_C(1) << 40) ||
        ms_arg_u64(PROG, a, "threads", &p.threads, 1, 512) ||
        ms_arg_u64(PROG, a, "min-size", &p.min_size, 16, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "max-size", &p.max_size, 16, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "queue", &p.queue, 1, UINT64_C(1) << 24) ||
        wl_common_arg(PROG, a, &p.seed, &p.every, &p.harness_ops))
      continue;
    return wl_unknown_arg(PROG, a);
  }
  if (wl_order(PROG, "min-size", p.min_size, "max-size", p.max_size)) return 2;
  if (p.harness_ops == UINT64_MAX) p.harness_ops = p.iterations / 4;
  uint64_t timer_ns = wl_timer_ns();
  unsigned n = (unsigned)(2 * p.threads);

  ms_region_begin("setup");
  worker *ws = calloc(n, sizeof *ws);
  ring *rings = aligned_alloc(64, p.threads * sizeof *rings);
  int bad = !ws || !rings;
  for (unsigned k = 0; !bad && k < p.threads; k++) {
    memset(&rings[k], 0, sizeof rings[k]);
    rings[k].cap = p.queue;
    rings[k].slots = calloc(p.queue, sizeof(entry));
    bad = !rings[k].slots;
  }
  if (!bad) bad = wl_threads_init(&ws[0].t, sizeof *ws, n, p.seed, p.every, p.max_size) != 0;
  for (unsigned i = 0; !bad && i < n; i++) {
    ws[i].p = &p;
    ws[i].producer = i < p.threads;
    ws[i].q = &rings[i % p.threads];
  }
  ms_region_end(0);
  if (bad) { fprintf(stderr, "%s: out of memory for the rings\n", PROG); return EXIT_OOM; }

  ms_region_begin("main");
  phase(ws, rings, &p, 0, p.iterations);
  ms_region_end(2 * p.iterations * p.threads);
  int rc = wl_failure(PROG, &ws[0].t, sizeof *ws, n);
  if (rc) return rc;

  /* The counts and checksum are main's: the harness phase adds to neither. */
  char *result = wl_result_json(PROG, 2 * p.iterations * p.threads, "", &ws[0].t, sizeof *ws, n, p.every, timer_ns);

  if (p.harness_ops) {
    ms_region_begin("harness");
    phase(ws, rings, &p, 1, p.harness_ops);
    ms_region_end(2 * p.harness_ops * p.threads);
  }
  ms_region_begin("teardown");
  for (unsigned i = 0; i < n; i++) free(ws[i].t.scratch);
  for (unsigned k = 0; k < p.threads; k++) free(rings[k].slots);
  ms_region_end(0);
  wl_send(result);
  return 0;
}
