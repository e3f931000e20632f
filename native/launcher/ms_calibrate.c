/* ms-calibrate: what one kernel entry of each kind costs on this machine, as JSON.
 *
 * The findings split a run's system time across its page faults and system calls by count times
 * these unit costs (src/memsleuth/findings/cost.py, docs/findings.md). Measured in this process,
 * quickly (about 30 ms), at the start of every measuring session, because page-fault cost on a VM
 * moves with the host (balloon page reporting):
 *   fault_ns         one minor fault of fresh anonymous memory (first write to a page, zeroing it)
 *   release_page_ns  giving back one resident page (munmap of written memory, per page)
 *   syscall_ns       one call of each counted system call doing no work on pages (the entry, the
 *                    lookup and the bookkeeping): mmap, munmap, brk, madvise, mremap, mprotect, futex
 *   count_ns         what counting a call adds to it: the measured runs count each memory system call
 *                    on its syscalls:sys_enter_ tracepoint (ms_events.c), and the kernel builds the
 *                    tracepoint's record at every call counted. The futex batch again while a perf
 *                    event counts sys_enter_futex for this process, less the batch without; absent
 *                    where the tracepoint does not open (not root, no tracefs).
 * Each figure is the median of BATCHES timed batches.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ms_events.h"

enum { BATCHES = 5, CALLS = 400, FAULT_PAGES = 1024 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* One batch of each kind; returns ns per unit, or -1 when the call is refused here. */
typedef double (*batch_fn)(long page);

static double batch_faults_and_release(long page, double *release_ns) {
  size_t len = (size_t)FAULT_PAGES * (size_t)page;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  double t0 = now_ns();
  for (size_t off = 0; off < len; off += (size_t)page) p[off] = 1;
  double t1 = now_ns();
  munmap(p, len);
  double t2 = now_ns();
  *release_ns = (t2 - t1) / FAULT_PAGES;
  return (t1 - t0) / FAULT_PAGES;
}

static double batch_mmap_munmap(long page) { /* one pair: mmap + munmap of an untouched page */
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) {
    void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    munmap(p, (size_t)page);
  }
  return (now_ns() - t0) / (2.0 * CALLS);
}

static double batch_brk(long page) { /* the break up and down one untouched page */
  void *base = sbrk(0);
  if (base == (void *)-1) return -1;
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) {
    if (sbrk(page) == (void *)-1) return -1;
    if (sbrk(-page) == (void *)-1) return -1;
  }
  return (now_ns() - t0) / (2.0 * CALLS);
}

static char *scratch; /* two pages, mapped once */

static double batch_madvise(long page) { /* MADV_DONTNEED on an untouched page */
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++)
    if (madvise(scratch, (size_t)page, MADV_DONTNEED) != 0) return -1;
  return (now_ns() - t0) / CALLS;
}

static double batch_mprotect(long page) {
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++)
    if (mprotect(scratch, (size_t)page, (i & 1) ? PROT_READ | PROT_WRITE : PROT_READ) != 0) return -1;
  mprotect(scratch, (size_t)page, PROT_READ | PROT_WRITE);
  return (now_ns() - t0) / CALLS;
}

static double batch_mremap(long page) { /* grow an untouched mapping by a page and back */
  void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) {
    void *q = mremap(p, (size_t)page, 2 * (size_t)page, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
      munmap(p, (size_t)page);
      return -1;
    }
    p = mremap(q, 2 * (size_t)page, (size_t)page, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) return -1;
  }
  double per = (now_ns() - t0) / (2.0 * CALLS);
  munmap(p, (size_t)page);
  return per;
}

static double batch_futex(long page) { /* FUTEX_WAKE with nobody waiting */
  (void)page;
  static int word;
  double t0 = now_ns();
  for (int i = 0; i < CALLS; i++) syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  return (now_ns() - t0) / CALLS;
}

/* The extra ns a counted call costs (count_ns above), or -1 where the tracepoint does not open. The
 * event stays open in *fd: closing the last event of a tracepoint waits out an RCU grace period
 * (tens of ms), which main pays after its output is written and closed. */
static double counting_ns(long page, double plain, int *held) {
  char why[128];
  long id = ms_tracepoint_id("futex", why, sizeof why);
  if (id < 0) return -1;
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_TRACEPOINT;
  a.size = sizeof a;
  a.config = (unsigned long long)id;
  int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return -1;
  double v[BATCHES];
  batch_futex(page); /* warm-up */
  for (int b = 0; b < BATCHES; b++) v[b] = batch_futex(page);
  *held = fd;
  double d = median(v, BATCHES) - plain;
  return d > 0 ? d : 0;
}

static const struct {
  const char *name;
  batch_fn fn;
} SYSCALLS[] = {
    {"mmap", batch_mmap_munmap},  {"brk", batch_brk},       {"madvise", batch_madvise},
    {"mprotect", batch_mprotect}, {"mremap", batch_mremap}, {"futex", batch_futex},
};

int main(int argc, char **argv) {
  (void)argv;
  if (argc > 1) {
    fprintf(stderr, "usage: ms-calibrate (no options): prints the unit costs of kernel entries as JSON\n");
    return 2;
  }
  long page = sysconf(_SC_PAGESIZE);
  scratch = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (scratch == MAP_FAILED) {
    perror("ms-calibrate: mmap");
    return 1;
  }
  double fault[BATCHES], release[BATCHES];
  batch_faults_and_release(page, &release[0]); /* warm-up: page tables, the allocator's own pages */
  for (int b = 0; b < BATCHES; b++) fault[b] = batch_faults_and_release(page, &release[b]);
  printf("{\"page_bytes\": %ld, \"fault_ns\": %.1f, \"release_page_ns\": %.1f, \"syscall_ns\": {", page,
         median(fault, BATCHES), median(release, BATCHES));
  int first = 1;
  double futex_ns = -1;
  for (size_t k = 0; k < sizeof SYSCALLS / sizeof SYSCALLS[0]; k++) {
    double v[BATCHES];
    int refused = 0;
    SYSCALLS[k].fn(page); /* warm-up */
    for (int b = 0; b < BATCHES; b++)
      if ((v[b] = SYSCALLS[k].fn(page)) < 0) refused = 1;
    if (refused) continue;
    double m = median(v, BATCHES);
    printf("%s\"%s\": %.1f", first ? "" : ", ", SYSCALLS[k].name, m);
    first = 0;
    if (SYSCALLS[k].fn == batch_mmap_munmap) printf(", \"munmap\": %.1f", m);
    if (SYSCALLS[k].fn == batch_futex) futex_ns = m;
  }
  printf("}");
  int held = -1;
  double counted = futex_ns >= 0 ? counting_ns(page, futex_ns, &held) : -1;
  if (counted >= 0) printf(", \"count_ns\": %.1f", counted);
  printf("}\n");
  fclose(stdout); /* the reader has all it needs: the event's close below may wait */
  if (held >= 0) close(held);
  return 0;
}
