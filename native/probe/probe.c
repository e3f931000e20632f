/* libmsprobe: regions measured in-process (DESIGN: "measure the region of interest, in-process,
 * with counters started and stopped at its borders"). No malloc anywhere on these paths. */
#define _GNU_SOURCE
#include "memsleuth/probe.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ms_events.h"
#include "ms_json.h"
#include "ms_report.h"

#define MAX_DEPTH 8
#define MAX_SUMMARY 64

typedef struct {
  char name[48];
  uint64_t t0_ns;
  struct rusage ru0;
  ms_snapshot snap0;
  uintptr_t brk0;   /* program break at the border: heap growth and trimming (seed 000) */
  uint64_t rss0_kb; /* resident memory at the border: faults that add no RSS map the zero page */
} frame;

typedef struct {
  char name[48];
  uint64_t ops, wall_ns, user_ns, sys_ns;
  double val[MS_MAX_EVENTS];
  int kind[MS_MAX_EVENTS];
} summary;

static ms_counters g_ctr;
static int g_started, g_out_fd = -1, g_depth, g_statm_fd = -1;
static frame g_stack[MAX_DEPTH];
static summary g_sum[MAX_SUMMARY];
static int g_nsum, g_dropped;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    s += w;
    n -= (size_t)w;
  }
}

static void print_summary(void);

/* sbrk(0) reads glibc's cached break: no system call. */
static uintptr_t current_brk(void) { return (uintptr_t)sbrk(0); }

/* Resident KiB from /proc/self/statm, through an fd kept open (one pread, no open per region). */
static uint64_t current_rss_kb(void) {
  char buf[128];
  if (g_statm_fd < 0) return 0;
  ssize_t n = pread(g_statm_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long size = 0, resident = 0;
  if (sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024u;
}

void ms_probe_init(void) {
  if (g_started) return;
  g_started = 1;
  const char *fd = getenv("MEMSLEUTH_FD");
  if (fd && *fd) g_out_fd = atoi(fd);
  g_statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  /* MEMSLEUTH_NO_COUNTERS: regions keep their clock and rusage but open no perf events, to
   * measure what the counters themselves cost (bench/overhead.py). */
  /* MEMSLEUTH_NO_SYSCALLS (ms-run --no-syscalls, a timed run): no syscall tracepoint either. */
  if (!getenv("MEMSLEUTH_NO_COUNTERS")) {
    ms_counters_open(&g_ctr, 0, MS_OPEN_INHERIT | (getenv("MEMSLEUTH_NO_SYSCALLS") ? MS_OPEN_NO_SYSCALLS : 0));
    ms_counters_enable(&g_ctr);
  }
  if (g_out_fd >= 0) {
    char buf[4096];
    ms_json j;
    msj_line_begin(&j, buf, sizeof buf, "probe", getpid());
    msj_i64(&j, "grouped", g_ctr.grouped);
    ms_json_unsupported(&j, &g_ctr);
    msj_obj_end(&j);
    msj_raw(&j, "\n");
    write_all(g_out_fd, buf, j.len);
  } else {
    atexit(print_summary);
  }
}

__attribute__((constructor)) static void probe_ctor(void) { ms_probe_init(); }

void ms_region_begin(const char *name) {
  ms_probe_init();
  if (g_depth >= MAX_DEPTH) {
    g_depth++;
    return;
  } /* too deep: counted so that end pairs up */
  frame *f = &g_stack[g_depth++];
  snprintf(f->name, sizeof f->name, "%s", name ? name : "region");
  f->rss0_kb = current_rss_kb();
  f->brk0 = current_brk();
  getrusage(RUSAGE_SELF, &f->ru0);
  f->t0_ns = now_ns();
  /* Counters last, so that the clock and rusage calls are outside the counted window. */
  ms_counters_read(&g_ctr, &f->snap0);
}

static uint64_t ru_ns(struct timeval a, struct timeval b) {
  uint64_t x = ms_tv_ns(a.tv_sec, a.tv_usec), y = ms_tv_ns(b.tv_sec, b.tv_usec);
  return y > x ? y - x : 0;
}

void ms_region_end(uint64_t ops) {
  ms_snapshot s1;
  ms_counters_read(&g_ctr, &s1); /* first, mirror of begin */
  uint64_t t1 = now_ns();
  struct rusage ru1;
  getrusage(RUSAGE_SELF, &ru1);
  uintptr_t brk1 = current_brk();
  uint64_t rss1_kb = current_rss_kb();
  if (g_depth <= 0) return;
  if (g_depth > MAX_DEPTH) {
    g_depth--;
    return;
  }
  frame *f = &g_stack[--g_depth];

  summary cur;
  memset(&cur, 0, sizeof cur);
  memcpy(cur.name, f->name, sizeof cur.name);
  cur.ops = ops;
  cur.wall_ns = t1 - f->t0_ns;
  cur.user_ns = ru_ns(f->ru0.ru_utime, ru1.ru_utime);
  cur.sys_ns = ru_ns(f->ru0.ru_stime, ru1.ru_stime);
  for (int i = 0; i < g_ctr.n; i++) {
    if (g_ctr.ev[i].fd < 0) {
      cur.kind[i] = MS_NOT_COUNTED;
      continue;
    }
    cur.kind[i] = ms_scale(ms_reading_delta(f->snap0.r[i], s1.r[i]), &cur.val[i]);
  }

  if (g_out_fd >= 0) {
    char buf[4096];
    ms_json j;
    msj_line_begin(&j, buf, sizeof buf, "region", getpid());
    msj_str(&j, "name", cur.name);
    msj_i64(&j, "depth", g_depth);
    msj_u64(&j, "ops", cur.ops);
    msj_u64(&j, "wall_ns", cur.wall_ns);
    msj_u64(&j, "user_ns", cur.user_ns);
    msj_u64(&j, "sys_ns", cur.sys_ns);
    msj_i64(&j, "rusage_minflt", ru1.ru_minflt - f->ru0.ru_minflt);
    msj_i64(&j, "rusage_majflt", ru1.ru_majflt - f->ru0.ru_majflt);
    msj_i64(&j, "brk_delta_bytes", (int64_t)brk1 - (int64_t)f->brk0);
    msj_u64(&j, "rss_start_kb", f->rss0_kb);
    msj_u64(&j, "rss_end_kb", rss1_kb);
    ms_json_counters(&j, &g_ctr, &f->snap0, &s1, 0);
    msj_obj_end(&j);
    msj_raw(&j, "\n");
    write_all(g_out_fd, buf, j.len);
  } else if (g_nsum < MAX_SUMMARY) {
    g_sum[g_nsum++] = cur;
  } else {
    g_dropped++;
  }
}

static void print_summary(void) {
  char line[1024];
  for (int k = 0; k < g_nsum; k++) {
    summary *s = &g_sum[k];
    int n = snprintf(line, sizeof line, "memsleuth probe: region \"%s\": %.3f ms wall, user %.3f ms, sys %.3f ms",
                     s->name, s->wall_ns / 1e6, s->user_ns / 1e6, s->sys_ns / 1e6);
    if (s->ops)
      n += snprintf(line + n, sizeof line - n, ", %llu ops, %.2f ns/op", (unsigned long long)s->ops,
                    (double)s->wall_ns / (double)s->ops);
    n += snprintf(line + n, sizeof line - n, "\n   ");
    for (int i = 0; i < g_ctr.n && n < (int)sizeof line - 64; i++) {
      if (g_ctr.ev[i].fd < 0) continue;
      if (s->kind[i] == MS_NOT_COUNTED)
        n += snprintf(line + n, sizeof line - n, " %s=not-counted", g_ctr.ev[i].def->name);
      else
        n += snprintf(line + n, sizeof line - n, " %s=%.0f%s", g_ctr.ev[i].def->name, s->val[i],
                      s->kind[i] == MS_SCALED ? "(scaled)" : "");
    }
    n += snprintf(line + n, sizeof line - n, "\n");
    write_all(2, line, (size_t)n);
  }
  if (g_dropped) {
    int n = snprintf(line, sizeof line, "memsleuth probe: %d more regions not shown\n", g_dropped);
    write_all(2, line, (size_t)n);
  }
  /* Unavailable events, one line per reason ("no PMU" covers all seven hardware events). */
  char why[160], other[160];
  int done[MS_MAX_EVENTS] = {0};
  for (int i = 0; i < g_ctr.n; i++) {
    if (g_ctr.ev[i].fd >= 0 || done[i]) continue;
    ms_event_reason(&g_ctr.ev[i], why, sizeof why);
    int n = snprintf(line, sizeof line, "memsleuth probe: unavailable:");
    for (int k = i; k < g_ctr.n && n < (int)sizeof line - 200; k++) {
      if (g_ctr.ev[k].fd >= 0 || done[k]) continue;
      if (strcmp(ms_event_reason(&g_ctr.ev[k], other, sizeof other), why)) continue;
      done[k] = 1;
      n += snprintf(line + n, sizeof line - n, " %s", g_ctr.ev[k].def->name);
    }
    n += snprintf(line + n, sizeof line - n, " (%s)\n", why);
    write_all(2, line, (size_t)n);
  }
}

void ms_result(const char *json_object) {
  ms_probe_init();
  if (!json_object) return;
  size_t n = strlen(json_object);
  /* On stdout for a person running the program; on MEMSLEUTH_FD, wrapped as one line, for
   * memsleuth, which reads the result there and never from the program's output. */
  write_all(1, json_object, n);
  write_all(1, "\n", 1);
  if (g_out_fd >= 0) {
    static const char head[] = "{\"type\":\"result\",\"result\":";
    write_all(g_out_fd, head, sizeof head - 1);
    write_all(g_out_fd, json_object, n);
    write_all(g_out_fd, "}\n", 2);
  }
}
