/* cache-flush: bandwidth of cache-line flush, write-back and fill primitives (seed 004).
 *
 *   cache-flush --op=OP --bytes=N --passes=P --dirty=0|1
 *   cache-flush --op=detect          what CPUID says this CPU has (JSON), and nothing else
 *
 * Ops, each timed in region "op" once per pass (ops = bytes):
 *   clflush     CLFLUSH every 64-byte line, then MFENCE;
 *   clflushopt  CLFLUSHOPT every line, then SFENCE;
 *   clwb        CLWB every line, then SFENCE;
 *   memset      memset of the buffer;
 *   nt-store    16-byte non-temporal stores (MOVNTDQ) over the buffer, then SFENCE.
 * A flush is complete only after the fence (the SDM orders CLFLUSHOPT and CLWB by SFENCE, and
 * CLFLUSH by MFENCE), so the fence is inside the timed region. With --dirty=1 (default) each
 * pass first writes the buffer, outside the region, so that every line has data to write back;
 * --dirty=0 flushes lines already flushed (what the seed's loop measured after its first pass).
 *
 * An instruction CPUID does not report is never executed: the program prints
 * {"supported": false, "reason": ...} and exits 0. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memsleuth/probe.h"
#include "ms_args.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define MS_X86 1
#endif

#define LINE 64
enum { CLFLUSH, CLFLUSHOPT, CLWB, MEMSET, NT_STORE, DETECT };
static const char *const OPS[] = {"clflush", "clflushopt", "clwb", "memset", "nt-store", "detect", NULL};

typedef struct {
  int clflush, clflushopt, clwb, sse2;
} features;

/* CPUID leaf 1 EDX: bit 19 CLFSH, bit 26 SSE2; leaf 7 subleaf 0 EBX: bit 23 CLFLUSHOPT, bit 24 CLWB. */
static features detect(void) {
  features f = {0, 0, 0, 0};
#ifdef MS_X86
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    f.clflush = (d >> 19) & 1;
    f.sse2 = (d >> 26) & 1;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.clflushopt = (b >> 23) & 1;
    f.clwb = (b >> 24) & 1;
  }
#endif
  return f;
}

static const char *missing_reason(int op, features f) {
#ifndef MS_X86
  if (op != MEMSET) return "not an x86 CPU";
#endif
  switch (op) {
    case CLFLUSH:
      return f.clflush ? NULL : "CPUID.01H:EDX[19] (CLFSH) is 0";
    case CLFLUSHOPT:
      return f.clflushopt ? NULL : "CPUID.(EAX=07H,ECX=0):EBX[23] (CLFLUSHOPT) is 0";
    case CLWB:
      return f.clwb ? NULL : "CPUID.(EAX=07H,ECX=0):EBX[24] (CLWB) is 0";
    case NT_STORE:
      return f.sse2 ? NULL : "CPUID.01H:EDX[26] (SSE2) is 0";
    default:
      return NULL;
  }
}

#ifdef MS_X86
static void __attribute__((noinline)) do_clflush(unsigned char *p, size_t n) {
  for (size_t k = 0; k < n; k += LINE) _mm_clflush(p + k);
  _mm_mfence();
}
static void __attribute__((noinline, target("clflushopt"))) do_clflushopt(unsigned char *p, size_t n) {
  for (size_t k = 0; k < n; k += LINE) _mm_clflushopt(p + k);
  _mm_sfence();
}
static void __attribute__((noinline, target("clwb"))) do_clwb(unsigned char *p, size_t n) {
  for (size_t k = 0; k < n; k += LINE) _mm_clwb(p + k);
  _mm_sfence();
}
static void __attribute__((noinline, target("sse2"))) do_nt_store(unsigned char *p, size_t n, int value) {
  __m128i v = _mm_set1_epi8((char)value);
  for (size_t k = 0; k < n; k += 16) _mm_stream_si128((__m128i *)(p + k), v);
  _mm_sfence();
}
#endif

int main(int argc, char **argv) {
  uint64_t bytes = UINT64_C(128) << 20, passes = 8, dirty = 1;
  int op = MEMSET;
  const ms_opt opts[] = {MS_U64("bytes", &bytes, 4096, UINT64_C(1) << 40, "the buffer, bytes"),
                         MS_U64("passes", &passes, 1, 1000000, "passes over the buffer"),
                         MS_U64("dirty", &dirty, 0, 1, "1: write the buffer before each pass"),
                         MS_CHOICE("op", &op, OPS, "the operation timed"), MS_END};
  ms_parse("cache-flush", "cache-line flushes and non-temporal stores over a buffer", opts, argc, argv);
  features f = detect();
  if (op == DETECT) {
    char result[512];
    snprintf(
        result, sizeof result,
        "{\"workload\":\"cache-flush\",\"cpu\":{\"x86\":%s,\"clflush\":%s,\"clflushopt\":%s,\"clwb\":%s,\"sse2\":%s}}",
#ifdef MS_X86
        "true",
#else
        "false",
#endif
        f.clflush ? "true" : "false", f.clflushopt ? "true" : "false", f.clwb ? "true" : "false",
        f.sse2 ? "true" : "false");
    ms_result(result);
    return 0;
  }
  const char *why = missing_reason(op, f);
  if (why) {
    char result[512];
    snprintf(result, sizeof result,
             "{\"workload\":\"cache-flush\",\"op\":\"%s\",\"supported\":false,\"reason\":\"%s\"}", OPS[op], why);
    ms_result(result);
    return 0;
  }
  size_t n = (size_t)(bytes & ~(uint64_t)(LINE - 1));
  unsigned char *p = NULL;
  if (posix_memalign((void **)&p, 4096, n)) {
    fprintf(stderr, "cache-flush: out of memory\n");
    return 3;
  }
  memset(p, 1, n); /* first touch outside every region */
  for (uint64_t pass = 0; pass < passes; pass++) {
    if (dirty && op != MEMSET && op != NT_STORE) memset(p, (int)(pass & 0xff), n);
    ms_region_begin("op");
    switch (op) {
#ifdef MS_X86
      case CLFLUSH:
        do_clflush(p, n);
        break;
      case CLFLUSHOPT:
        do_clflushopt(p, n);
        break;
      case CLWB:
        do_clwb(p, n);
        break;
      case NT_STORE:
        do_nt_store(p, n, (int)(pass & 0xff));
        break;
#endif
      case MEMSET:
        memset(p, (int)(pass & 0xff), n);
        __asm__ volatile("" ::: "memory");
        break;
      default:
        break;
    }
    ms_region_end(n);
  }
  char result[512];
  snprintf(
      result, sizeof result,
      "{\"workload\":\"cache-flush\",\"op\":\"%s\",\"supported\":true,\"bytes\":%zu,\"passes\":%llu,\"dirty\":%llu,"
      "\"checksum\":%u}",
      OPS[op], n, (unsigned long long)passes, (unsigned long long)dirty, (unsigned)p[n - 1]);
  ms_result(result);
  free(p);
  return 0;
}
