/* big-blocks: large blocks, 64 KiB to 64 MiB, allocated, touched page by page and freed (image
 * and matrix buffers, I/O buffers, arrays of a numerical code). Decided by the allocator's mmap
 * threshold, whether it keeps freed large blocks for reuse, and huge pages.
 *
 *   big-blocks --iterations=N --ws=8 --min-size=64K --max-size=64M --touch=pages|ends --threads=T
 *
 * Each thread owns --ws slots. Each operation picks a slot at random: if it holds a block, the
 * block's cookies are checked and it is freed; otherwise a block of a log-uniform size is
 * malloc'd, one byte written in every 4 KiB page (--touch=pages, so the first-touch faults are
 * part of the cost as they are in a program that uses its buffers) or only its two ends
 * (--touch=ends), and cookies written at both ends. ops = N x T. Latency is sampled on every
 * call by default (--latency-every=1): the calls are few and slow.
 *
 * Regions: setup, main, harness (--harness-ops operations on the no-op pool's one block: the
 * same writes into pages already faulted in), teardown. Exit 3: out of memory; 4: corruption. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "big-blocks";
static const char *const TOUCH[] = {"pages", "ends", NULL};

typedef struct {
  uint64_t iterations, ws, min_size, max_size, threads, seed, every, harness_ops;
  int touch;
} params;

typedef struct {
  wl_thread t;
  const params *p;
  unsigned char **slots;
  uint64_t *sizes;
} worker;

static void *run_worker(void *arg) {
  worker *w = arg;
  wl_thread *t = &w->t;
  const params *p = w->p;
  for (uint64_t i = 0; i < t->phase_ops && !t->failed; i++) {
    uint64_t r = wl_rand(&t->rng);
    uint64_t s = wl_below((uint32_t)(r >> 32), p->ws);
    if (w->sizes[s]) {
      if (!wl_check(t, w->slots[s], w->sizes[s], wl_cookie(t->idx, w->sizes[s]))) break;
      wl_free(t, w->slots[s]);
      w->slots[s] = NULL;
      w->sizes[s] = 0;
      continue;
    }
    uint64_t size = wl_log_size(&t->rng, p->min_size, p->max_size);
    unsigned char *b = wl_malloc(t, size);
    if (!b) break;
    if (p->touch == 0)
      for (uint64_t off = 0; off < size; off += 4096) b[off] = (unsigned char)off;
    wl_mark(b, size, wl_cookie(t->idx, size));
    w->slots[s] = b;
    w->sizes[s] = size;
    t->checksum += size;
  }
  return NULL;
}

static void release_all(worker *ws, const params *p) {
  for (unsigned i = 0; i < p->threads; i++)
    for (uint64_t s = 0; s < p->ws; s++) {
      if (ws[i].sizes[s] && !ws[i].t.harness) free(ws[i].slots[s]);
      ws[i].slots[s] = NULL;
      ws[i].sizes[s] = 0;
    }
}

int main(int argc, char **argv) {
  params p = {1000, 8, UINT64_C(64) << 10, UINT64_C(64) << 20, 1, 1, 1, UINT64_MAX, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ms_arg_u64(PROG, a, "iterations", &p.iterations, 1, UINT64_C(1) << 40) ||
        ms_arg_u64(PROG, a, "ws", &p.ws, 1, 1 << 20) ||
        ms_arg_u64(PROG, a, "min-size", &p.min_size, 16, UINT64_C(1) << 36) ||
        ms_arg_u64(PROG, a, "max-size", &p.max_size, 16, UINT64_C(1) << 36) ||
        ms_arg_u64(PROG, a, "threads", &p.threads, 1, 1024) ||
        wl_common_arg(PROG, a, &p.seed, &p.every, &p.harness_ops) ||
        ms_arg_choice(PROG, a, "touch", TOUCH, &p.touch))
      continue;
    return wl_unknown_arg(PROG, a);
  }
  if (wl_order(PROG, "min-size", p.min_size, "max-size", p.max_size)) return 2;
  if (p.harness_ops == UINT64_MAX) p.harness_ops = p.iterations / 4;
  uint64_t timer_ns = wl_timer_ns();
  unsigned n = (unsigned)p.threads;

  ms_region_begin("setup");
  worker *ws = calloc(n, sizeof *ws);
  int bad = !ws || wl_threads_init(&ws[0].t, sizeof *ws, n, p.seed, p.every, p.harness_ops ? p.max_size : 64);
  for (unsigned i = 0; !bad && i < n; i++) {
    ws[i].p = &p;
    ws[i].slots = calloc(p.ws, sizeof(unsigned char *));
    ws[i].sizes = calloc(p.ws, sizeof(uint64_t));
    bad = !ws[i].slots || !ws[i].sizes;
  }
  ms_region_end(0);
  if (bad) { fprintf(stderr, "%s: out of memory in setup\n", PROG); return EXIT_OOM; }

  ms_region_begin("main");
  wl_phase(ws, sizeof *ws, n, 0, p.iterations, run_worker);
  ms_region_end(p.iterations * p.threads);
  int rc = wl_failure(PROG, &ws[0].t, sizeof *ws, n);
  if (rc) return rc;

  char *result = wl_result_json(PROG, p.iterations * p.threads, "", &ws[0].t, sizeof *ws, n, p.every, timer_ns);

  ms_region_begin("teardown");
  release_all(ws, &p);
  ms_region_end(0);
  if (p.harness_ops) {
    ms_region_begin("harness");
    wl_phase(ws, sizeof *ws, n, 1, p.harness_ops, run_worker);
    ms_region_end(p.harness_ops * p.threads);
    release_all(ws, &p);
  }
  for (unsigned i = 0; i < n; i++) free(ws[i].t.scratch);
  wl_send(result);
  return 0;
}
