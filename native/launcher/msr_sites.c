#define _GNU_SOURCE
#include "msr_sites.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "ms_events.h"
#include "msr.h"
#include "msr_ring.h"

/* 64 data pages (256 KiB) per CPU: a sample of a 48-frame chain is ~430 bytes; the periods give a
 * few hundred samples per event in the whole run, so this is room for a burst ms-run reads late. */
#define DATA_PAGES 64
/* {pid, tid} {time} {identifier} at the end of a side-band record (sample_id_all) */
#define TRAILER 24

static void base_attr(struct perf_event_attr *a, int attach) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->sample_type =
      PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_STACK_USER;
  /* The word at the user stack pointer: in a function that makes no frame (libc's memset, memcpy,
   * a system call's wrapper) it is the return address into its caller, which the frame-pointer
   * chain skips (calloc -> memset reads as memset <- calloc's caller). */
  a->sample_stack_user = 8;
  a->sample_id_all = 1;
  a->exclude_callchain_kernel = 1; /* the program's frames only */
  a->sample_max_stack = MSR_SITES_FRAMES;
  msr_follow(a, attach);
}

/* msr_open_for, and again without the user stack's word where the kernel refuses it (an architecture
 * without user stack dumps): the chains are then as the frame pointers give them (on_sample reads a
 * record without the dump as one without the word). */
static long open_event(const msr_targets *t, int p, struct perf_event_attr *a, int cpu) {
  long fd = msr_open_for(t, p, a, cpu);
  if (fd < 0 && errno == EINVAL && (a->sample_type & PERF_SAMPLE_STACK_USER)) {
    a->sample_type &= ~(uint64_t)PERF_SAMPLE_STACK_USER;
    a->sample_stack_user = 0;
    fd = msr_open_for(t, p, a, cpu);
  }
  return fd;
}

/* "page-faults=40,madvise=1" into the event table. */
static void parse_spec(msr_sites *s, const char *spec) {
  for (const char *p = spec; p && *p && s->nev < MSR_SITES_EVENTS;) {
    size_t len = strcspn(p, ",");
    const char *eq = memchr(p, '=', len);
    if (eq && (size_t)(eq - p) < sizeof s->name[0]) {
      memcpy(s->name[s->nev], p, (size_t)(eq - p));
      s->name[s->nev][eq - p] = 0;
      unsigned long long period = strtoull(eq + 1, NULL, 10);
      s->period[s->nev] = period ? period : 1;
      s->nev++;
      if (!strcmp(s->name[s->nev - 1], "cpu-clock") && s->nev < MSR_SITES_EVENTS) { /* its kernel-mode half */
        snprintf(s->name[s->nev], sizeof s->name[0], "cpu-clock:kernel");
        s->period[s->nev] = s->period[s->nev - 1];
        s->kernel_of[s->nev - 1] = s->nev;
        s->nev++;
        s->timed = 1;
      }
    }
    p += len + (p[len] != 0);
  }
}

static int config_of(msr_sites *s, int e, struct perf_event_attr *a) {
  if (!strcmp(s->name[e], "cpu-clock:kernel")) return -1; /* not an event: cpu-clock's samples in the kernel */
  if (!strcmp(s->name[e], "cpu-clock")) {
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_CPU_CLOCK;
    return 0;
  }
  if (!strcmp(s->name[e], "page-faults")) { /* the minor faults, as libmssites samples them (ms_sites.c) */
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_PAGE_FAULTS_MIN;
    return 0;
  }
  long id = ms_tracepoint_id(s->name[e], s->ev_why[e], sizeof s->ev_why[e]);
  if (id < 0) return -1;
  a->type = PERF_TYPE_TRACEPOINT;
  a->config = (uint64_t)id;
  return 0;
}

int msr_sites_open(msr_sites *s, const msr_targets *t, const char *spec, uint64_t freq, const char *dir,
                   const char *skip) {
  memset(s, 0, sizeof *s);
  s->prefix = "sites";
  s->dir = dir;
  s->freq = freq;
  s->skip = skip ? realpath(skip, NULL) : NULL;
  parse_spec(s, spec);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu > MSR_MAX_CPUS) ncpu = MSR_MAX_CPUS;
  size_t most = (size_t)(ncpu * s->nev * msr_target_n(t) + 1);
  s->stacks = calloc(MSR_SITES_STACKS, sizeof *s->stacks);
  s->slot = malloc(2 * MSR_SITES_STACKS * sizeof *s->slot);
  s->ids = calloc(most, sizeof *s->ids);
  s->id_ev = calloc(most, 1);
  if (!s->stacks || !s->slot || !s->ids || !s->id_ev) {
    snprintf(s->why, sizeof s->why, "out of memory");
    return -1;
  }
  memset(s->slot, 0xff, 2 * MSR_SITES_STACKS * sizeof *s->slot);
  long page = sysconf(_SC_PAGESIZE);
  for (int cpu = 0; cpu < ncpu; cpu++) {
    int owner = -1; /* this CPU's buffer */
    for (int p = 0; p < msr_target_n(t); p++) {
      /* A dummy event carries the side-band records; the first of the CPU owns the buffer. */
      struct perf_event_attr a;
      base_attr(&a, t->attach);
      a.type = PERF_TYPE_SOFTWARE;
      a.config = PERF_COUNT_SW_DUMMY;
      a.mmap = 1; /* executable mappings */
      a.comm = 1;
      a.comm_exec = 1;
      a.task = 1;
      long fd = open_event(t, p, &a, cpu);
      if (fd < 0) {
        if (errno != ENODEV && errno != EINVAL && errno != ESRCH)
          snprintf(s->why, sizeof s->why, "side-band events: %s", strerror(errno));
        continue;
      }
      if (owner < 0) {
        size_t len = (size_t)page * (1 + DATA_PAGES);
        void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
        if (base == MAP_FAILED) {
          snprintf(s->why, sizeof s->why, "ring buffer: %s", strerror(errno));
          close((int)fd);
          continue;
        }
        s->fds[s->n] = (int)fd;
        s->base[s->n] = base;
        s->n++;
        owner = (int)fd;
      } else if (ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, owner)) {
        close((int)fd);
        continue;
      } else if (msr_fd_push(&s->extra, &s->nextra, &s->capextra, (int)fd)) {
        continue;
      }
      for (int e = 0; e < s->nev; e++) {
        base_attr(&a, t->attach);
        if (config_of(s, e, &a)) continue;
        if (freq) {
          /* A rate, not a period. Each sample counts once: the periods the kernel gives a tracepoint at
           * a rate are not its events (a futex-bound 2-thread window: periods summing to 45M against
           * 608k calls counted), so the reader scales the samples to the window's counts (at_rate). */
          a.freq = 1;
          a.sample_freq = freq;
        } else {
          a.sample_period = s->period[e];
        }
        long efd = open_event(t, p, &a, cpu);
        if (efd < 0) {
          if (errno != ESRCH) snprintf(s->ev_why[e], sizeof s->ev_why[e], "%s", strerror(errno));
          continue;
        }
        uint64_t id = 0;
        if (ioctl((int)efd, PERF_EVENT_IOC_SET_OUTPUT, owner) || ioctl((int)efd, PERF_EVENT_IOC_ID, &id)) {
          snprintf(s->ev_why[e], sizeof s->ev_why[e], "%s", strerror(errno));
          close((int)efd);
          continue;
        }
        if (msr_fd_push(&s->extra, &s->nextra, &s->capextra, (int)efd)) continue;
        if (s->skip && !s->skip_gate && msr_fd_note(&s->sampling, &s->nsampling, &s->capsampling, (int)efd)) {
          free(s->sampling); /* an event it could not switch: never gated, every tick sampling */
          s->sampling = NULL;
          s->nsampling = s->capsampling = 0;
          s->skip_gate = 1;
        }
        s->ids[s->nids] = id;
        s->id_ev[s->nids++] = (uint8_t)e;
        s->opened[e] = 1;
        if (s->kernel_of[e]) s->opened[s->kernel_of[e]] = 1;
      }
    }
  }
  s->enabled = s->nids > 0;
  s->sampling_on = 1;
  if (!s->enabled && !s->why[0]) snprintf(s->why, sizeof s->why, "no event opened");
  return s->enabled ? 0 : -1;
}

static int intern(msr_sites *s, const char *path, size_t len) {
  for (int k = s->npaths - 1; k >= 0; k--)
    if (strlen(s->paths[k]) == len && !memcmp(s->paths[k], path, len)) return k;
  if (s->npaths == s->cappaths) {
    int cap = s->cappaths ? 2 * s->cappaths : 64;
    char **t = realloc(s->paths, (size_t)cap * sizeof *t);
    if (!t) return -1;
    s->paths = t;
    s->cappaths = cap;
  }
  s->paths[s->npaths] = strndup(path, len);
  return s->paths[s->npaths] ? s->npaths++ : -1;
}

static msr_site_proc *proc_of(msr_sites *s, pid_t pid, int create) {
  for (int k = s->nproc - 1; k >= 0; k--)
    if (s->procs[k].pid == pid) return &s->procs[k];
  if (!create || s->nproc == MSR_SITES_PROCS) return NULL;
  msr_site_proc *p = &s->procs[s->nproc++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  return p;
}

static void add_map(msr_site_proc *p, uint64_t start, uint64_t len, uint64_t pgoff, int path) {
  if (p->nmaps == p->capmaps) {
    int cap = p->capmaps ? 2 * p->capmaps : 16;
    msr_site_map *t = realloc(p->maps, (size_t)cap * sizeof *t);
    if (!t) return;
    p->maps = t;
    p->capmaps = cap;
  }
  p->maps[p->nmaps++] = (msr_site_map){start, start + len, pgoff, path};
}

/* A running process's executable mappings and name, from /proc: the kernel reports only the
 * mappings made after the events opened. */
void msr_sites_seed(msr_sites *s, pid_t pid) {
  msr_site_proc *p = proc_of(s, pid, 1);
  if (!p) return;
  msr_comm(pid, p->comm, sizeof p->comm);
  char path[64], line[1024];
  msr_proc_file(pid, "maps", path, sizeof path);
  FILE *f = fopen(path, "re");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off;
    char perms[8];
    int at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &at) < 4 || perms[2] != 'x' || !at) continue;
    char *file = line + at;
    file[strcspn(file, "\n")] = 0;
    if (file[0] != '/') continue;
    int k = intern(s, file, strlen(file));
    if (k >= 0) add_map(p, lo, hi - lo, off, k);
  }
  fclose(f);
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

static void add_stack(msr_sites *s, int32_t proc, uint8_t ev, const uint64_t *ip, uint16_t depth, uint64_t ret,
                      uint64_t weight, int when) {
  uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)proc * 16 + ev);
  for (int k = 0; k < depth; k++) h = mix(h, ip[k]);
  h = mix(h, ret);
  size_t nslot = 2 * MSR_SITES_STACKS;
  for (size_t i = h % nslot;; i = (i + 1) % nslot) {
    int32_t at = s->slot[i];
    if (at < 0) {
      if (s->nstacks == MSR_SITES_STACKS) {
        s->cut++;
        return;
      }
      msr_site_stack *st = &s->stacks[s->nstacks];
      *st = (msr_site_stack){.n = weight, .hash = h, .proc = proc, .ev = ev, .depth = depth, .ret = ret};
      st->when[when] = (uint32_t)weight;
      memcpy(st->ip, ip, depth * sizeof *ip);
      s->slot[i] = s->nstacks++;
      return;
    }
    msr_site_stack *st = &s->stacks[at];
    if (st->hash == h && st->proc == proc && st->ev == ev && st->depth == depth && st->ret == ret &&
        !memcmp(st->ip, ip, depth * sizeof *ip)) {
      st->n += weight;
      st->when[when] += (uint32_t)weight;
      return;
    }
  }
}

/* `word` where it may be a return address: in an executable file mapping of the process, and not
 * the chain's next frame already. Anything else at the stack pointer (a frame's locals) is 0, so
 * that it does not split one chain into many. */
static uint64_t leaf_return(const msr_site_proc *p, uint64_t word, const uint64_t *chain, uint16_t depth) {
  if (!word || !depth || (depth > 1 && chain[1] == word)) return 0;
  for (int k = 0; k < p->nmaps; k++)
    if (word >= p->maps[k].start && word < p->maps[k].end) return word;
  return 0;
}

/* { header, u64 id, u32 pid, tid, u64 time, u64 nr, u64 ips[nr], u64 size, char data[size],
 * u64 dyn_size } (the user stack's part only where the sample has user registers: size 0 else) */
static void on_sample(msr_sites *s, const unsigned char *rec, size_t n) {
  size_t hs = sizeof(struct perf_event_header), at = hs + 24;
  uint64_t id, nr, time;
  uint32_t pid;
  if (n < at + 8) return;
  memcpy(&id, rec + hs, 8);
  memcpy(&pid, rec + hs + 8, 4);
  memcpy(&time, rec + hs + 16, 8);
  memcpy(&nr, rec + at, 8);
  const unsigned char *ips = rec + at + 8;
  uint64_t word = 0;
  if (at + 8 + nr * 8 > n) {
    nr = (n - at - 8) / 8;
  } else {
    size_t us = at + 8 + nr * 8; /* the user stack's dump */
    uint64_t size = 0, dyn = 0;
    if (us + 8 <= n) memcpy(&size, rec + us, 8);
    if (size >= 8 && us + 16 + size <= n) memcpy(&dyn, rec + us + 8 + size, 8);
    if (dyn >= 8) memcpy(&word, rec + us + 8, 8);
  }
  int ev = -1;
  for (int k = 0; k < s->nids; k++)
    if (s->ids[k] == id) ev = s->id_ev[k];
  if (ev < 0) return;
  int cpu = !!s->kernel_of[ev]; /* a CPU-time sample: every one counts, with a user chain or not */
  if (cpu && (((const struct perf_event_header *)rec)->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL)
    ev = s->kernel_of[ev];
  msr_site_proc *p = proc_of(s, (pid_t)pid, 1);
  if (!p) return;
  if (!p->comm[0]) msr_comm((pid_t)pid, p->comm, sizeof p->comm);
  uint64_t chain[MSR_SITES_FRAMES];
  uint16_t depth = 0;
  for (uint64_t k = 0; k < nr && depth < MSR_SITES_FRAMES; k++) {
    uint64_t ip;
    memcpy(&ip, ips + 8 * k, 8);
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) continue; /* a context marker */
    /* The innermost address is the pc itself, the others return addresses; the documents' readers
     * move every address one byte back (into the call), so the pc is written one byte on. */
    chain[depth] = ip + (depth == 0);
    depth++;
  }
  s->samples++;
  p->samples++;
  if (depth || cpu) {
    int when = msr_when_bucket(&s->when, time, s->stacks[0].when, s->nstacks, sizeof *s->stacks);
    add_stack(s, (int32_t)(p - s->procs), (uint8_t)ev, chain, depth, leaf_return(p, word, chain, depth), 1, when);
  }
}

/* Each process's program and executable mappings, from the side-band records. */
static void on_side(msr_sites *s, const unsigned char *rec, size_t n) {
  size_t hs = sizeof(struct perf_event_header);
  struct perf_event_header h;
  memcpy(&h, rec, hs);
  if (n < hs + 8 + TRAILER) return;
  uint32_t pid, tid;
  memcpy(&pid, rec + hs, 4);
  memcpy(&tid, rec + hs + 4, 4);
  if (h.type == PERF_RECORD_COMM && pid == tid) {
    msr_site_proc *p = proc_of(s, (pid_t)pid, 1);
    if (!p) return;
    size_t max = n - hs - 8 - TRAILER;
    size_t len = strnlen((const char *)rec + hs + 8, max < 16 ? max : 16);
    memcpy(p->comm, rec + hs + 8, len);
    p->comm[len] = 0;
    if (h.misc & PERF_RECORD_MISC_COMM_EXEC) { /* a new image: nothing of the old one is mapped */
      p->nmaps = 0;
      p->skip = 0;
      p->gone = 0;
    }
  } else if (h.type == PERF_RECORD_EXIT && n >= hs + 16 + TRAILER) { /* { pid, ppid, tid, ptid, time } */
    memcpy(&tid, rec + hs + 8, 4);
    msr_site_proc *p = pid == tid ? proc_of(s, (pid_t)pid, 0) : NULL;
    if (p) p->gone = 1;
  } else if (h.type == PERF_RECORD_FORK && n >= hs + 16 + TRAILER) {
    uint32_t ppid;
    memcpy(&ppid, rec + hs + 4, 4);
    memcpy(&tid, rec + hs + 8, 4);
    if (pid != tid || pid == ppid) return; /* a thread */
    msr_site_proc *parent = proc_of(s, (pid_t)ppid, 0);
    if (!parent || proc_of(s, (pid_t)pid, 0)) return;
    msr_site_proc *p = proc_of(s, (pid_t)pid, 1); /* the table is an array: `parent` stays valid */
    if (!p) return;
    memcpy(p->comm, parent->comm, sizeof p->comm);
    p->skip = parent->skip;
    for (int k = 0; k < parent->nmaps; k++)
      add_map(p, parent->maps[k].start, parent->maps[k].end - parent->maps[k].start, parent->maps[k].pgoff,
              parent->maps[k].path);
  } else if (h.type == PERF_RECORD_MMAP && n > hs + 32 + TRAILER) {
    uint64_t addr, len, pgoff;
    memcpy(&addr, rec + hs + 8, 8);
    memcpy(&len, rec + hs + 16, 8);
    memcpy(&pgoff, rec + hs + 24, 8);
    const char *file = (const char *)rec + hs + 32;
    size_t flen = strnlen(file, n - hs - 32 - TRAILER);
    if (!flen || file[0] != '/') return; /* anonymous executable memory: a JIT's, named by its perf map */
    msr_site_proc *p = proc_of(s, (pid_t)pid, 1);
    if (!p) return;
    if (s->skip && flen == strlen(s->skip) && !memcmp(file, s->skip, flen)) p->skip = 1;
    int path = intern(s, file, flen);
    if (path >= 0) add_map(p, addr, len, pgoff, path);
  }
}

/* A sample's own time, a side-band record's from its trailer. */
static uint64_t sites_rec_time(const unsigned char *rec, size_t len) {
  const struct perf_event_header *h = (const void *)rec;
  size_t hs = sizeof *h;
  uint64_t t = 0;
  if (h->type == PERF_RECORD_SAMPLE && len >= hs + 24) memcpy(&t, rec + hs + 16, 8);
  else if (h->type != PERF_RECORD_SAMPLE && len >= hs + TRAILER) memcpy(&t, rec + len - 16, 8);
  return t;
}

/* Reads every record the buffers hold, all CPUs' in time order: a process's exec and mappings
 * come before its samples, a fork before its child's. */
void msr_sites_drain(msr_sites *s) {
  unsigned char *arena;
  msr_rec *recs;
  size_t n = msr_ring_read(s->base, s->n, sites_rec_time, &s->lost, &arena, &recs);
  for (size_t k = 0; k < n; k++) {
    const unsigned char *rec = arena + recs[k].off;
    if (!s->when.t0) s->when.t0 = sites_rec_time(rec, recs[k].len); /* the first exec, before any sample */
    if (((const struct perf_event_header *)rec)->type == PERF_RECORD_SAMPLE) on_sample(s, rec, recs[k].len);
    else on_side(s, rec, recs[k].len);
  }
  free(arena);
  free(recs);
}

static void write_doc(msr_sites *s, int32_t pi) {
  msr_site_proc *p = &s->procs[pi];
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.jsonl", s->dir, s->prefix);
  ms_json j;
  if (msj_init_growable(&j, 1 << 16)) return;
  msj_obj_begin(&j, NULL);
  msj_i64(&j, "pid", p->pid);
  msj_str(&j, "comm", p->comm);
  msj_u64(&j, "samples", p->samples);
  msj_str(&j, "sampled_by", "kernel");
  if (s->timed) {
    msj_u64(&j, "when_bucket_ns", s->when.width ? s->when.width : MSR_WHEN_NS);
    msj_u64(&j, "when_span_ns", msr_when_span(&s->when));
  }
  msj_arr_begin(&j, "events");
  for (int e = 0; e < s->nev; e++) {
    msj_obj_begin(&j, NULL);
    msj_str(&j, "name", s->name[e]);
    msj_u64(&j, "period", s->freq ? 1 : s->period[e]); /* rate mode: its samples, scaled by the reader */
    msj_bool(&j, "opened", s->opened[e]);
    if (!s->opened[e]) msj_str(&j, "why", s->ev_why[e][0] ? s->ev_why[e] : "not opened");
    msj_obj_end(&j);
  }
  msj_arr_end(&j);
  msj_arr_begin(&j, "stacks");
  for (int k = 0; k < s->nstacks; k++) {
    const msr_site_stack *st = &s->stacks[k];
    if (st->proc != pi) continue;
    msj_arr_begin(&j, NULL);
    msj_u64(&j, NULL, st->ev);
    msj_u64(&j, NULL, st->n);
    msj_arr_begin(&j, NULL);
    for (int f = 0; f < st->depth; f++) msj_u64(&j, NULL, st->ip[f]);
    msj_arr_end(&j);
    if (s->timed || st->ret) { /* [bucket, samples, ...], the empty buckets left out (none: not timed) */
      msj_arr_begin(&j, NULL);
      for (int b = 0; b < MSR_WHEN && s->timed; b++) {
        if (!st->when[b]) continue;
        msj_u64(&j, NULL, (uint64_t)b);
        msj_u64(&j, NULL, st->when[b]);
      }
      msj_arr_end(&j);
    }
    if (st->ret) msj_u64(&j, NULL, st->ret); /* the leaf's return address (leaf_return) */
    msj_arr_end(&j);
  }
  msj_arr_end(&j);
  msj_arr_begin(&j, "maps"); /* newest first: a range mapped again names its latest file */
  for (int k = p->nmaps - 1; k >= 0; k--) {
    msj_arr_begin(&j, NULL);
    msj_u64(&j, NULL, p->maps[k].start);
    msj_u64(&j, NULL, p->maps[k].end);
    msj_u64(&j, NULL, p->maps[k].pgoff);
    msj_str(&j, NULL, s->paths[p->maps[k].path]);
    msj_arr_end(&j);
  }
  msj_arr_end(&j);
  msj_obj_end(&j);
  /* A line of PREFIX.jsonl beside the in-program sampler's (where a pid has both, a pid reused, the
   * reader keeps the program's own: records/documents.py). */
  if (!j.overflow && msj_append_line(path, j.buf, j.len) == 0) s->written++;
  free(j.buf);
}

void msr_sites_gate(msr_sites *s) {
  if (!s->skip || !s->nsampling || s->skip_gate) return;
  int want = s->nproc == MSR_SITES_PROCS; /* a full table: some processes are not followed */
  for (int k = 0; k < s->nproc && !want; k++) want = !s->procs[k].gone && !s->procs[k].skip;
  s->ticks++;
  s->ticks_on += (uint64_t)want;
  if (want == s->sampling_on) return;
  msr_fds_enable(s->sampling, s->nsampling, want);
  s->sampling_on = want;
}

void msr_sites_write(msr_sites *s) {
  if (!s->enabled || !s->dir) return;
  for (int k = 0; k < s->nproc; k++)
    if (s->procs[k].samples && !s->procs[k].skip) write_doc(s, k);
}

void msr_sites_close(msr_sites *s) {
  long page = sysconf(_SC_PAGESIZE);
  for (int k = 0; k < s->nextra; k++) close(s->extra[k]);
  for (int k = 0; k < s->n; k++) {
    munmap(s->base[k], (size_t)page * (1 + DATA_PAGES));
    close(s->fds[k]);
  }
  s->n = s->nextra = 0;
  for (int k = 0; k < s->nproc; k++) free(s->procs[k].maps);
  for (int k = 0; k < s->npaths; k++) free(s->paths[k]);
  free(s->paths);
  free(s->skip);
  free(s->stacks);
  free(s->slot);
  free(s->extra);
  free(s->sampling);
  s->sampling = NULL;
  s->nsampling = s->capsampling = 0;
  free(s->ids);
  free(s->id_ev);
  s->paths = NULL;
  s->skip = NULL;
  s->stacks = NULL;
  s->slot = NULL;
  s->extra = NULL;
  s->ids = NULL;
  s->id_ev = NULL;
  s->nproc = s->npaths = 0;
}

void msr_sites_json(ms_json *j, const char *key, const msr_sites *s) {
  msj_obj_begin(j, key);
  msj_bool(j, "opened", s->enabled);
  if (s->why[0]) msj_str(j, "why", s->why);
  msj_u64(j, "samples", s->samples);
  msj_u64(j, "lost_records", s->lost);
  msj_u64(j, "cut_stacks", s->cut);
  msj_i64(j, "documents", s->written);
  if (s->skip && s->nsampling &&
      !s->skip_gate) /* the share of the ticks sampling: a process the program's sampler did not reach */
    msj_dbl(j, "on_share", s->ticks ? (double)s->ticks_on / (double)s->ticks : 1);
  msj_arr_begin(j, "pids"); /* every process of the tree seen: what it may have left behind is found */
  for (int k = 0; k < s->nproc; k++) msj_i64(j, NULL, s->procs[k].pid);
  msj_arr_end(j);
  msj_obj_end(j);
}
