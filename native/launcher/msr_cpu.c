#define _GNU_SOURCE
#include "msr_cpu.h"
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "msr.h"
#include "msr_ring.h"

/* 32 data pages (128 KiB) per CPU: at 1 kHz a sample of ~300 bytes, 10 ms between two reads,
 * fills 3 KiB; the rest is room for a tick ms-run misses on a busy machine. */
#define DATA_PAGES 32
#define HALF (MSR_CPU_FRAMES / 2)

static void free_symbols(msr_cpu *c);

int msr_cpu_open(msr_cpu *c, const msr_targets *t, uint64_t period_ns, const char *preload) {
  memset(c, 0, sizeof *c);
  c->period_ns = period_ns;
  /* The preloaded libraries as the kernel names their mappings: resolved (a symlink's target). */
  for (const char *p = preload; p && *p && c->npreload < MSR_CPU_PRELOADS;) {
    size_t len = strcspn(p, ": ");
    char path[4096];
    if (len && len < sizeof path) {
      memcpy(path, p, len);
      path[len] = 0;
      char *real = realpath(path, NULL);
      c->preload[c->npreload++] = real ? real : strdup(path);
    }
    p += len + (p[len] != 0);
  }
  c->stacks = calloc(MSR_CPU_STACKS, sizeof *c->stacks);
  c->slot = malloc(2 * MSR_CPU_STACKS * sizeof *c->slot);
  if (!c->stacks || !c->slot) {
    snprintf(c->why, sizeof c->why, "out of memory");
    return -1;
  }
  memset(c->slot, 0xff, 2 * MSR_CPU_STACKS * sizeof *c->slot);
  long page = sysconf(_SC_PAGESIZE);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu > MSR_MAX_CPUS) ncpu = MSR_MAX_CPUS;
  for (int cpu = 0; cpu < ncpu; cpu++)
    for (int p = 0; p < msr_target_n(t); p++) {
      struct perf_event_attr attr;
      memset(&attr, 0, sizeof attr);
      attr.size = sizeof attr;
      attr.type = PERF_TYPE_SOFTWARE;
      attr.config = PERF_COUNT_SW_CPU_CLOCK;
      attr.sample_period = period_ns;
      attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
      attr.sample_id_all = 1; /* side-band records carry {pid, tid, time}: read in time order */
      attr.mmap = 1;          /* executable mappings: which processes mapped the preloaded libraries */
      attr.exclude_callchain_user = 1;
      attr.comm = 1;
      attr.comm_exec = 1;
      attr.task = 1;
      msr_follow(&attr, t->attach);
      long fd = msr_open_for(t, p, &attr, cpu);
      if (fd < 0) {
        if (errno != ENODEV && errno != EINVAL && errno != ESRCH)
          snprintf(c->why, sizeof c->why, "cpu-clock sampling: %s", strerror(errno));
        continue; /* an offline CPU, a thread gone, or not permitted */
      }
      if (c->n && c->n_cpu_last == cpu) { /* this CPU has its buffer: the event writes into it */
        if (ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, c->fds[c->n - 1]) == 0)
          msr_fd_push(&c->extra, &c->nextra, &c->capextra, (int)fd);
        else close((int)fd);
        continue;
      }
      size_t len = (size_t)page * (1 + DATA_PAGES);
      void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
      if (base == MAP_FAILED) {
        snprintf(c->why, sizeof c->why, "ring buffer: %s", strerror(errno));
        close((int)fd);
        continue;
      }
      c->fds[c->n] = (int)fd;
      c->base[c->n] = base;
      c->n++;
      c->n_cpu_last = cpu;
    }
  c->enabled = c->n > 0;
  if (c->enabled) c->why[0] = 0;
  return c->enabled ? 0 : -1;
}

static int comm_index(msr_cpu *c, const char *name) {
  for (int k = 0; k < c->ncomm; k++)
    if (!strncmp(c->comm[k], name, sizeof c->comm[k])) return k;
  if (c->ncomm == MSR_CPU_COMMS) return MSR_CPU_COMMS - 1; /* the last one takes the rest */
  size_t len = strnlen(name, sizeof c->comm[0] - 1);
  memcpy(c->comm[c->ncomm], name, len);
  c->comm[c->ncomm][len] = 0;
  return c->ncomm++;
}

/* The slot of a process (created when `comm` >= 0; -1 when the table is full or it is unknown). */
static int pid_slot(msr_cpu *c, pid_t pid, int comm) {
  for (int k = c->npid - 1; k >= 0; k--)
    if (c->pid[k] == pid) return k;
  if (comm < 0 || c->npid == MSR_CPU_PIDS) return -1;
  int k = c->npid++;
  c->pid[k] = pid;
  c->pid_comm[k] = (int16_t)comm;
  c->pid_exec[k] = 0;
  c->pid_mask[k] = 0;
  return k;
}

/* The executable a sample of `pid` belongs to: from the COMM and FORK records, else /proc. */
static int comm_of(msr_cpu *c, pid_t pid) {
  int k = pid_slot(c, pid, -1);
  if (k >= 0) return c->pid_comm[k];
  char name[32];
  msr_comm(pid, name, sizeof name);
  int idx = comm_index(c, name);
  pid_slot(c, pid, idx);
  return idx;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

static void add_stack(msr_cpu *c, int comm, const uint64_t *ip, uint16_t depth, uint8_t elided, uint8_t release,
                      int when) {
  uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)comm * 8 + release);
  for (int k = 0; k < depth; k++) h = mix(h, ip[k]);
  size_t nslot = 2 * MSR_CPU_STACKS;
  for (size_t s = h % nslot;; s = (s + 1) % nslot) {
    int32_t i = c->slot[s];
    if (i < 0) {
      if (c->nstacks == MSR_CPU_STACKS) {
        c->cut++;
        return;
      }
      msr_cpu_stack *st = &c->stacks[c->nstacks];
      st->n = 1;
      memset(st->when, 0, sizeof st->when);
      st->when[when] = 1;
      st->hash = h;
      st->comm = (int16_t)comm;
      st->depth = depth;
      st->elided = elided;
      st->release = release;
      memcpy(st->ip, ip, depth * sizeof *ip);
      c->slot[s] = c->nstacks++;
      return;
    }
    msr_cpu_stack *st = &c->stacks[i];
    if (st->hash == h && st->comm == comm && st->release == release && st->depth == depth &&
        !memcmp(st->ip, ip, depth * sizeof *ip)) {
      st->n++;
      st->when[when]++;
      return;
    }
  }
}

/* { header, u32 pid, tid, u64 time, u64 nr, u64 ips[nr] } */
static void on_sample(msr_cpu *c, const unsigned char *rec, size_t n) {
  size_t hs = sizeof(struct perf_event_header);
  if (n < hs + 24) return;
  uint32_t pid, tid;
  uint64_t nr, time;
  memcpy(&pid, rec + hs, 4);
  memcpy(&tid, rec + hs + 4, 4);
  memcpy(&time, rec + hs + 8, 8);
  memcpy(&nr, rec + hs + 16, 8);
  const unsigned char *ips = rec + hs + 24;
  if (hs + 24 + nr * 8 > n) nr = (n - hs - 24) / 8;
  uint64_t chain[MSR_CPU_FRAMES];
  uint64_t kernel[512];
  uint64_t nk = 0;
  for (uint64_t k = 0; k < nr && nk < 512; k++) {
    uint64_t ip;
    memcpy(&ip, ips + 8 * k, 8);
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) continue; /* a context marker: kernel, user */
    kernel[nk++] = ip;
  }
  uint16_t depth;
  uint8_t elided = 0;
  if (nk <= MSR_CPU_FRAMES) {
    memcpy(chain, kernel, nk * 8);
    depth = (uint16_t)nk;
  } else { /* the innermost frames say what ran, the outermost how the kernel was entered */
    memcpy(chain, kernel, HALF * 8);
    memcpy(chain + HALF, kernel + nk - HALF, HALF * 8);
    depth = MSR_CPU_FRAMES;
    elided = 1;
  }
  int comm = comm_of(c, (pid_t)pid);
  c->samples++;
  c->comm_samples[comm]++;
  if (depth) c->kernel++;
  int kind = depth && c->faults ? msr_args_join(c->faults, tid, time, MSR_CPU_FAULT_WINDOW_NS) : -1;
  int when = msr_when_bucket(&c->when, time, c->stacks[0].when, c->nstacks, sizeof *c->stacks);
  add_stack(c, comm, chain, depth, elided, (uint8_t)(kind + 1), when);
}

/* Which program each process runs and which preloaded libraries it mapped, from the side-band
 * records (sample_id_all: {pid, tid, time} at their end). */
static void on_side(msr_cpu *c, const unsigned char *rec, size_t n) {
  size_t hs = sizeof(struct perf_event_header), trailer = 16;
  struct perf_event_header h;
  memcpy(&h, rec, hs);
  uint32_t pid, tid;
  if (n < hs + 8 + trailer) return;
  memcpy(&pid, rec + hs, 4);
  memcpy(&tid, rec + hs + 4, 4);
  if (h.type == PERF_RECORD_COMM && pid == tid) { /* a process's exec or rename, not a thread's name */
    char name[17];
    size_t len = strnlen((const char *)rec + hs + 8, n - hs - 8 - trailer < 16 ? n - hs - 8 - trailer : 16);
    memcpy(name, rec + hs + 8, len);
    name[len] = 0;
    int comm = comm_index(c, name), k = pid_slot(c, (pid_t)pid, comm);
    if (k < 0) return;
    c->pid_comm[k] = (int16_t)comm;
    if (h.misc & PERF_RECORD_MISC_COMM_EXEC) { /* a new program image: nothing mapped yet */
      c->pid_exec[k] = 1;
      c->pid_mask[k] = 0;
    }
  } else if (h.type == PERF_RECORD_FORK && n >= hs + 16 + trailer) {
    uint32_t ppid;
    memcpy(&ppid, rec + hs + 4, 4);
    memcpy(&tid, rec + hs + 8, 4);
    if (pid != tid || pid == ppid) return; /* a thread */
    int parent = pid_slot(c, (pid_t)ppid, -1);
    if (parent < 0 || pid_slot(c, (pid_t)pid, -1) >= 0) return;
    int k = pid_slot(c, (pid_t)pid, c->pid_comm[parent]); /* a new process runs its parent's program */
    if (k >= 0) {
      c->pid_exec[k] = c->pid_exec[parent];
      c->pid_mask[k] = c->pid_mask[parent];
    }
  } else if (h.type == PERF_RECORD_MMAP && n > hs + 32 + trailer && c->npreload) {
    const char *file = (const char *)rec + hs + 32;
    size_t max = n - hs - 32 - trailer;
    for (int i = 0; i < c->npreload; i++) {
      if (strnlen(file, max) == strlen(c->preload[i]) && !strncmp(file, c->preload[i], max)) {
        int k = pid_slot(c, (pid_t)pid, comm_of(c, (pid_t)pid));
        if (k >= 0) c->pid_mask[k] |= (uint8_t)(1u << i);
      }
    }
  }
}

/* Samples after every side-band record (the time their record ends with) of the same read. */
static uint64_t cpu_rec_time(const unsigned char *rec, size_t len) {
  const struct perf_event_header *h = (const void *)rec;
  uint64_t t = 0;
  if (h->type == PERF_RECORD_SAMPLE) return UINT64_MAX;
  if (len >= sizeof *h + 16) memcpy(&t, rec + len - 8, 8);
  return t;
}

/* Reads every record the buffers hold: the side-band ones of all CPUs in time order first, then
 * the samples, so that a sample read in the same 10 ms as its process's exec is named for the
 * program it ran, and a library mapped after an exec on another CPU is not undone by it. */
void msr_cpu_drain(msr_cpu *c) {
  unsigned char *arena;
  msr_rec *recs;
  size_t n = msr_ring_read(c->base, c->n, cpu_rec_time, &c->lost, &arena, &recs);
  for (size_t k = 0; k < n; k++) {
    const unsigned char *rec = arena + recs[k].off;
    if (((const struct perf_event_header *)rec)->type == PERF_RECORD_SAMPLE) {
      on_sample(c, rec, recs[k].len);
    } else {
      if (!c->when.t0) c->when.t0 = cpu_rec_time(rec, recs[k].len); /* the first exec, before any sample */
      on_side(c, rec, recs[k].len);
    }
  }
  free(arena);
  free(recs);
}

void msr_cpu_close(msr_cpu *c) {
  free_symbols(c);
  long page = sysconf(_SC_PAGESIZE);
  for (int k = 0; k < c->nextra; k++) close(c->extra[k]);
  free(c->extra);
  c->extra = NULL;
  c->nextra = c->capextra = 0;
  for (int k = 0; k < c->n; k++) {
    munmap(c->base[k], (size_t)page * (1 + DATA_PAGES));
    close(c->fds[k]);
  }
  c->n = 0;
  for (int i = 0; i < c->npreload; i++) free(c->preload[i]);
  c->npreload = 0;
  free(c->stacks);
  free(c->slot);
  c->stacks = NULL;
  c->slot = NULL;
}

/* ---- naming the kernel's addresses (/proc/kallsyms) ---- */
typedef struct msr_ksym {
  uint64_t addr;
  char *name;
} ksym;

static int by_addr(const void *a, const void *b) {
  uint64_t x = ((const ksym *)a)->addr, y = ((const ksym *)b)->addr;
  return x < y ? -1 : x > y;
}

static int by_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The text symbols of the running kernel, sorted; NULL when the addresses are hidden (not root,
 * kptr_restrict) or the file cannot be read. */
static ksym *load_kallsyms(size_t *count, char *why, size_t wlen) {
  FILE *f = fopen("/proc/kallsyms", "r");
  if (!f) {
    snprintf(why, wlen, "/proc/kallsyms: %s", strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 17, n = 0;
  ksym *s = malloc(cap * sizeof *s);
  char line[512];
  int nonzero = 0;
  while (s && fgets(line, sizeof line, f)) {
    char *end;
    uint64_t addr = strtoull(line, &end, 16);
    if (end[0] != ' ' || (end[1] != 't' && end[1] != 'T') || end[2] != ' ') continue;
    char *name = end + 3;
    name[strcspn(name, " \t\n")] = 0;
    if (addr) nonzero = 1;
    if (n == cap) {
      ksym *t = realloc(s, 2 * cap * sizeof *s);
      if (!t) break;
      s = t;
      cap *= 2;
    }
    s[n].addr = addr;
    s[n].name = strdup(name);
    n++;
  }
  fclose(f);
  if (!s || !nonzero) {
    if (s)
      for (size_t k = 0; k < n; k++) free(s[k].name);
    free(s);
    snprintf(why, wlen, "kernel addresses hidden in /proc/kallsyms (not root, or kptr_restrict): frames unnamed");
    return NULL;
  }
  qsort(s, n, sizeof *s, by_addr);
  *count = n;
  return s;
}

static void *load_in_background(void *arg) {
  msr_cpu *c = arg;
  c->ksyms = load_kallsyms(&c->nksym, c->kwhy, sizeof c->kwhy);
  return NULL;
}

void msr_cpu_name_later(msr_cpu *c) {
  if (!c->enabled || c->naming || c->ksyms) return;
  /* Created with every signal blocked: a signal to ms-run (the child's exit, Ctrl-C) stays the
   * main thread's, which waits for it in ppoll. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  c->naming = pthread_create(&c->namer, NULL, load_in_background, c) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The symbols the background thread read (joined here), else read now. */
static void take_symbols(msr_cpu *c) {
  if (c->naming) {
    pthread_join(c->namer, NULL);
    c->naming = 0;
  } else if (!c->ksyms && !c->kwhy[0]) {
    c->ksyms = load_kallsyms(&c->nksym, c->kwhy, sizeof c->kwhy);
  }
}

static void free_symbols(msr_cpu *c) {
  if (c->naming) {
    pthread_join(c->namer, NULL);
    c->naming = 0;
  }
  for (size_t k = 0; c->ksyms && k < c->nksym; k++) free(c->ksyms[k].name);
  free(c->ksyms);
  c->ksyms = NULL;
  c->nksym = 0;
}

static const char *name_of(const ksym *s, size_t n, uint64_t ip) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* the last symbol at or below ip */
    size_t mid = (lo + hi) / 2;
    if (s[mid].addr <= ip) lo = mid + 1;
    else hi = mid;
  }
  return lo ? s[lo - 1].name : NULL;
}

void msr_cpu_json(ms_json *j, msr_cpu *c) {
  msj_obj_begin(j, "cpu_profile");
  msj_u64(j, "period_ns", c->period_ns);
  msj_u64(j, "samples", c->samples);
  msj_u64(j, "kernel_samples", c->kernel);
  msj_u64(j, "lost_records", c->lost);
  msj_u64(j, "cut_stacks", c->cut);
  msj_u64(j, "when_bucket_ns", c->when.width ? c->when.width : MSR_WHEN_NS);
  msj_u64(j, "when_span_ns", msr_when_span(&c->when));
  /* Every distinct address once, named once. */
  size_t nip = 0;
  for (int k = 0; k < c->nstacks; k++) nip += c->stacks[k].depth;
  uint64_t *ips = malloc((nip ? nip : 1) * sizeof *ips);
  size_t u = 0;
  if (ips) {
    for (int k = 0; k < c->nstacks; k++)
      for (int f = 0; f < c->stacks[k].depth; f++) ips[u++] = c->stacks[k].ip[f];
    qsort(ips, u, sizeof *ips, by_u64);
    size_t w = 0;
    for (size_t k = 0; k < u; k++)
      if (!w || ips[k] != ips[w - 1]) ips[w++] = ips[k];
    u = w;
  }
  if (u) take_symbols(c);
  const ksym *syms = u ? c->ksyms : NULL;
  size_t nsym = c->nksym;
  msj_str(j, "why", c->why[0] ? c->why : u ? c->kwhy : "");
  msj_arr_begin(j, "frames"); /* frame k of "stacks" is frames[k] */
  for (size_t k = 0; k < u; k++) {
    const char *name = syms ? name_of(syms, nsym, ips[k]) : NULL;
    if (name) {
      msj_str(j, NULL, name);
    } else {
      char hex[24];
      snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)ips[k]);
      msj_str(j, NULL, hex);
    }
  }
  msj_arr_end(j);
  /* [name, samples, processes, processes that exec'd it, of those the ones that mapped each
   * preloaded library (in the order of "preload")] */
  msj_arr_begin(j, "executables");
  for (int k = 0; k < c->ncomm; k++) {
    uint64_t procs = 0, execd = 0, mapped[MSR_CPU_PRELOADS] = {0};
    for (int p = 0; p < c->npid; p++) {
      if (c->pid_comm[p] != k) continue;
      procs++;
      if (!c->pid_exec[p]) continue;
      execd++;
      for (int i = 0; i < c->npreload; i++) mapped[i] += (c->pid_mask[p] >> i) & 1;
    }
    msj_arr_begin(j, NULL);
    msj_str(j, NULL, c->comm[k]);
    msj_u64(j, NULL, c->comm_samples[k]);
    msj_u64(j, NULL, procs);
    msj_u64(j, NULL, execd);
    msj_arr_begin(j, NULL);
    for (int i = 0; i < c->npreload; i++) msj_u64(j, NULL, mapped[i]);
    msj_arr_end(j);
    msj_arr_end(j);
  }
  msj_arr_end(j);
  msj_arr_begin(j, "preload");
  for (int i = 0; i < c->npreload; i++) msj_str(j, NULL, c->preload[i]);
  msj_arr_end(j);
  /* [executable, samples, elided, [frame, ...] innermost first, release, [bucket, samples, ...]];
   * no frame: user mode; release: 0 unknown, else 1 + what released the address of the thread's
   * last traced fault (none, munmap, madvise, brk); the last: its samples by bucket of
   * when_bucket_ns from the run's first record, the buckets with none left out */
  msj_arr_begin(j, "stacks");
  for (int k = 0; k < c->nstacks; k++) {
    const msr_cpu_stack *st = &c->stacks[k];
    msj_arr_begin(j, NULL);
    msj_u64(j, NULL, (uint64_t)st->comm);
    msj_u64(j, NULL, st->n);
    msj_u64(j, NULL, st->elided);
    msj_arr_begin(j, NULL);
    for (int f = 0; f < st->depth; f++) {
      uint64_t *at = ips ? bsearch(&st->ip[f], ips, u, sizeof *ips, by_u64) : NULL;
      msj_u64(j, NULL, at ? (uint64_t)(at - ips) : 0);
    }
    msj_arr_end(j);
    msj_u64(j, NULL, st->release);
    msj_arr_begin(j, NULL);
    for (int b = 0; b < MSR_WHEN; b++) {
      if (!st->when[b]) continue;
      msj_u64(j, NULL, (uint64_t)b);
      msj_u64(j, NULL, st->when[b]);
    }
    msj_arr_end(j);
    msj_arr_end(j);
  }
  msj_arr_end(j);
  msj_obj_end(j);
  free(ips);
}
