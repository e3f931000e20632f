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
 * Regions (wl_main): setup, main, teardown, harness (--harness-ops operations on the no-op pool's
 * one block: the same writes into pages already faulted in). Exit 3: out of memory; 4: corruption. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "big-blocks";
static const char *const TOUCH[] = {"pages", "ends", NULL};

typedef struct {
  wl_common c;
  uint64_t ws, min_size, max_size;
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

/* Frees the blocks the workers still hold (none of them in the harness: the pool's one area). */
static void release_all(void *workers, void *ctx, int harness) {
  worker *ws = workers;
  const params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++)
    for (uint64_t s = 0; s < p->ws; s++) {
      if (ws[i].sizes[s] && !harness) free(ws[i].slots[s]);
      ws[i].slots[s] = NULL;
      ws[i].sizes[s] = 0;
    }
}

static int setup(void *workers, void *ctx) {
  worker *ws = workers;
  params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++) {
    ws[i].p = p;
    ws[i].slots = calloc(p->ws, sizeof(unsigned char *));
    ws[i].sizes = calloc(p->ws, sizeof(uint64_t));
    if (!ws[i].slots || !ws[i].sizes) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  params p = {{1000, 1, 1, 1, UINT64_MAX}, 8, UINT64_C(64) << 10, UINT64_C(64) << 20, 0};
  const ms_opt opts[] = {WL_COMMON_OPTS(&p.c, "operations per thread", 1024, "threads"),
                         MS_U64("ws", &p.ws, 1, 1 << 20, "slots per thread"),
                         WL_SIZE_OPTS(&p.min_size, &p.max_size, 16, UINT64_C(1) << 36),
                         MS_CHOICE("touch", &p.touch, TOUCH, "write one byte per page, or only the two ends"), MS_END};
  ms_parse(PROG, "large blocks allocated, touched and freed", opts, argc, argv);
  if (wl_size_order(PROG, p.min_size, p.max_size)) return 2;
  wl_program prog = {.name = PROG,
                     .stride = sizeof(worker),
                     .c = &p.c,
                     .scratch_bytes = p.max_size,
                     .ops_per_iteration = 1,
                     .ctx = &p,
                     .setup = setup,
                     .run = run_worker,
                     .release = release_all};
  return wl_main(&prog);
}
