/* alloc-churn: the step loop of seed 000.
 *
 *   alloc-churn --steps=N --nbuf=B --sizes=S1[,S2,...] --small=BYTES --variant=V
 *
 * Each step mallocs B buffers (their sizes cycle through --sizes) and then one small buffer,
 * last, as the seed's loop did (region "alloc"); then:
 *   region "init"   writes every byte of every buffer (memset);
 *   region "target" the measured compute: a read-modify-write of one byte per 64-byte line;
 *   region "free"   frees them.
 * Variants:
 *   free-all            everything is freed every step;
 *   leak-last           the small buffer is never freed (the seed's accidental leak);
 *   hoisted             the buffers are allocated once before the loop and freed after it
 *                       (regions "alloc" and "free" still mark every step, empty);
 *   target-first-touch  "init" writes nothing, so "target" is the first to touch the memory.
 * ops: init and target count bytes, alloc and free the blocks allocated and freed.
 *
 * Self-check: the checksum is a sum of what "target" read. It depends only on the parameters,
 * except for target-first-touch, which reads memory nobody wrote (reported as null). malloc
 * returning NULL: "out of memory", exit 3. Result: one JSON line on stdout. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memsleuth/probe.h"
#include <errno.h>
#include "ms_args.h"

#define EXIT_OOM 3
#define MAX_SIZES 64
#define LINE 64

enum { FREE_ALL, LEAK_LAST, HOISTED, TARGET_FIRST_TOUCH };
static const char *const VARIANTS[] = {"free-all", "leak-last", "hoisted", "target-first-touch", NULL};

static uint64_t sizes[MAX_SIZES];
static int nsizes;

static void parse_sizes(const char *prog, const char *v) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", v);
  nsizes = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(tok, &end, 10);
    if (errno || end == tok || *end || *tok == '-' || x < LINE || x > (UINT64_C(1) << 36) || nsizes == MAX_SIZES) {
      fprintf(stderr, "%s: --sizes must be up to %d byte counts in [%d, 2^36], got '%s'\n", prog, MAX_SIZES, LINE, v);
      exit(2);
    }
    sizes[nsizes++] = x;
  }
  if (!nsizes) {
    fprintf(stderr, "%s: --sizes is empty\n", prog);
    exit(2);
  }
}

static int allocate(unsigned char **b, uint64_t nbuf, unsigned char **small, uint64_t small_bytes) {
  for (uint64_t i = 0; i < nbuf; i++)
    if (!(b[i] = malloc(sizes[i % (uint64_t)nsizes]))) return 0;
  return (*small = malloc(small_bytes)) != NULL;
}

int main(int argc, char **argv) {
  uint64_t steps = 10, nbuf = 8, small_bytes = 800;
  int variant = FREE_ALL;
  sizes[0] = 4u << 20;
  nsizes = 1;
  const ms_opt opts[] = {
      MS_U64("steps", &steps, 1, UINT64_C(1) << 32, "steps"),
      MS_U64("nbuf", &nbuf, 1, 4096, "buffers allocated per step"),
      MS_PARSE("sizes", parse_sizes, "the buffers' sizes in bytes, comma-separated, in turn (default 4194304)"),
      MS_U64("small", &small_bytes, 1, UINT64_C(1) << 30, "the small buffer allocated last, bytes"),
      MS_CHOICE("variant", &variant, VARIANTS, "what the step loop does with its buffers"),
      MS_END};
  ms_parse("alloc-churn", "seed 000's step loop", opts, argc, argv);
  unsigned char **b = calloc(nbuf, sizeof *b), *small = NULL;
  if (!b) {
    fprintf(stderr, "alloc-churn: out of memory\n");
    return EXIT_OOM;
  }
  uint64_t step_bytes = 0;
  for (uint64_t i = 0; i < nbuf; i++) step_bytes += sizes[i % (uint64_t)nsizes];
  uint64_t checksum = 0;
  int defined = variant != TARGET_FIRST_TOUCH;

  if (variant == HOISTED && !allocate(b, nbuf, &small, small_bytes)) goto oom;
  for (uint64_t s = 0; s < steps; s++) {
    ms_region_begin("alloc");
    int got = variant == HOISTED || allocate(b, nbuf, &small, small_bytes);
    ms_region_end(variant == HOISTED ? 0 : nbuf + 1);
    if (!got) goto oom;
    small[0] = (unsigned char)s; /* the small buffer is used, like the seed's 100-element array */

    ms_region_begin("init");
    if (variant != TARGET_FIRST_TOUCH)
      for (uint64_t i = 0; i < nbuf; i++) memset(b[i], (int)((i + s) & 0xff), sizes[i % (uint64_t)nsizes]);
    ms_region_end(variant != TARGET_FIRST_TOUCH ? step_bytes : 0);

    ms_region_begin("target");
    for (uint64_t i = 0; i < nbuf; i++) {
      unsigned char *p = b[i];
      uint64_t n = sizes[i % (uint64_t)nsizes];
      for (uint64_t k = 0; k < n; k += LINE) {
        checksum += p[k];
        p[k] = (unsigned char)(p[k] + 1);
      }
    }
    ms_region_end(step_bytes);

    ms_region_begin("free");
    uint64_t freed = 0;
    if (variant != HOISTED) {
      for (uint64_t i = 0; i < nbuf; i++, freed++) free(b[i]);
      if (variant != LEAK_LAST) {
        free(small);
        freed++;
      }
    }
    ms_region_end(freed);
  }
  if (variant == HOISTED) {
    for (uint64_t i = 0; i < nbuf; i++) free(b[i]);
    free(small);
  }
  free(b);
  char result[512], sum[32] = "null";
  if (defined) snprintf(sum, sizeof sum, "%llu", (unsigned long long)checksum);
  snprintf(result, sizeof result,
           "{\"workload\":\"alloc-churn\",\"variant\":\"%s\",\"steps\":%llu,\"bytes_per_step\":%llu,\"checksum\":%s}",
           VARIANTS[variant], (unsigned long long)steps, (unsigned long long)step_bytes, sum);
  ms_result(result);
  return 0;
oom:
  fprintf(stderr, "alloc-churn: out of memory (malloc returned NULL)\n");
  return EXIT_OOM;
}
