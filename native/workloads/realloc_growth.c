/* realloc-growth: buffers grown step by step (a std::vector or a string builder, a buffer that
 * reads a file or a socket of unknown length). Decided by whether the allocator grows a block in
 * place, copies it, or moves it with mremap.
 *
 *   realloc-growth --growth=add|double --step=64 --start-size=16 --final-size=256K --live=4
 *                  --iterations=N --threads=T
 *
 * Each thread grows N buffers from --start-size to --final-size, --live of them at once, in turn
 * (so a growing buffer's neighbour is another growing buffer, as with several vectors): each
 * step reallocs one buffer to size + --step (add, a string's append) or 2 x size (double, a
 * vector's growth), capped at --final-size, and writes the bytes it added. A full buffer's
 * contents are checked (a cookie at its start and at the end of every earlier size must have
 * survived each realloc) and it is freed. One operation is one malloc, realloc or free.
 *
 * Regions (wl_main): setup, main, teardown, harness (--harness-ops buffers per thread on the no-op pool).
 * Exit 3: out of memory; 4: realloc lost a buffer's contents. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "realloc-growth";
static const char *const GROWTH[] = {"add", "double", NULL};

typedef struct {
  wl_common c;
  uint64_t step, start_size, final_size, live;
  int growth;
} params;

typedef struct {
  wl_thread t;
  const params *p;
  unsigned char **bufs;
  uint64_t *sizes;
} worker;

/* Bytes [from, to) of buffer b get a pattern that depends on the position: realloc must keep it. */
static void fill(unsigned char *b, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; i++) b[i] = (unsigned char)(i * 131 + 7);
}

static int intact(const unsigned char *b, uint64_t size) {
  /* Spot checks: the first byte, the last, and one per 4 KiB. */
  for (uint64_t i = 0; i < size; i += 4096)
    if (b[i] != (unsigned char)(i * 131 + 7)) return 0;
  return b[size - 1] == (unsigned char)((size - 1) * 131 + 7);
}

static void *run_worker(void *arg) {
  worker *w = arg;
  wl_thread *t = &w->t;
  const params *p = w->p;
  uint64_t started = 0, done = 0;
  for (uint64_t k = 0; k < p->live; k++) w->sizes[k] = 0;
  while (done < t->phase_ops && !t->failed) {
    for (uint64_t k = 0; k < p->live && done < t->phase_ops && !t->failed; k++) {
      if (!w->sizes[k]) {
        if (started == t->phase_ops) continue;
        started++;
        unsigned char *b = wl_malloc(t, p->start_size);
        if (!b) return NULL;
        fill(b, 0, p->start_size);
        w->bufs[k] = b;
        w->sizes[k] = p->start_size;
        continue;
      }
      uint64_t size = w->sizes[k];
      if (size == p->final_size) {
        if (!t->harness && !intact(w->bufs[k], size)) {
          t->failed = EXIT_CORRUPT;
          return NULL;
        }
        wl_free(t, w->bufs[k]);
        w->sizes[k] = 0;
        done++;
        t->checksum += size;
        continue;
      }
      uint64_t next = p->growth == 0 ? size + p->step : 2 * size;
      if (next > p->final_size) next = p->final_size;
      unsigned char *b = wl_realloc(t, w->bufs[k], next);
      if (!b) return NULL;
      fill(b, size, next);
      w->bufs[k] = b;
      w->sizes[k] = next;
    }
  }
  return NULL;
}

static int setup(void *workers, void *ctx) {
  worker *ws = workers;
  params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++) {
    ws[i].p = p;
    ws[i].bufs = calloc(p->live, sizeof(unsigned char *));
    ws[i].sizes = calloc(p->live, sizeof(uint64_t));
    if (!ws[i].bufs || !ws[i].sizes) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  params p = {{200, 1, 1, WL_LATENCY_EVERY, UINT64_MAX}, 64, 16, UINT64_C(256) << 10, 4, 0};
  const ms_opt opts[] = {WL_COMMON_OPTS(&p.c, "buffers each thread grows to the final size", 1024, "threads"),
                         MS_U64("step", &p.step, 1, UINT64_C(1) << 30, "bytes added per realloc (--growth=add)"),
                         MS_U64("start-size", &p.start_size, 1, UINT64_C(1) << 30, "a buffer's first size, bytes"),
                         MS_U64("final-size", &p.final_size, 1, UINT64_C(1) << 34, "a buffer's last size, bytes"),
                         MS_U64("live", &p.live, 1, 1 << 20, "buffers growing at once per thread"),
                         MS_CHOICE("growth", &p.growth, GROWTH, "add a step, or double"),
                         MS_END};
  ms_parse(PROG, "buffers grown by realloc", opts, argc, argv);
  if (wl_order(PROG, "start-size", p.start_size, "final-size", p.final_size)) return 2;
  wl_program prog = {.name = PROG,
                     .stride = sizeof(worker),
                     .c = &p.c,
                     .scratch_bytes = p.final_size,
                     .ops_per_iteration = 0,
                     .ctx = &p,
                     .setup = setup,
                     .run = run_worker};
  return wl_main(&prog);
}
