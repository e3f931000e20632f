/* false-sharing: small objects written hard by different threads (mimalloc-bench's
 * cache-thrash and cache-scratch in kind). An allocator that hands two threads blocks on one
 * 64-byte cache line makes their writes contend for that line, though they share no data.
 *
 *   false-sharing --mode=active|passive --iterations=N --threads=T --size=8 --writes=200 --seed=S
 *
 * active: each thread, N times: malloc a block of --size bytes, write each of its bytes in turn
 * --writes times, check it, free it. Blocks of different threads meet on a line only if the
 * allocator puts them there.
 * passive: first the main thread mallocs one block per thread, adjacent, and hands block k to
 * thread k, which writes it, frees it, then runs the active loop. An allocator that gives a
 * thread back the block it freed (or one beside it) keeps the false sharing the main thread
 * started; one that allocates per thread ends it.
 * One operation is one malloc, its writes and its free: ops = N x T.
 *
 * Regions (wl_main): setup, main, teardown, harness (--harness-ops iterations per thread on the
 * no-op pool's block, which is on its own cache line). Exit 3: out of memory; 4: a block's bytes changed
 * under the thread that owns it. */
#include "ms_args.h"
#include "ms_wl.h"

static const char *const PROG = "false-sharing";
static const char *const MODES[] = {"active", "passive", NULL};

typedef struct {
  wl_common c;
  uint64_t size, writes;
  int mode;
} params;

/* The evidence that the workload measures false sharing between allocations: the 64-byte lines of
 * a sample of each thread's blocks (every LINE_EVERY-th block, LINE_SAMPLES distinct lines at
 * most); after the main phase, how many of them another thread's blocks also used. */
enum { LINE_SAMPLES = 256, LINE_EVERY = 16 };

typedef struct {
  wl_thread t;
  const params *p;
  unsigned char *handed; /* passive: the block the main thread allocated for this thread */
  uintptr_t lines[LINE_SAMPLES];
  unsigned nlines;
} worker;

static void note_line(worker *w, const void *b) {
  uintptr_t line = (uintptr_t)b >> 6;
  for (unsigned i = 0; i < w->nlines; i++)
    if (w->lines[i] == line) return;
  if (w->nlines < LINE_SAMPLES) w->lines[w->nlines++] = line;
}

/* Lines sampled by a thread that another thread's sampled blocks also used. */
static unsigned shared_lines(const worker *ws, unsigned n, unsigned *sampled) {
  unsigned shared = 0;
  *sampled = 0;
  for (unsigned a = 0; a < n; a++) {
    *sampled += ws[a].nlines;
    for (unsigned i = 0; i < ws[a].nlines; i++) {
      int found = 0;
      for (unsigned b = 0; b < n && !found; b++)
        for (unsigned j = 0; b != a && j < ws[b].nlines && !found; j++) found = ws[b].lines[j] == ws[a].lines[i];
      shared += (unsigned)found;
    }
  }
  return shared;
}

/* Writes each byte of b in turn `writes` times, then checks every byte holds what this thread
 * wrote: returns the bytes' sum, or UINT64_MAX when another writer changed one. */
static uint64_t hammer(volatile unsigned char *b, uint64_t size, uint64_t writes) {
  for (uint64_t i = 0; i < size; i++) b[i] = 0;
  for (uint64_t w = 0, i = 0; w < writes; w++) {
    b[i]++;
    if (++i == size) i = 0;
  }
  uint64_t sum = 0;
  for (uint64_t i = 0; i < size; i++) {
    uint64_t expect = (writes / size + (i < writes % size)) & 0xff;
    if (b[i] != expect) return UINT64_MAX;
    sum += b[i];
  }
  return sum;
}

static void *run_worker(void *arg) {
  worker *w = arg;
  wl_thread *t = &w->t;
  const params *p = w->p;
  if (w->handed && !t->harness) {
    note_line(w, w->handed);
    uint64_t s = hammer(w->handed, p->size, p->writes);
    if (s == UINT64_MAX) {
      t->failed = EXIT_CORRUPT;
      return NULL;
    }
    wl_free(t, w->handed);
    w->handed = NULL;
  }
  for (uint64_t i = 0; i < t->phase_ops && !t->failed; i++) {
    unsigned char *b = wl_malloc(t, p->size);
    if (!b) break;
    if (!t->harness && i % LINE_EVERY == 0) note_line(w, b);
    uint64_t s = hammer(b, p->size, p->writes);
    if (s == UINT64_MAX) {
      t->failed = EXIT_CORRUPT;
      break;
    }
    t->checksum += s;
    wl_free(t, b);
  }
  return NULL;
}

static int setup(void *workers, void *ctx) {
  worker *ws = workers;
  params *p = ctx;
  for (unsigned i = 0; i < p->c.threads; i++) {
    ws[i].p = p;
    /* passive: consecutive small mallocs from one thread, as a program's setup makes them. */
    if (p->mode == 1 && !(ws[i].handed = malloc(p->size))) return 1;
  }
  return 0;
}

static void extra(FILE *f, void *workers, void *ctx) {
  const params *p = ctx;
  unsigned sampled = 0, shared = shared_lines(workers, (unsigned)p->c.threads, &sampled);
  fprintf(f, "\"mode\":\"%s\",\"lines_sampled\":%u,\"lines_shared\":%u", MODES[p->mode], sampled, shared);
}

int main(int argc, char **argv) {
  params p = {{200000, 2, 1, WL_LATENCY_EVERY, UINT64_MAX}, 8, 200, 0};
  const ms_opt opts[] = {
      WL_COMMON_OPTS(&p.c, "operations per thread", 1024, "threads"),
      MS_U64("size", &p.size, 1, 4096, "block size, bytes"),
      MS_U64("writes", &p.writes, 1, UINT64_C(1) << 20, "writes into a block per operation"),
      MS_CHOICE("mode", &p.mode, MODES, "threads allocate their own blocks, or get one from the main thread"), MS_END};
  ms_parse(PROG, "small blocks of different threads on one cache line", opts, argc, argv);
  wl_program prog = {.name = PROG,
                     .stride = sizeof(worker),
                     .c = &p.c,
                     .scratch_bytes = p.size,
                     .ops_per_iteration = 1,
                     .ctx = &p,
                     .setup = setup,
                     .run = run_worker,
                     .extra = extra};
  return wl_main(&prog);
}
