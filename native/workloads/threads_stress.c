/* threads-stress: many threads, each allocating blocks of random sizes with mixed lifetimes
 * (mimalloc-bench's mstress and alloc-test in kind; a runtime's or an application server's
 * worker threads).
 *
 *   threads-stress --iterations=N --threads=8 --min-size=16 --max-size=4096 --medium=64 --long=4096
 *
 * Each thread, N times: malloc a block (log-uniform size), write its cookies, and give it a
 * lifetime at random: short (60%: freed at the thread's next operation), medium (30%: a FIFO of
 * --medium blocks; the oldest is freed) or long (10%: a random slot of --long slots is replaced,
 * so some blocks live for the whole run). Every freed block is checked. One operation is one
 * malloc or one free.
 *
 * Regions (wl_main): setup, main, teardown, harness (--harness-ops iterations per thread on the
 * no-op pool). Exit 3: out of memory; 4: a cookie changed. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "threads-stress";

typedef struct {
  wl_common c;
  uint64_t min_size, max_size, medium, lng;
} params;

typedef struct {
  unsigned char *b;
  uint64_t size;
} block;

typedef struct {
  wl_thread t;
  const params *p;
  block shortlived;
  block *fifo; /* medium lifetimes, a ring */
  uint64_t fifo_head;
  block *slots; /* long lifetimes */
} worker;

static int drop(wl_thread *t, block *x) {
  if (!x->b) return 1;
  if (!wl_check(t, x->b, x->size, wl_cookie(t->idx, x->size))) return 0;
  wl_free(t, x->b);
  x->b = NULL;
  return 1;
}

static void *run_worker(void *arg) {
  worker *w = arg;
  wl_thread *t = &w->t;
  const params *p = w->p;
  for (uint64_t i = 0; i < t->phase_ops && !t->failed; i++) {
    if (!drop(t, &w->shortlived)) break;
    uint64_t size = wl_log_size(&t->rng, p->min_size, p->max_size);
    unsigned char *b = wl_malloc(t, size);
    if (!b) break;
    wl_mark(b, size, wl_cookie(t->idx, size));
    t->checksum += size;
    uint64_t r = wl_rand(&t->rng);
    uint64_t pick = wl_below((uint32_t)r, 100);
    block x = {b, size};
    if (pick < 60) {
      w->shortlived = x;
    } else if (pick < 90) {
      block *slot = &w->fifo[w->fifo_head];
      if (!drop(t, slot)) break;
      *slot = x;
      w->fifo_head = (w->fifo_head + 1) % p->medium;
    } else {
      block *slot = &w->slots[wl_below((uint32_t)(r >> 32), p->lng)];
      if (!drop(t, slot)) break;
      *slot = x;
    }
  }
  return NULL;
}

static void release_all(void *workers, void *ctx, int harness) {
  worker *ws = workers;
  const params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++) {
    worker *w = &ws[i];
    drop(&w->t, &w->shortlived);
    for (uint64_t k = 0; k < p->medium; k++) drop(&w->t, &w->fifo[k]);
    for (uint64_t k = 0; k < p->lng; k++) drop(&w->t, &w->slots[k]);
  }
}

static int setup(void *workers, void *ctx) {
  worker *ws = workers;
  params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++) {
    ws[i].p = p;
    ws[i].fifo = calloc(p->medium, sizeof(block));
    ws[i].slots = calloc(p->lng, sizeof(block));
    if (!ws[i].fifo || !ws[i].slots) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  params p = {{200000, 8, 1, WL_LATENCY_EVERY, UINT64_MAX}, 16, 4096, 64, 4096};
  const ms_opt opts[] = {WL_COMMON_OPTS(&p.c, "blocks each thread allocates", 1024, "threads"),
                         WL_SIZE_OPTS(&p.min_size, &p.max_size, 16, UINT64_C(1) << 30),
                         MS_U64("medium", &p.medium, 1, 1 << 24, "blocks a medium lifetime lasts"),
                         MS_U64("long", &p.lng, 1, 1 << 24, "slots of long-lived blocks per thread"), MS_END};
  ms_parse(PROG, "many threads, blocks of mixed sizes and lifetimes", opts, argc, argv);
  if (wl_size_order(PROG, p.min_size, p.max_size)) return 2;
  wl_program prog = {.name = PROG,
                     .stride = sizeof(worker),
                     .c = &p.c,
                     .scratch_bytes = p.max_size,
                     .ops_per_iteration = 0,
                     .ctx = &p,
                     .setup = setup,
                     .run = run_worker,
                     .release = release_all};
  return wl_main(&prog);
}
