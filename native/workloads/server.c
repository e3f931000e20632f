/* server: threads replace random objects in one shared table (larson in kind: a server whose
 * requests allocate objects that other requests, on other threads, free).
 *
 *   server --iterations=N --threads=T --slots=S --min-size=32 --max-size=512 --seed=SEED
 *
 * A table of S slots is filled first (region warmup, by the main thread: every block there is
 * freed by a worker thread that did not allocate it). Then each of T threads does N
 * replacements: pick a slot at random, malloc a block (log-uniform size), write its header and
 * tail cookie, swap it into the slot atomically, check the block it took out and free it. Most
 * frees are of blocks another thread allocated. One operation is one malloc or one free:
 * ops = 2 x N x T.
 *
 * Block layout: [size: 8 bytes][cookie: 8 bytes] ... [cookie: 8 bytes], so min-size >= 24.
 * Regions: setup, warmup, main, harness (--harness-ops replacements per thread on a table of
 * the no-op pool's blocks), teardown. Exit 3: out of memory; 4: a cookie changed. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "server";

typedef struct {
  uint64_t iterations, threads, slots, min_size, max_size, seed, every, harness_ops;
} params;

typedef struct {
  wl_thread t;
  const params *p;
  void **table;
} worker;

static uint64_t block_cookie(uint64_t size) { return wl_cookie(size, size ^ 0x5e77e4); }

static void *fill(wl_thread *t, const params *p, void **table) {
  for (uint64_t s = 0; s < p->slots && !t->failed; s++) {
    uint64_t size = wl_log_size(&t->rng, p->min_size, p->max_size);
    unsigned char *b = wl_malloc(t, size);
    if (!b) break;
    memcpy(b, &size, 8);
    uint64_t c = block_cookie(size);
    memcpy(b + 8, &c, 8);
    memcpy(b + size - 8, &c, 8);
    table[s] = b;
  }
  return NULL;
}

static void *run_worker(void *arg) {
  worker *w = arg;
  wl_thread *t = &w->t;
  const params *p = w->p;
  for (uint64_t i = 0; i < t->phase_ops && !t->failed; i++) {
    uint64_t r = wl_rand(&t->rng);
    uint64_t slot = wl_below((uint32_t)(r >> 32), p->slots);
    uint64_t size = wl_log_size(&t->rng, p->min_size, p->max_size);
    unsigned char *b = wl_malloc(t, size);
    if (!b) break;
    uint64_t c = block_cookie(size);
    memcpy(b, &size, 8);
    memcpy(b + 8, &c, 8);
    memcpy(b + size - 8, &c, 8);
    t->checksum += size;
    unsigned char *old = __atomic_exchange_n(&w->table[slot], b, __ATOMIC_ACQ_REL);
    if (!t->harness) {
      uint64_t osize, oc, tail;
      memcpy(&osize, old, 8);
      memcpy(&oc, old + 8, 8);
      if (osize < p->min_size || osize > p->max_size) { t->failed = EXIT_CORRUPT; break; }
      memcpy(&tail, old + osize - 8, 8);
      if (oc != block_cookie(osize) || tail != oc) { t->failed = EXIT_CORRUPT; break; }
    }
    wl_free(t, old);
  }
  return NULL;
}

static void phase(worker *ws, const params *p, void **table, int harness, uint64_t n) {
  for (unsigned i = 0; i < p->threads; i++) ws[i].table = table;
  wl_phase(ws, sizeof *ws, (unsigned)p->threads, harness, n, run_worker);
}

int main(int argc, char **argv) {
  params p = {500000, 2, 4000, 32, 512, 1, WL_LATENCY_EVERY, UINT64_MAX};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ms_arg_u64(PROG, a, "iterations", &p.iterations, 1, UINT64_C(1) << 40) ||
        ms_arg_u64(PROG, a, "threads", &p.threads, 1, 1024) ||
        ms_arg_u64(PROG, a, "slots", &p.slots, 1, UINT64_C(1) << 28) ||
        ms_arg_u64(PROG, a, "min-size", &p.min_size, 24, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "max-size", &p.max_size, 24, UINT64_C(1) << 30) ||
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
  void **table = calloc(p.slots, sizeof(void *));
  void **pool_table = calloc(p.slots, sizeof(void *));
  wl_thread filler = {0};
  int bad = !ws || !table || !pool_table || wl_threads_init(&ws[0].t, sizeof *ws, n, p.seed, p.every, p.max_size) ||
            wl_threads_init(&filler, sizeof filler, 1, p.seed ^ 0xf111, 0, 64);
  for (unsigned i = 0; !bad && i < n; i++) ws[i].p = &p;
  ms_region_end(0);
  if (bad) { fprintf(stderr, "%s: out of memory for the table\n", PROG); return EXIT_OOM; }

  ms_region_begin("warmup");
  fill(&filler, &p, table);
  ms_region_end(p.slots);
  if (filler.failed) { fprintf(stderr, "%s: out of memory filling the table\n", PROG); return EXIT_OOM; }

  ms_region_begin("main");
  phase(ws, &p, table, 0, p.iterations);
  ms_region_end(2 * p.iterations * p.threads);
  int rc = wl_failure(PROG, &ws[0].t, sizeof *ws, n);
  if (rc) return rc;

  char *result = wl_result_json(PROG, 2 * p.iterations * p.threads, "", &ws[0].t, sizeof *ws, n, p.every, timer_ns);

  if (p.harness_ops) {
    for (uint64_t s = 0; s < p.slots; s++) pool_table[s] = ws[s % n].t.scratch;
    ms_region_begin("harness");
    phase(ws, &p, pool_table, 1, p.harness_ops);
    ms_region_end(2 * p.harness_ops * p.threads);
  }
  ms_region_begin("teardown");
  for (uint64_t s = 0; s < p.slots; s++) free(table[s]);
  for (unsigned i = 0; i < n; i++) free(ws[i].t.scratch);
  ms_region_end(0);
  wl_send(result);
  return 0;
}
