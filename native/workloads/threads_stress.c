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
 * Regions: setup, main, harness (--harness-ops iterations per thread on the no-op pool),
 * teardown. Exit 3: out of memory; 4: a cookie changed. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "threads-stress";

typedef struct {
  uint64_t iterations, threads, min_size, max_size, medium, lng, seed, every, harness_ops;
} params;

typedef struct { unsigned char *b; uint64_t size; } block;

typedef struct {
  wl_thread t;
  const params *p;
  block shortlived;
  block *fifo;          /* medium lifetimes, a ring */
  uint64_t fifo_head;
  block *slots;         /* long lifetimes */
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

static void release_all(worker *w, const params *p) {
  drop(&w->t, &w->shortlived);
  for (uint64_t k = 0; k < p->medium; k++) drop(&w->t, &w->fifo[k]);
  for (uint64_t k = 0; k < p->lng; k++) drop(&w->t, &w->slots[k]);
}

int main(int argc, char **argv) {
  params p = {200000, 8, 16, 4096, 64, 4096, 1, WL_LATENCY_EVERY, UINT64_MAX};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ms_arg_u64(PROG, a, "iterations", &p.iterations, 1, UINT64_C(1) << 40) ||
        ms_arg_u64(PROG, a, "threads", &p.threads, 1, 1024) ||
        ms_arg_u64(PROG, a, "min-size", &p.min_size, 16, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "max-size", &p.max_size, 16, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "medium", &p.medium, 1, 1 << 24) ||
        ms_arg_u64(PROG, a, "long", &p.lng, 1, 1 << 24) ||
        wl_common_arg(PROG, a, &p.seed, &p.every, &p.harness_ops))
      continue;
    return wl_unknown_arg(PROG, a);
  }
  if (wl_order(PROG, "min-size", p.min_size, "max-size", p.max_size)) return 2;
  if (p.harness_ops == UINT64_MAX) p.harness_ops = p.iterations / 4;
  uint64_t timer_ns = wl_timer_ns();
  unsigned n = (unsigned)p.threads;

  ms_region_begin("setup");
  worker *ws = calloc(n, sizeof *ws);
  int bad = !ws || wl_threads_init(&ws[0].t, sizeof *ws, n, p.seed, p.every, p.max_size);
  for (unsigned i = 0; !bad && i < n; i++) {
    ws[i].p = &p;
    ws[i].fifo = calloc(p.medium, sizeof(block));
    ws[i].slots = calloc(p.lng, sizeof(block));
    bad = !ws[i].fifo || !ws[i].slots;
  }
  ms_region_end(0);
  if (bad) { fprintf(stderr, "%s: out of memory in setup\n", PROG); return EXIT_OOM; }

  ms_region_begin("main");
  wl_phase(ws, sizeof *ws, n, 0, p.iterations, run_worker);
  uint64_t ops = wl_calls(ws, sizeof *ws, n);
  ms_region_end(ops);
  int rc = wl_failure(PROG, &ws[0].t, sizeof *ws, n);
  if (rc) return rc;

  char *result = wl_result_json(PROG, ops, "", &ws[0].t, sizeof *ws, n, p.every, timer_ns);

  ms_region_begin("teardown");
  for (unsigned i = 0; i < n; i++) release_all(&ws[i], &p);
  ms_region_end(0);
  if (p.harness_ops) {
    ms_region_begin("harness");
    wl_phase(ws, sizeof *ws, n, 1, p.harness_ops, run_worker);
    ms_region_end(wl_calls(ws, sizeof *ws, n));
    for (unsigned i = 0; i < n; i++) release_all(&ws[i], &p);
  }
  for (unsigned i = 0; i < n; i++) free(ws[i].t.scratch);
  wl_send(result);
  return 0;
}
