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
 * Regions (wl_main): setup, warmup, main, teardown, harness (--harness-ops replacements per thread
 * on a table of the no-op pool's blocks). Exit 3: out of memory; 4: a cookie changed. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "server";

typedef struct {
  wl_common c;
  uint64_t slots, min_size, max_size;
  void **table, **pool_table; /* the shared table, and the harness's (every slot a scratch area) */
  wl_thread filler;           /* fills the table in the warm-up */
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
      if (osize < p->min_size || osize > p->max_size) {
        t->failed = EXIT_CORRUPT;
        break;
      }
      memcpy(&tail, old + osize - 8, 8);
      if (oc != block_cookie(osize) || tail != oc) {
        t->failed = EXIT_CORRUPT;
        break;
      }
    }
    wl_free(t, old);
  }
  return NULL;
}

static void phase(void *workers, void *ctx, int harness, uint64_t n) {
  worker *ws = workers;
  params *p = ctx;
  if (harness)
    for (uint64_t s = 0; s < p->slots; s++) p->pool_table[s] = ws[s % p->c.threads].t.scratch;
  for (unsigned i = 0; i < p->c.threads; i++) ws[i].table = harness ? p->pool_table : p->table;
  wl_phase(ws, sizeof *ws, (unsigned)p->c.threads, harness, n, run_worker);
}

static int setup(void *workers, void *ctx) {
  worker *ws = workers;
  params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++) ws[i].p = p;
  p->table = calloc(p->slots, sizeof(void *));
  p->pool_table = calloc(p->slots, sizeof(void *));
  return !p->table || !p->pool_table || wl_threads_init(&p->filler, sizeof p->filler, 1, p->c.seed ^ 0xf111, 0, 64);
}

static int warmup(void *workers, void *ctx, uint64_t *ops) {
  params *p = ctx;
  fill(&p->filler, p, p->table);
  *ops = p->slots;
  return p->filler.failed;
}

static void release(void *workers, void *ctx, int harness) {
  params *p = ctx;
  if (!harness)
    for (uint64_t s = 0; s < p->slots; s++) free(p->table[s]);
}

int main(int argc, char **argv) {
  params p = {{500000, 2, 1, WL_LATENCY_EVERY, UINT64_MAX}, 4000, 32, 512, NULL, NULL, {0}};
  const ms_opt opts[] = {WL_COMMON_OPTS(&p.c, "requests each thread serves", 1024, "threads"),
                         MS_U64("slots", &p.slots, 1, UINT64_C(1) << 28, "entries in the shared table"),
                         WL_SIZE_OPTS(&p.min_size, &p.max_size, 24, UINT64_C(1) << 30), MS_END};
  ms_parse(PROG, "threads replace entries of a shared table", opts, argc, argv);
  if (wl_size_order(PROG, p.min_size, p.max_size)) return 2;
  /* One request is one malloc and one free. */
  wl_program prog = {.name = PROG,
                     .stride = sizeof(worker),
                     .c = &p.c,
                     .scratch_bytes = p.max_size,
                     .ops_per_iteration = 2,
                     .ctx = &p,
                     .setup = setup,
                     .warmup = warmup,
                     .phase = phase,
                     .release = release};
  return wl_main(&prog);
}
