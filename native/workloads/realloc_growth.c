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
 * Regions: setup, main, harness (--harness-ops buffers per thread on the no-op pool), teardown.
 * Exit 3: out of memory; 4: realloc lost a buffer's contents. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "realloc-growth";
static const char *const GROWTH[] = {"add", "double", NULL};

typedef struct {
  uint64_t iterations, step, start_size, final_size, live, threads, seed, every, harness_ops;
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
        if (!t->harness && !intact(w->bufs[k], size)) { t->failed = EXIT_CORRUPT; return NULL; }
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

int main(int argc, char **argv) {
  params p = {200, 64, 16, UINT64_C(256) << 10, 4, 1, 1, WL_LATENCY_EVERY, UINT64_MAX, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (ms_arg_u64(PROG, a, "iterations", &p.iterations, 1, UINT64_C(1) << 40) ||
        ms_arg_u64(PROG, a, "step", &p.step, 1, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "start-size", &p.start_size, 1, UINT64_C(1) << 30) ||
        ms_arg_u64(PROG, a, "final-size", &p.final_size, 1, UINT64_C(1) << 34) ||
        ms_arg_u64(PROG, a, "live", &p.live, 1, 1 << 20) ||
        ms_arg_u64(PROG, a, "threads", &p.threads, 1, 1024) ||
        wl_common_arg(PROG, a, &p.seed, &p.every, &p.harness_ops) ||
        ms_arg_choice(PROG, a, "growth", GROWTH, &p.growth))
      continue;
    return wl_unknown_arg(PROG, a);
  }
  if (wl_order(PROG, "start-size", p.start_size, "final-size", p.final_size)) return 2;
  if (p.harness_ops == UINT64_MAX) p.harness_ops = (p.iterations + 3) / 4;
  uint64_t timer_ns = wl_timer_ns();
  unsigned n = (unsigned)p.threads;

  ms_region_begin("setup");
  worker *ws = calloc(n, sizeof *ws);
  int bad = !ws || wl_threads_init(&ws[0].t, sizeof *ws, n, p.seed, p.every, p.final_size);
  for (unsigned i = 0; !bad && i < n; i++) {
    ws[i].p = &p;
    ws[i].bufs = calloc(p.live, sizeof(unsigned char *));
    ws[i].sizes = calloc(p.live, sizeof(uint64_t));
    bad = !ws[i].bufs || !ws[i].sizes;
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

  if (p.harness_ops) {
    ms_region_begin("harness");
    wl_phase(ws, sizeof *ws, n, 1, p.harness_ops, run_worker);
    ms_region_end(wl_calls(ws, sizeof *ws, n));
  }
  ms_region_begin("teardown");
  for (unsigned i = 0; i < n; i++) free(ws[i].t.scratch), free(ws[i].bufs), free(ws[i].sizes);
  ms_region_end(0);
  wl_send(result);
  return 0;
}
