/* first-touch: the 1 GiB memcpy of seed 001, under different ways of preparing the memory.
 *
 *   first-touch --bytes=N --setup=S
 *
 * Setups (the source is written in all but "fresh"; they differ in how the destination is made):
 *   fresh           source and destination fresh from malloc, never written;
 *   src-written     source memset, destination fresh from malloc;
 *   prefaulted      both memset before timing (the seed's fix);
 *   populate        destination from mmap(MAP_POPULATE);
 *   hugepage        destination from mmap, 2 MiB aligned, madvise(MADV_HUGEPAGE), not touched;
 *   populate-write  destination from mmap + madvise(MADV_POPULATE_WRITE) (Linux 5.14+).
 * Regions: "source" (malloc of the source, and its memset unless fresh), "setup" (preparing the
 * destination, the setup's own cost; ops = bytes written or populated), "copy" (the timed
 * memcpy; ops = N), "copy-again" (the same copy once more: what a benchmark that repeats sees).
 * RSS at each region's borders comes with the probe: a fault that adds no RSS mapped the shared
 * zero page (a read of memory never written).
 *
 * Self-check: every 4096th byte of the destination must equal the source's (else exit 4).
 * A setup the kernel refuses is reported, not failed: {"supported": false, "reason": ...}.
 * Out of memory: exit 3. Result: one JSON line on stdout. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "memsleuth/probe.h"
#include "ms_args.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack the name */
#endif
#define EXIT_OOM 3
#define EXIT_CORRUPT 4
#define HUGE_2M (2u << 20)

enum { FRESH, SRC_WRITTEN, PREFAULTED, POPULATE, HUGEPAGE, POPULATE_WRITE };
static const char *const SETUPS[] = {"fresh",    "src-written",    "prefaulted", "populate",
                                     "hugepage", "populate-write", NULL};

static void unsupported(int setup, const char *what) {
  char result[512];
  snprintf(result, sizeof result,
           "{\"workload\":\"first-touch\",\"setup\":\"%s\",\"supported\":false,\"reason\":\"%s: %s\"}", SETUPS[setup],
           what, strerror(errno));
  ms_result(result);
}

static void *map_anon(size_t n, int extra_flags) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char **argv) {
  uint64_t bytes = UINT64_C(1) << 30;
  int setup = FRESH;
  const ms_opt opts[] = {MS_U64("bytes", &bytes, 4096, UINT64_C(1) << 40, "the buffers, bytes"),
                         MS_CHOICE("setup", &setup, SETUPS, "how the destination is prepared before the copy"), MS_END};
  ms_parse("first-touch", "a copy into memory prepared in different ways", opts, argc, argv);
  size_t n = (size_t)bytes;
  unsigned char *src = NULL, *dst = NULL;
  uint64_t prepared = 0;

  /* Non-zero fills: GCC turns malloc + memset(p, 0, n) into calloc, which leaves fresh mmap'd
   * memory untouched (it is already zero), so a zero fill would not prefault anything. */
  ms_region_begin("source");
  if ((src = malloc(n)) && setup != FRESH) memset(src, 0x5a, n);
  ms_region_end(setup != FRESH ? n : 0);
  if (!src) goto oom;

  ms_region_begin("setup");
  switch (setup) {
    case FRESH:
    case SRC_WRITTEN:
      dst = malloc(n);
      break;
    case PREFAULTED:
      if ((dst = malloc(n))) {
        memset(dst, 0xa5, n);
        prepared += n;
      }
      break;
    case POPULATE:
      if ((dst = map_anon(n, MAP_POPULATE))) prepared += n;
      break;
    case HUGEPAGE: {
      /* Over-allocate and align, so that the range holds whole 2 MiB pages. */
      unsigned char *raw = map_anon(n + HUGE_2M, 0);
      if (!raw) break;
      dst = (unsigned char *)(((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
      if (madvise(dst, n, MADV_HUGEPAGE)) {
        ms_region_end(prepared);
        unsupported(setup, "madvise(MADV_HUGEPAGE)");
        return 0;
      }
      break;
    }
    case POPULATE_WRITE:
      if (!(dst = map_anon(n, 0))) break;
      if (madvise(dst, n, MADV_POPULATE_WRITE)) {
        ms_region_end(prepared);
        unsupported(setup, "madvise(MADV_POPULATE_WRITE)");
        return 0;
      }
      prepared += n;
      break;
  }
  ms_region_end(prepared);
  if (!dst) goto oom;

  ms_region_begin("copy");
  memcpy(dst, src, n);
  ms_region_end(n);

  ms_region_begin("copy-again");
  memcpy(dst, src, n);
  ms_region_end(n);

  for (size_t k = 0; k < n; k += 4096)
    if (dst[k] != src[k]) {
      fprintf(stderr, "first-touch: the copy differs from its source at byte %zu\n", k);
      return EXIT_CORRUPT;
    }
  char result[512];
  snprintf(result, sizeof result,
           "{\"workload\":\"first-touch\",\"setup\":\"%s\",\"supported\":true,\"bytes\":%llu,\"checksum\":%u}",
           SETUPS[setup], (unsigned long long)bytes, (unsigned)dst[n - 1]);
  ms_result(result);
  return 0;
oom:
  fprintf(stderr, "first-touch: out of memory (allocating 2 x %llu bytes)\n", (unsigned long long)bytes);
  return EXIT_OOM;
}
