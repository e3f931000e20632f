/* fragmentation: a long-running heap that allocates in phases of changing size classes and keeps
 * a scattered few of each phase alive (a cache, a document model, an interpreter's objects;
 * mimalloc-bench #190's "memory over time").
 *
 *   fragmentation --phases=24 --count=50000 --min-size=32 --max-size=4096 --keep=4 --live-max=64M
 *
 * Phase k mallocs --count blocks of one size class (the classes are the powers of two from
 * min-size to max-size, in turn, each block +-25% at random) and writes each, then frees all but
 * every --keep-th: the survivors pin the pages around the holes. When the live bytes exceed
 * --live-max, the oldest phases' survivors are freed. Blocks of the next class rarely fit the
 * holes, so an allocator's RSS grows beyond the live bytes; how far, and whether it comes back,
 * is the allocator's fragmentation. The workload measures none of it itself: memsleuth's heap
 * accounting (libmsheap, in each cell's explaining run) reads the live bytes and the resident
 * memory, as for any program. One operation is one malloc or one free.
 *
 * Regions: setup, main, harness (the same phases on the no-op pool, --harness-phases of them),
 * teardown. Exit 3: out of memory; 4: a cookie changed. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "fragmentation";

typedef struct {
  uint64_t phases, count, min_size, max_size, keep, live_max, seed, every, harness_phases;
} params;

typedef struct {
  unsigned char **blocks;
  uint32_t *sizes;
  uint64_t n, bytes;
} survivors;

static void release(wl_thread *t, survivors *s, uint64_t *live, uint64_t phase) {
  for (uint64_t i = 0; i < s->n && !t->failed; i++) {
    if (!wl_check(t, s->blocks[i], s->sizes[i], wl_cookie(phase, s->sizes[i]))) return;
    wl_free(t, s->blocks[i]);
  }
  *live -= s->bytes;
  s->n = s->bytes = 0;
}

/* Runs `phases` phases. */
static void run(wl_thread *t, const params *p, uint64_t phases, survivors *kept, unsigned char **tmp,
                uint32_t *tmp_sizes) {
  unsigned classes = 0;
  while ((p->min_size << classes) <= p->max_size) classes++;
  uint64_t live = 0, oldest = 0;
  for (uint64_t k = 0; k < phases && !t->failed; k++) {
    uint64_t cls = p->min_size << (k % classes);
    for (uint64_t i = 0; i < p->count; i++) {
      uint64_t r = wl_rand(&t->rng);
      uint64_t size = cls - cls / 4 + wl_below((uint32_t)r, cls / 2 + 1);
      if (size < 16) size = 16;
      unsigned char *b = wl_malloc(t, size);
      if (!b) return;
      wl_mark(b, size, wl_cookie(k, size));
      memset(b + 8, (int)(k & 0xff), size - 16);
      tmp[i] = b;
      tmp_sizes[i] = (uint32_t)size;
      t->checksum += size;
    }
    survivors *s = &kept[k];
    for (uint64_t i = 0; i < p->count; i++) {
      if (i % p->keep == 0) {
        s->blocks[s->n] = tmp[i];
        s->sizes[s->n++] = tmp_sizes[i];
        s->bytes += tmp_sizes[i];
        continue;
      }
      if (!wl_check(t, tmp[i], tmp_sizes[i], wl_cookie(k, tmp_sizes[i]))) return;
      wl_free(t, tmp[i]);
    }
    live += s->bytes;
    while (live > p->live_max && oldest < k) release(t, &kept[oldest], &live, oldest), oldest++;
  }
  for (uint64_t k = oldest; k < phases; k++) release(t, &kept[k], &live, k);
}

int main(int argc, char **argv) {
  params p = {24, 50000, 32, 4096, 4, UINT64_C(64) << 20, 1, WL_LATENCY_EVERY, 6};
  const ms_opt opts[] = {
      MS_U64("phases", &p.phases, 1, 1 << 20, "phases"),
      MS_U64("count", &p.count, 1, UINT64_C(1) << 26, "blocks allocated per phase"),
      WL_SIZE_OPTS(&p.min_size, &p.max_size, 16, UINT64_C(1) << 24),
      MS_U64("keep", &p.keep, 1, UINT64_C(1) << 20, "one block in this many survives its phase"),
      MS_U64("live-max", &p.live_max, 0, UINT64_C(1) << 40, "bytes kept alive at most (0: no limit)"),
      WL_SEED_OPTS(&p.seed, &p.every),
      MS_U64("harness-phases", &p.harness_phases, 0, 1 << 20, "phases on the no-op pool, in region harness"),
      MS_END};
  ms_parse(PROG, "phases of blocks of which a few survive", opts, argc, argv);
  if (wl_size_order(PROG, p.min_size, p.max_size)) return 2;
  uint64_t timer_ns = wl_timer_ns();
  uint64_t per_phase = (p.count + p.keep - 1) / p.keep;
  uint64_t most = p.phases > p.harness_phases ? p.phases : p.harness_phases;

  ms_region_begin("setup");
  wl_thread t = {0};
  survivors *kept = calloc(most, sizeof *kept);
  unsigned char **tmp = calloc(p.count, sizeof *tmp);
  uint32_t *tmp_sizes = calloc(p.count, sizeof *tmp_sizes);
  int bad =
      !kept || !tmp || !tmp_sizes || wl_threads_init(&t, sizeof t, 1, p.seed, p.every, p.max_size + p.max_size / 4);
  for (uint64_t k = 0; !bad && k < most; k++) {
    kept[k].blocks = calloc(per_phase, sizeof(unsigned char *));
    kept[k].sizes = calloc(per_phase, sizeof(uint32_t));
    bad = !kept[k].blocks || !kept[k].sizes;
  }
  ms_region_end(0);
  if (bad) {
    fprintf(stderr, "%s: out of memory in setup\n", PROG);
    return EXIT_OOM;
  }

  ms_region_begin("main");
  run(&t, &p, p.phases, kept, tmp, tmp_sizes);
  ms_region_end(t.mallocs + t.frees);
  int rc = wl_failure(PROG, &t, sizeof t, 1);
  if (rc) return rc;

  char *result = wl_result_json(PROG, t.mallocs + t.frees, "", &t, sizeof t, 1, p.every, timer_ns);

  if (p.harness_phases) {
    uint64_t before = t.mallocs + t.frees;
    t.harness = 1;
    ms_region_begin("harness");
    run(&t, &p, p.harness_phases, kept, tmp, tmp_sizes);
    ms_region_end(t.mallocs + t.frees - before);
  }
  ms_region_begin("teardown");
  for (uint64_t k = 0; k < most; k++) free(kept[k].blocks), free(kept[k].sizes);
  free(t.scratch);
  ms_region_end(0);
  wl_send(result);
  return 0;
}
