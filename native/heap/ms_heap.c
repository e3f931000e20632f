/* libmsheap: heap accounting for any program under any allocator, preloaded in front of it
 * (LD_PRELOAD="libmsheap.so:<allocator>.so"): every malloc-family call is forwarded to the next
 * definition (dlsym RTLD_NEXT: the measured allocator, or glibc) and counted on the way.
 *
 * What it keeps, per process:
 *   - live bytes as the allocator sees them (malloc_usable_size of every block: what the program
 *     can use, which is what the allocator must keep), allocations and frees, bytes requested;
 *   - the peak of live bytes, and at that peak (and at exit) the resident and anonymous memory of
 *     the process and, under glibc, its arenas: how many, and each one's resident bytes (from
 *     /proc/self/status, /proc/self/maps and mincore: costs that do not grow with the process);
 *   - a size histogram (powers of two) of the requests;
 *   - a timeline of live bytes (a point each time it moved by 1/32 since the last one);
 *   - allocation stacks sampled by bytes (as tcmalloc and jemalloc sample: on average one sample
 *     per MEMSLEUTH_HEAP_SAMPLE bytes allocated, 1 MiB by default, each weighted by the bytes it
 *     stands for), each with the bytes it allocated, still live at the peak and still live at exit.
 * It writes one JSON document per process at exit (or _exit: forked workers), a line of
 * $MEMSLEUTH_HEAP_OUT/heap.jsonl (ms_dump.h), with the object that served malloc.
 *
 * Cost: counters are per thread, added into the process's totals every FLUSH_OPS calls or
 * FLUSH_BYTES bytes (so the peak is exact to within threads x FLUSH_BYTES); a free() looks its
 * pointer up in the table of sampled blocks only when a 32 KiB filter says it may be there.
 * It runs in memsleuth's explaining runs only, never in a measured one (bench/heap_cost.py). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ms_dump.h"
#include "ms_math.h"
#include "ms_own.h"

/* A thread adds its counts into the process's every FLUSH_OPS calls, or when its live bytes moved
 * by FLUSH_BYTES since its last flush (so the process's live and peak are never further off than
 * that per thread). Each flush is a dozen atomic adds on cache lines the threads share, so it is
 * made rarely. */
#define FLUSH_OPS 1024
#define FLUSH_BYTES (256 << 10)
#define HIST_BUCKETS 48
#define MAX_FRAMES 48
#define SKIP_FRAMES 3 /* ms_unwind, record_sample and the hook itself */
#define MAX_SITES 8192
#define SAMPLE_SLOTS_MIN 4096u /* live sampled blocks: open addressing, grown by doubling at half full */
#define SAMPLE_SLOTS_MAX (1u << 22)
#define FILTER_SLOTS (1u << 15) /* filter over sampled pointers */
#define TIMELINE_POINTS 4096
#define PEAK_STEP 1.10 /* a new peak snapshot when live grew by 10% since the last */
/* A snapshot reads /proc (status, and under glibc maps with mincore over the arenas' heaps: tens
 * of microseconds, more with many mappings). The next one waits at least this many times as long
 * as the last took, so snapshots cost at most about 5% of the run however often the peak moves. */
#define SNAPSHOT_SPACING 20
#define BOOT_BYTES (256 << 10)

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef size_t (*usable_fn)(void *);

static malloc_fn real_malloc;
static free_fn real_free;
static calloc_fn real_calloc;
static realloc_fn real_realloc;
static memalign_fn real_memalign, real_aligned_alloc;
static posix_memalign_fn real_posix_memalign;
static malloc_fn real_valloc, real_pvalloc;
static usable_fn real_usable;

/* Allocations made while dlsym resolves the real functions come from here and are never freed. */
static _Alignas(64) char boot[BOOT_BYTES];
static size_t boot_used;
static int resolving;

static _Atomic int64_t g_live, g_requested_total, g_allocs, g_frees, g_peak;
static _Atomic int64_t g_hist[HIST_BUCKETS];
static int g_ready; /* set once, before any thread but the first can call */
static double g_sample_mean = 1024.0 * 1024;
static char g_out[4096];
static struct timespec g_t0;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_thread_key; /* its destructor adds an exiting thread's counts in */

typedef struct {
  int64_t live, requested, allocs, frees; /* since the last flush; live: the net change */
  int64_t hist[HIST_BUCKETS];
  int64_t until_sample;
  uint64_t rng;
  int in_hook, registered, sampling;
} tstate;
/* initial-exec: a preloaded library gets static TLS, so no __tls_get_addr call per access. */
static __thread tstate T __attribute__((tls_model("initial-exec")));

typedef struct {
  uint64_t hash;
  int nframes;
  void *frames[MAX_FRAMES];
  double alloc_bytes, alloc_count, live_bytes, live_count, peak_bytes, samples;
} site;
static site g_sites[MAX_SITES];
static int g_nsites;
static int64_t g_dropped;

typedef struct {
  void *ptr; /* NULL: empty; (void *)1: deleted */
  int site;
  double weight_bytes, weight_count;
} sampled;
/* mmap'd (not malloc'd: the hooks must not call themselves) and grown as the live samples need:
 * a fixed table as large as the worst case would fault a fresh page in, under the lock, for
 * nearly every sample. */
static sampled *g_samples;
static uint32_t g_sample_cap, g_sample_used; /* used: entries and deletion marks */
/* Which pointers may be sampled, checked on every free: a bit per slot (4 KiB, so the check stays
 * in L1), set while the slot's count of live samples (under g_lock) is above zero. */
static _Atomic uint64_t g_filter_bits[FILTER_SLOTS / 64];
static uint16_t g_filter_count[FILTER_SLOTS];

typedef struct {
  int64_t t_us, live;
} tpoint;
static tpoint g_tl[TIMELINE_POINTS];
static int g_ntl, g_tl_stride = 1, g_tl_skip;
static int64_t g_tl_last = -1;

/* glibc's arenas at one moment (read_arenas): the main arena's resident KiB, and the others' count,
 * resident KiB in all and per arena (the first MAX_ARENAS). */
#define MAX_ARENAS 256
typedef struct {
  int count, listed;
  int64_t rss_kb, main_kb;
  void *owner[MAX_ARENAS];
  int64_t kb[MAX_ARENAS];
} arenas_t;

static int64_t g_peak_snapshot_live;
static struct {
  int64_t live, rss_kb, anon_kb, t_us, own_kb;
  int own_ranges, own_complete;
  arenas_t arenas;
} g_at_peak;

/* ---- helpers ---------------------------------------------------------------------------- */

static int64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (t.tv_sec - g_t0.tv_sec) * 1000000LL + (t.tv_nsec - g_t0.tv_nsec) / 1000;
}

static int bucket(size_t n) {
  int b = n > 1 ? 64 - __builtin_clzl((unsigned long)(n - 1)) : 0; /* ceil(log2 n) */
  return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static double uniform(void) {
  if (!T.rng) T.rng = mix((uint64_t)(uintptr_t)&T ^ (uint64_t)now_us() ^ 0x9e3779b97f4a7c15ULL) | 1;
  T.rng ^= T.rng << 13;
  T.rng ^= T.rng >> 7;
  T.rng ^= T.rng << 17;
  return ((T.rng >> 11) + 0.5) / 9007199254740992.0;
}

static int64_t next_sample_gap(void) { return (int64_t)(-ms_log(uniform()) * g_sample_mean) + 1; }

static void resolve(void) {
  if (real_malloc) return;
  resolving = 1;
  real_malloc = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
  real_free = (free_fn)dlsym(RTLD_NEXT, "free");
  real_calloc = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
  real_realloc = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
  real_memalign = (memalign_fn)dlsym(RTLD_NEXT, "memalign");
  real_aligned_alloc = (memalign_fn)dlsym(RTLD_NEXT, "aligned_alloc");
  real_posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
  real_valloc = (malloc_fn)dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = (malloc_fn)dlsym(RTLD_NEXT, "pvalloc");
  real_usable = (usable_fn)dlsym(RTLD_NEXT, "malloc_usable_size");
  resolving = 0;
}

/* glibc's malloc_usable_size, inlined for the heap's chunks: the chunk's size field sits just below
 * the block (its low three bits are flags; IS_MMAPPED = 2), and a heap chunk's usable size is its
 * size minus the 8-byte header. Used only when the allocator behind is glibc and this gives
 * malloc_usable_size's answer on probe blocks at start (glibc_fast); otherwise, and for an mmapped
 * chunk (large and rare), the real call. */
static int glibc_fast;
static int is_glibc; /* the allocator behind is glibc's: its arena heaps mean something */

static inline size_t usable_size(void *p) {
  if (glibc_fast) {
    size_t sz = ((size_t *)p)[-1];
    if (!(sz & 2)) return (sz & ~(size_t)7) - 8;
  }
  return real_usable(p);
}

static void probe_glibc(void) {
  Dl_info info;
  if (!real_malloc || !real_usable || !dladdr((void *)real_malloc, &info) || !info.dli_fname ||
      !strstr(info.dli_fname, "libc.so"))
    return;
  is_glibc = 1;
  /* All below glibc's mmap threshold (128 KiB at start): the probe maps nothing. An mmapped block
   * would show in the explaining run's mmap and munmap sizes as the program's (a 33 MiB probe read
   * as "blocks of 32 to 64 MiB" in a tree of 39 short processes), and one under 32 MiB would raise
   * glibc's dynamic threshold for the program. */
  static const size_t sizes[] = {1, 24, 100, 1000, 5000, 70000};
  int ok = 1;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes && ok; i++) {
    void *b = real_malloc(sizes[i]);
    if (!b) return;
    /* The header is read only where malloc_usable_size gives glibc's own answer for the request
     * (its chunk size less the header, chunks of 32 bytes and more in steps of 16): a malloc that
     * only looks like glibc's (valgrind's, whose calls to libc's malloc it redirects to its own)
     * has no header there, and reading it is an invalid read (memcheck reported it in heap_init
     * and failed the explaining run of `valgrind --error-exitcode=9 ...`). */
    size_t chunk = sizes[i] + 8 + 15 < 32 ? 32 : (sizes[i] + 8 + 15) & ~(size_t)15;
    ok = real_usable(b) == chunk - 8;
    if (ok) {
      glibc_fast = 1;
      ok = usable_size(b) == real_usable(b);
      glibc_fast = 0;
    }
    real_free(b);
  }
  glibc_fast = ok;
}

static void *boot_alloc(size_t n) {
  size_t at = (boot_used + 15) & ~(size_t)15;
  if (at + n > BOOT_BYTES) return NULL;
  boot_used = at + n;
  return boot + at;
}

static int is_boot(void *p) { return (char *)p >= boot && (char *)p < boot + BOOT_BYTES; }

/* ---- the process's totals ------------------------------------------------------------- */

/* The process's resident and anonymous resident memory, from /proc/self/status: kept as counters
 * by the kernel, so reading them costs the same in a process of any size (smaps_rollup walks every
 * page table). */
static void read_memory(int64_t *rss_kb, int64_t *anon_kb) {
  *rss_kb = *anon_kb = -1;
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  char *p = strstr(buf, "\nVmRSS:");
  if (p) *rss_kb = strtoll(p + 7, NULL, 10);
  p = strstr(buf, "\nRssAnon:");
  if (p) *anon_kb = strtoll(p + 9, NULL, 10);
}

/* Resident KiB of [lo, hi) from mincore: the page tables of that range only. 0 from where the
 * range was unmapped meanwhile (ENOMEM). */
static int64_t resident_kb(unsigned long lo, unsigned long hi) {
  static long page;
  if (!page) page = sysconf(_SC_PAGESIZE);
  unsigned char vec[1024];
  int64_t pages = 0;
  for (unsigned long at = lo; at < hi;) {
    unsigned long n = (hi - at) / (unsigned long)page;
    if (n > sizeof vec) n = sizeof vec;
    if (!n || mincore((void *)at, n * (unsigned long)page, vec) != 0) break;
    for (unsigned long i = 0; i < n; i++) pages += vec[i] & 1;
    at += n * (unsigned long)page;
  }
  return pages * page / 1024;
}

/* glibc's arenas: the main one grows the brk heap ("[heap]"); every other one lives in heaps of
 * HEAP_MAX_SIZE (64 MiB on 64-bit) aligned to their size, anonymous read-write mappings whose
 * start is 64 MiB aligned, and grows by more heaps. A heap begins with glibc's heap_info, whose
 * first word is its arena's address: the heaps of one arena are grouped by it. The word is read
 * with process_vm_readv, which fails (instead of faulting) if another thread unmaps the heap
 * meanwhile. The mappings come from /proc/self/maps, their resident sizes from mincore. */
static void read_arenas(arenas_t *a, char *buf, size_t size) {
  memset(a, 0, sizeof *a);
  a->count = is_glibc ? 0 : -1; /* -1: not glibc, where 64 MiB-aligned mappings are someone else's */
  a->main_kb = -1;
  if (!is_glibc) return;
  FILE *f = ms_dump_fopen("/proc/self/maps", "re", buf, size);
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off;
    unsigned long long inode = 0;
    char perms[8], dev[16];
    int fields = sscanf(line, "%lx-%lx %7s %lx %15s %llu", &lo, &hi, perms, &off, dev, &inode);
    if (fields < 3) continue;
    if (strstr(line, "[heap]")) {
      a->main_kb = (a->main_kb < 0 ? 0 : a->main_kb) + resident_kb(lo, hi);
    } else if (fields == 6 && inode == 0 && (lo & ((1UL << 26) - 1)) == 0 && perms[0] == 'r' && perms[1] == 'w' &&
               hi - lo <= (1UL << 26) && !strchr(line, '[')) {
      /* glibc's heap_info: {arena, previous heap, size, mprotect_size}. Only a mapping that starts
       * with a plausible one is an arena's heap: any 64 MiB-aligned anonymous mapping was counted as
       * one (a large block glibc mapped for the program can start there), and an arena_max=1 run once
       * read a second arena of 16 MiB resident. */
      uintptr_t info[4] = {0, 0, 0, 0};
      struct iovec mine = {info, sizeof info}, theirs = {(void *)lo, sizeof info};
      if (process_vm_readv(getpid(), &mine, 1, &theirs, 1, 0) != (ssize_t)sizeof info) continue;
      uintptr_t ar = info[0], prev = info[1], hsize = info[2], hprot = info[3], max = 1UL << 26;
      if (!ar || !hsize || hsize > max || hsize > hprot || hprot > max || (prev & (max - 1)) ||
          (!prev && (ar < lo || ar >= lo + max)))
        continue;
      void *owner = (void *)ar;
      int k = 0;
      while (k < a->listed && a->owner[k] != owner) k++;
      if (k == a->listed) { /* a new arena (past MAX_ARENAS, each further heap counts as one) */
        a->count++;
        if (k < MAX_ARENAS) a->owner[a->listed++] = owner;
      }
      int64_t kb = resident_kb(lo, hi);
      a->rss_kb += kb;
      if (k < MAX_ARENAS) a->kb[k] += kb;
    }
  }
  fclose(f);
}

static void write_arenas(FILE *f, const arenas_t *a) {
  fprintf(f, "\"arenas\":%d,\"arena_rss_kb\":%lld,\"main_arena_kb\":%lld,\"arena_kb\":[", a->count,
          (long long)a->rss_kb, (long long)a->main_kb);
  for (int k = 0; k < a->listed; k++) fprintf(f, "%s%lld", k ? "," : "", (long long)a->kb[k]);
  fputc(']', f);
}

/* "own_anon_kb": resident KiB of the anonymous mappings made outside the allocator (ms_own.h). */
static void write_own(FILE *f, int64_t kb, int ranges, int complete) {
  fprintf(f, "\"own_anon_kb\":%lld,\"own_ranges\":%d,\"own_complete\":%s,", (long long)kb, ranges,
          complete ? "true" : "false");
}

static _Atomic int g_snapping;             /* a thread is taking a snapshot */
static _Atomic int64_t g_snapshot_next_us; /* the earliest time of the next one */

/* At a new peak (10% above the last snapshot's live, and live now within 10% of the peak): the
 * sites' live bytes, resident memory and the arenas, read by one thread at a time, outside the
 * lock, no sooner than SNAPSHOT_SPACING times the last one's cost after it. */
static void maybe_snapshot(int64_t live, int64_t peak) {
  if (peak <= (1 << 20) || peak <= (int64_t)(g_peak_snapshot_live * PEAK_STEP) || live * PEAK_STEP < peak) return;
  int64_t t0 = now_us();
  if (t0 < atomic_load_explicit(&g_snapshot_next_us, memory_order_relaxed)) return;
  int idle = 0;
  if (!atomic_compare_exchange_strong(&g_snapping, &idle, 1)) return;
  static arenas_t arenas; /* one snapshot at a time (g_snapping); static, not on a program's stack */
  static char maps_buf[8192];
  int64_t rss_kb, anon_kb;
  sigset_t old;
  ms_dump_quiet(&old);
  read_memory(&rss_kb, &anon_kb);
  read_arenas(&arenas, maps_buf, sizeof maps_buf);
  int own_ranges, own_complete;
  int64_t own_kb = ms_own_resident_kb(&own_ranges, &own_complete);
  pthread_mutex_lock(&g_lock);
  g_peak_snapshot_live = live;
  g_at_peak.own_kb = own_kb;
  g_at_peak.own_ranges = own_ranges;
  g_at_peak.own_complete = own_complete;
  for (int i = 0; i < g_nsites; i++) g_sites[i].peak_bytes = g_sites[i].live_bytes;
  g_at_peak.live = live;
  g_at_peak.t_us = t0;
  g_at_peak.rss_kb = rss_kb;
  g_at_peak.anon_kb = anon_kb;
  g_at_peak.arenas = arenas;
  pthread_mutex_unlock(&g_lock);
  ms_dump_loud(&old);
  int64_t t1 = now_us();
  atomic_store_explicit(&g_snapshot_next_us, t1 + SNAPSHOT_SPACING * (t1 - t0), memory_order_relaxed);
  atomic_store(&g_snapping, 0);
}

static void timeline_add(int64_t live) {
  /* under g_lock: keep at most TIMELINE_POINTS, halving the resolution when full */
  if (++g_tl_skip < g_tl_stride) return;
  g_tl_skip = 0;
  if (g_ntl == TIMELINE_POINTS) {
    for (int i = 0; i < TIMELINE_POINTS / 2; i++) g_tl[i] = g_tl[2 * i];
    g_ntl = TIMELINE_POINTS / 2;
    g_tl_stride *= 2;
  }
  g_tl[g_ntl].t_us = now_us();
  g_tl[g_ntl].live = live;
  g_ntl++;
}

static void flush(void) {
  if (!T.allocs && !T.frees && !T.live) return;
  int64_t live = atomic_fetch_add(&g_live, T.live) + T.live;
  atomic_fetch_add(&g_requested_total, T.requested);
  atomic_fetch_add(&g_allocs, T.allocs);
  atomic_fetch_add(&g_frees, T.frees);
  for (int b = 0; b < HIST_BUCKETS; b++)
    if (T.hist[b]) {
      atomic_fetch_add(&g_hist[b], T.hist[b]);
      T.hist[b] = 0;
    }
  T.live = T.requested = T.allocs = T.frees = 0;
  int64_t peak = atomic_load(&g_peak);
  while (live > peak && !atomic_compare_exchange_weak(&g_peak, &peak, live)) {}
  if (live > peak) peak = live;
  int64_t last = g_tl_last;
  int moved = last < 0 || llabs(live - last) * 32 > (last > 4096 ? last : 4096);
  /* Another thread holding the lock is adding its own point: this one is skipped, not waited for
   * (the next flush adds one if live is still away from the last point). */
  if (moved && pthread_mutex_trylock(&g_lock) == 0) {
    g_tl_last = live;
    timeline_add(live);
    pthread_mutex_unlock(&g_lock);
  }
  maybe_snapshot(live, peak);
}

/* ---- sampling ---------------------------------------------------------------------------- */

/* Cheap on purpose (it runs on every free): blocks are at least 16-byte aligned. */
static inline uint32_t filter_slot(void *p) {
  uintptr_t x = (uintptr_t)p >> 4;
  return (uint32_t)((x ^ (x >> 15)) & (FILTER_SLOTS - 1));
}

static inline int maybe_sampled(void *p) {
  uint32_t f = filter_slot(p);
  return (atomic_load_explicit(&g_filter_bits[f / 64], memory_order_relaxed) >> (f % 64)) & 1;
}

static int site_of(void **frames, int n) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < n; i++) h = mix(h ^ (uint64_t)(uintptr_t)frames[i]);
  for (int i = 0; i < g_nsites; i++)
    if (g_sites[i].hash == h && g_sites[i].nframes == n) return i;
  if (g_nsites == MAX_SITES) return -1;
  site *s = &g_sites[g_nsites];
  memset(s, 0, sizeof *s);
  s->hash = h;
  s->nframes = n;
  memcpy(s->frames, frames, (size_t)n * sizeof(void *));
  return g_nsites++;
}

/* Under g_lock: the slot for a new pointer (a free one or a deletion mark). */
static sampled *sample_insert(void *p) {
  uint32_t mask = g_sample_cap - 1, h = (uint32_t)mix((uint64_t)(uintptr_t)p) & mask;
  for (;; h = (h + 1) & mask) {
    sampled *e = &g_samples[h];
    if (e->ptr == NULL || e->ptr == (void *)1) {
      if (e->ptr == NULL) g_sample_used++;
      e->ptr = p;
      return e;
    }
  }
}

/* Under g_lock: room for one more sample, growing (or rehashing away deletion marks) at half
 * full. 0: no memory, or the table is at its largest. */
static int sample_room(void) {
  if (g_samples && (g_sample_used + 1) * 2 <= g_sample_cap) return 1;
  uint32_t live = 0;
  for (uint32_t i = 0; i < g_sample_cap; i++) live += g_samples[i].ptr > (void *)1;
  uint32_t cap = SAMPLE_SLOTS_MIN;
  while (cap < (live + 1) * 4 && cap < SAMPLE_SLOTS_MAX) cap *= 2;
  if ((live + 1) * 2 > cap) return 0;
  sigset_t mask;
  ms_dump_quiet(&mask);
  sampled *old = g_samples,
          *t = mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) {
    ms_dump_loud(&mask);
    return 0;
  }
  uint32_t old_cap = g_sample_cap;
  g_samples = t;
  g_sample_cap = cap;
  g_sample_used = 0;
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i].ptr > (void *)1) *sample_insert(old[i].ptr) = old[i];
  if (old) munmap(old, old_cap * sizeof *old);
  ms_dump_loud(&mask);
  return 1;
}

static void record_sample(void *p, size_t size) {
  void *frames[MAX_FRAMES + SKIP_FRAMES];
  int n = ms_unwind((uintptr_t *)frames, MAX_FRAMES + SKIP_FRAMES, 0, 0);
  int skip = n > SKIP_FRAMES ? SKIP_FRAMES : 0;
  /* The estimator of the bytes this sample stands for: an allocation of s bytes is sampled with
   * probability 1 - exp(-s / mean), so it counts s / that probability (and one call / it). */
  double prob = ms_one_minus_exp_neg((double)size / g_sample_mean);
  double wcount = prob > 0 ? 1.0 / prob : 1.0;
  double wbytes = (double)size * wcount;
  pthread_mutex_lock(&g_lock);
  int si = site_of(frames + skip, n - skip);
  if (si < 0) {
    g_dropped++;
    pthread_mutex_unlock(&g_lock);
    return;
  }
  site *s = &g_sites[si];
  s->alloc_bytes += wbytes;
  s->alloc_count += wcount;
  s->samples += 1;
  if (!sample_room()) {
    g_dropped++;
    pthread_mutex_unlock(&g_lock);
    return;
  }
  sampled *e = sample_insert(p);
  e->site = si;
  e->weight_bytes = wbytes;
  e->weight_count = wcount;
  s->live_bytes += wbytes;
  s->live_count += wcount;
  uint32_t f = filter_slot(p);
  if (g_filter_count[f]++ == 0) atomic_fetch_or(&g_filter_bits[f / 64], UINT64_C(1) << (f % 64));
  pthread_mutex_unlock(&g_lock);
}

/* A block the filter says may be sampled: its sample, if it has one, is forgotten. */
static void forget_sample(void *p) {
  pthread_mutex_lock(&g_lock);
  uint32_t mask = g_sample_cap - 1, h = (uint32_t)mix((uint64_t)(uintptr_t)p) & mask;
  for (uint32_t k = 0; g_samples && k < g_sample_cap; k++) {
    sampled *e = &g_samples[(h + k) & mask];
    if (e->ptr == NULL) break;
    if (e->ptr == p) {
      g_sites[e->site].live_bytes -= e->weight_bytes;
      g_sites[e->site].live_count -= e->weight_count;
      e->ptr = (void *)1;
      uint32_t f = filter_slot(p);
      if (--g_filter_count[f] == 0) atomic_fetch_and(&g_filter_bits[f / 64], ~(UINT64_C(1) << (f % 64)));
      break;
    }
  }
  pthread_mutex_unlock(&g_lock);
}

/* ---- accounting on every call ------------------------------------------------------------ */

static void on_thread_exit(void *unused) {
  (void)unused;
  T.in_hook = 1;
  flush();
}

/* The fast paths touch only this thread's counters; everything that may allocate (a stack, a
 * snapshot) runs in a slow path under in_hook, so that its own mallocs pass straight through. */
static __attribute__((noinline)) void slow_alloc(void *p, size_t requested) {
  T.in_hook = 1;
  if (!T.registered) {
    T.registered = 1;
    pthread_setspecific(g_thread_key, (void *)1);
  }
  if (T.until_sample <= 0) {
    if (T.sampling) record_sample(p, requested);
    T.sampling = 1; /* the first gap of a thread is drawn, not sampled */
    T.until_sample = next_sample_gap();
  }
  if (T.allocs + T.frees >= FLUSH_OPS || T.live >= FLUSH_BYTES) flush();
  T.in_hook = 0;
}

static __attribute__((noinline)) void slow_free(void *p) {
  T.in_hook = 1;
  if (maybe_sampled(p)) forget_sample(p);
  if (T.allocs + T.frees >= FLUSH_OPS || T.live <= -FLUSH_BYTES) flush();
  T.in_hook = 0;
}

static inline void on_alloc(void *p, size_t requested) {
  if (__builtin_expect(!p || !g_ready || T.in_hook, 0)) return;
  size_t usable = usable_size(p);
  T.live += (int64_t)usable;
  T.requested += (int64_t)requested;
  T.allocs++;
  T.hist[bucket(requested)]++;
  T.until_sample -= (int64_t)requested;
  if (__builtin_expect(T.until_sample <= 0 || !T.registered || T.allocs + T.frees >= FLUSH_OPS || T.live >= FLUSH_BYTES,
                       0))
    slow_alloc(p, requested);
}

static inline void on_free(void *p) {
  if (__builtin_expect(!p || !g_ready || T.in_hook, 0)) return;
  size_t usable = usable_size(p);
  T.live -= (int64_t)usable;
  T.frees++;
  if (__builtin_expect(maybe_sampled(p) || T.allocs + T.frees >= FLUSH_OPS || T.live <= -FLUSH_BYTES, 0)) slow_free(p);
}

/* ---- the interposed functions -------------------------------------------------------------- */

MS_EXPORT void *malloc(size_t n) {
  if (!real_malloc) {
    if (resolving) return boot_alloc(n);
    resolve();
  }
  void *p = real_malloc(n);
  on_alloc(p, n);
  return p;
}

MS_EXPORT void free(void *p) {
  if (!p || is_boot(p)) return;
  if (!real_free) resolve();
  on_free(p);
  real_free(p);
}

MS_EXPORT void *calloc(size_t a, size_t b) {
  if (!real_calloc) {
    if (resolving) {
      void *p = boot_alloc(a * b);
      if (p) memset(p, 0, a * b);
      return p;
    }
    resolve();
  }
  void *p = real_calloc(a, b);
  on_alloc(p, a * b);
  return p;
}

MS_EXPORT void *realloc(void *p, size_t n) {
  if (!real_realloc) resolve();
  if (p && is_boot(p)) {
    void *q = malloc(n);
    if (q) memcpy(q, p, n); /* the boot block is at least as large as what was asked of it */
    return q;
  }
  /* A realloc allocates what it grows by: counted as the whole new size, a buffer grown a byte at
   * a time to 64 MiB "allocated" 2^51 bytes and drew a sampled stack on nearly every call (0.56 s
   * of program, 81 s under the accounting). Live bytes follow the blocks' usable sizes as ever. */
  size_t old = p && g_ready ? usable_size(p) : 0;
  if (p) on_free(p);
  void *q = real_realloc(p, n);
  if (q) on_alloc(q, n > old ? n - old : 0);
  else if (p && n) on_alloc(p, real_usable ? real_usable(p) : n); /* failed: the old block is still live */
  return q;
}

MS_EXPORT void *memalign(size_t al, size_t n) {
  if (!real_memalign) resolve();
  void *p = real_memalign(al, n);
  on_alloc(p, n);
  return p;
}

MS_EXPORT void *aligned_alloc(size_t al, size_t n) {
  if (!real_aligned_alloc) resolve();
  void *p = real_aligned_alloc(al, n);
  on_alloc(p, n);
  return p;
}

MS_EXPORT int posix_memalign(void **out, size_t al, size_t n) {
  if (!real_posix_memalign) resolve();
  int rc = real_posix_memalign(out, al, n);
  if (rc == 0) on_alloc(*out, n);
  return rc;
}

MS_EXPORT void *valloc(size_t n) {
  if (!real_valloc) resolve();
  void *p = real_valloc(n);
  on_alloc(p, n);
  return p;
}

MS_EXPORT void *pvalloc(size_t n) {
  if (!real_pvalloc) resolve();
  void *p = real_pvalloc(n);
  on_alloc(p, n);
  return p;
}

MS_EXPORT size_t malloc_usable_size(void *p) {
  if (!p || is_boot(p)) return 0;
  if (!real_usable) resolve();
  return real_usable ? real_usable(p) : 0;
}

/* ---- start and the report at exit ------------------------------------------------------- */

static void write_report(void);

static void on_fork_child(void) {
  /* The child starts its own account: what it inherited is the parent's. */
  sigset_t old;
  ms_dump_quiet(&old);
  ms_dump_forked();
  atomic_store(&g_live, 0);
  atomic_store(&g_peak, 0);
  atomic_store(&g_allocs, 0);
  atomic_store(&g_frees, 0);
  atomic_store(&g_requested_total, 0);
  for (int b = 0; b < HIST_BUCKETS; b++) atomic_store(&g_hist[b], 0);
  memset(&T, 0, sizeof T);
  g_nsites = 0;
  g_ntl = 0;
  g_tl_stride = 1;
  g_tl_last = -1;
  g_peak_snapshot_live = 0;
  atomic_store(&g_snapshot_next_us, 0);
  atomic_store(&g_snapping, 0);
  memset(&g_at_peak, 0, sizeof g_at_peak);
  if (g_samples) munmap(g_samples, g_sample_cap * sizeof *g_samples);
  g_samples = NULL;
  g_sample_cap = g_sample_used = 0;
  for (uint32_t i = 0; i < FILTER_SLOTS / 64; i++) atomic_store(&g_filter_bits[i], 0);
  memset(g_filter_count, 0, sizeof g_filter_count);
  pthread_mutex_init(&g_lock, NULL);
  ms_own_forked();
  clock_gettime(CLOCK_MONOTONIC, &g_t0);
  ms_dump_loud(&old);
}

__attribute__((constructor)) static void heap_init(void) {
  clock_gettime(CLOCK_MONOTONIC, &g_t0);
  resolve();
  ms_own_allocator((void *)real_malloc);
  probe_glibc();
  const char *out = getenv("MEMSLEUTH_HEAP_OUT");
  const char *mean = getenv("MEMSLEUTH_HEAP_SAMPLE");
  if (mean && atof(mean) >= 1) g_sample_mean = atof(mean);
  if (out) snprintf(g_out, sizeof g_out, "%s", out);
  /* The unwinder finds and caches the objects' unwind tables on first use: do it now, not in a hook. */
  T.in_hook = 1;
  uintptr_t warm[4];
  ms_unwind(warm, 4, 0, 0);
  T.in_hook = 0;
  pthread_key_create(&g_thread_key, on_thread_exit);
  pthread_atfork(NULL, NULL, on_fork_child);
  ms_dump_at_exit(write_report);
  g_ready = 1;
}

static void write_report(void) {
  if (!g_out[0]) return;
  sigset_t old; /* left blocked: the process is ending */
  ms_dump_quiet(&old);
  T.in_hook = 1;
  flush();
  pthread_mutex_lock(&g_lock);
  static char buf[1 << 12]; /* once per process, under g_lock */
  static ms_doc doc;
  FILE *f = ms_dump_open(&doc, buf, sizeof buf);
  if (!f) {
    pthread_mutex_unlock(&g_lock);
    return;
  }
  static arenas_t arenas;     /* once per process */
  static char maps_buf[8192]; /* not the one a snapshot in another thread may be reading with */
  int64_t rss_kb, anon_kb;
  read_memory(&rss_kb, &anon_kb);
  read_arenas(&arenas, maps_buf, sizeof maps_buf);
  int own_ranges, own_complete;
  int64_t own_kb = ms_own_resident_kb(&own_ranges, &own_complete);
  Dl_info info;
  const char *object = real_malloc && dladdr((void *)real_malloc, &info) && info.dli_fname ? info.dli_fname : "";
  fprintf(f,
          "{\"pid\":%d,\"sample_bytes\":%.0f,\"live_bytes\":%lld,\"peak_live_bytes\":%lld,"
          "\"allocs\":%lld,\"frees\":%lld,\"requested_bytes\":%lld,\"dropped_samples\":%lld,\"duration_us\":%lld,"
          "\"malloc_object\":",
          (int)getpid(), g_sample_mean, (long long)atomic_load(&g_live), (long long)atomic_load(&g_peak),
          (long long)atomic_load(&g_allocs), (long long)atomic_load(&g_frees),
          (long long)atomic_load(&g_requested_total), (long long)g_dropped, (long long)now_us());
  ms_dump_json_str(f, object);
  fprintf(f, ",\"at_exit\":{\"rss_kb\":%lld,\"anon_kb\":%lld,", (long long)rss_kb, (long long)anon_kb);
  write_own(f, own_kb, own_ranges, own_complete);
  write_arenas(f, &arenas);
  fprintf(f, "},\"at_peak\":{\"live_bytes\":%lld,\"t_us\":%lld,\"rss_kb\":%lld,\"anon_kb\":%lld,",
          (long long)g_at_peak.live, (long long)g_at_peak.t_us, (long long)g_at_peak.rss_kb,
          (long long)g_at_peak.anon_kb);
  if (g_at_peak.t_us) write_own(f, g_at_peak.own_kb, g_at_peak.own_ranges, g_at_peak.own_complete);
  write_arenas(f, &g_at_peak.arenas);
  fputs("},", f);
  fputs("\"histogram\":[", f);
  for (int b = 0; b < HIST_BUCKETS; b++) fprintf(f, "%s%lld", b ? "," : "", (long long)atomic_load(&g_hist[b]));
  fputs("],\"timeline\":[", f);
  for (int i = 0; i < g_ntl; i++)
    fprintf(f, "%s[%lld,%lld]", i ? "," : "", (long long)g_tl[i].t_us, (long long)g_tl[i].live);
  fputs("],\"sites\":[", f);
  for (int i = 0; i < g_nsites; i++) {
    site *s = &g_sites[i];
    fprintf(f,
            "%s{\"alloc_bytes\":%.0f,\"alloc_count\":%.0f,\"live_bytes\":%.0f,\"live_count\":%.0f,"
            "\"peak_bytes\":%.0f,\"samples\":%.0f,\"frames\":[",
            i ? "," : "", s->alloc_bytes, s->alloc_count, s->live_bytes > 0 ? s->live_bytes : 0,
            s->live_count > 0 ? s->live_count : 0, s->peak_bytes > 0 ? s->peak_bytes : 0, s->samples);
    for (int k = 0; k < s->nframes; k++) fprintf(f, "%s%lu", k ? "," : "", (unsigned long)(uintptr_t)s->frames[k]);
    fputs("]}", f);
  }
  fputc(']', f);
  ms_dump_maps(f, g_nsites > 0);
  fputs("}", f);
  ms_dump_close(f, &doc, g_out, "heap");
  pthread_mutex_unlock(&g_lock);
}
