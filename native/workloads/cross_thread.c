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
 * Regions (wl_main): setup, main, teardown, harness (--harness-ops blocks per producer through the
 * same rings with the no-op pool: the hand-off's own cost). Exit 3: out of memory; 4: a cookie changed. */
#include <sched.h>
#include <stdatomic.h>
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "cross-thread";

typedef struct {
  void *block;
  uint64_t size, seq;
} entry;

/* One ring per pair; head and tail on their own cache lines, so the hand-off measures the
 * allocator's cross-thread cost, not false sharing in the harness. */
typedef struct {
  _Alignas(64) _Atomic uint64_t head; /* next to write (producer) */
  _Alignas(64) _Atomic uint64_t tail; /* next to read (consumer) */
  _Alignas(64) entry *slots;
  uint64_t cap;
} ring;

typedef struct {
  wl_common c; /* threads: producer-consumer pairs */
  uint64_t min_size, max_size, queue;
  ring *rings; /* one per pair, made in setup */
} params;

typedef struct {
  wl_thread t;
  const params *p;
  ring *q;
  int producer;
} worker;

static void wait_a_little(unsigned *spins) {
  if (++*spins > 64) {
    sched_yield();
    *spins = 0;
  }
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
  unsigned pair = t->idx - (unsigned)w->p->c.threads;
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

static void phase(void *workers, void *ctx, int harness, uint64_t n) {
  params *p = ctx;
  for (unsigned k = 0; k < p->c.threads; k++) p->rings[k].head = p->rings[k].tail = 0;
  wl_phase(workers, sizeof(worker), (unsigned)(2 * p->c.threads), harness, n, run_worker);
}

/* Workers 0..T-1 produce into ring k, T..2T-1 consume from it. */
static int setup(void *workers, void *ctx) {
  worker *ws = workers;
  params *p = ctx;
  if (!(p->rings = aligned_alloc(64, p->c.threads * sizeof(ring)))) return 1;
  for (unsigned k = 0; k < p->c.threads; k++) {
    memset(&p->rings[k], 0, sizeof(ring));
    p->rings[k].cap = p->queue;
    if (!(p->rings[k].slots = calloc(p->queue, sizeof(entry)))) return 1;
  }
  for (unsigned i = 0; i < 2 * p->c.threads; i++) {
    ws[i].p = p;
    ws[i].producer = i < p->c.threads;
    ws[i].q = &p->rings[i % p->c.threads];
  }
  return 0;
}

int main(int argc, char **argv) {
  params p = {{1000000, 1, 1, WL_LATENCY_EVERY, UINT64_MAX}, 16, 256, 256, NULL};
  const ms_opt opts[] = {WL_COMMON_OPTS(&p.c, "blocks each producer allocates", 512, "producer-consumer pairs"),
                         WL_SIZE_OPTS(&p.min_size, &p.max_size, 16, UINT64_C(1) << 30),
                         MS_U64("queue", &p.queue, 1, UINT64_C(1) << 24, "entries in each ring"), MS_END};
  ms_parse(PROG, "producers allocate, consumers free", opts, argc, argv);
  if (wl_size_order(PROG, p.min_size, p.max_size)) return 2;
  /* One operation is one malloc or one free: 2 x N x T, and 2T workers each do N. */
  wl_program prog = {.name = PROG,
                     .stride = sizeof(worker),
                     .c = &p.c,
                     .per_thread = 2,
                     .scratch_bytes = p.max_size,
                     .ops_per_iteration = 1,
                     .ctx = &p,
                     .setup = setup,
                     .phase = phase};
  return wl_main(&prog);
}
