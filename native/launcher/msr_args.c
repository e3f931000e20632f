#define _GNU_SOURCE
#include "msr_args.h"
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

/* 64 data pages (256 KiB) per event: at ~80 bytes a record, ~3,000 calls between two reads
 * (10 ms apart) before the kernel drops any, which it then counts for us (PERF_RECORD_LOST). */
#define DATA_PAGES 64

static const struct {
  const char *tracepoint;
  const char *fields[4];
} k_args[MSR_A_N] = {
    [MSR_A_MUNMAP] = {"syscalls/sys_enter_munmap", {"len", "addr", NULL}},
    [MSR_A_MADVISE] = {"syscalls/sys_enter_madvise", {"len_in", "behavior", "start", NULL}},
    [MSR_A_MMAP] = {"syscalls/sys_enter_mmap", {"len", "flags", NULL}},
    [MSR_A_MREMAP] = {"syscalls/sys_enter_mremap", {"old_len", "new_len", "addr", NULL}},
    [MSR_A_BRK] = {"syscalls/sys_exit_brk", {"ret", NULL}},
    [MSR_A_BRKQ] = {"syscalls/sys_enter_brk", {"brk", NULL}},
    [MSR_A_FAULT] = {"exceptions/page_fault_user", {"address", "error_code", NULL}},
    [MSR_A_FAULTK] = {"exceptions/page_fault_kernel", {"address", "error_code", NULL}},
    [MSR_A_AREA] = {"mmap/vm_unmapped_area", {"addr", "length", "flags", NULL}},
};
static const char *const k_names[MSR_A_N] = {"munmap",    "madvise", "mmap",          "mremap",      "brk",
                                             "brk_enter", "faults",  "faults_kernel", "mapped_areas"};
/* A user address (x86-64's and arm64's 47- and 48-bit user halves): a kernel fault on it is the
 * program's memory faulted in by a system call. */
#define MSR_USER_TOP (1ULL << 48)
/* vm_unmapped_area's info->flags: the search goes down from the top (VM_UNMAPPED_AREA_TOPDOWN) */
#define MSR_AREA_TOPDOWN 1
/* A tracepoint record's common_flags (trace_flag_type, the same bits from 4.x to 6.x): taken in a
 * hard interrupt, a soft interrupt or an NMI. A kernel fault there is no page faulted in for the
 * program: it is a read that may fault and is fixed up, above all the sampler's own walk of the user
 * stack (perf's callchain reads each frame pointer with __get_user, one fault on address 0 per sample
 * whose chain ends in a null frame). Counted as the program's, it became the thread's latest fault, and
 * the samples inside a long fault handler (a huge page zeroed) joined it as a first touch. */
#define MSR_TRACE_IRQ_FLAGS (0x08 | 0x10 | 0x40)
/* The advice that gives pages back (asm-generic/mman-common.h): DONTNEED, FREE, REMOVE, PAGEOUT,
 * DONTNEED_LOCKED. */
static int releases(int advice) { return advice == 4 || advice == 8 || advice == 9 || advice == 21 || advice == 24; }

/* The tracepoint's id and the offsets of its fields, from its format file. */
static int read_format(const char *tp, const char *const *fields, int *off, long *id, char *why, size_t wlen) {
  const char *dir = ms_tracefs_events_dir();
  if (!dir) {
    snprintf(why, wlen, "tracefs not reachable");
    return -1;
  }
  char path[512], buf[8192];
  snprintf(path, sizeof path, "%s/%s/id", dir, tp);
  FILE *f = fopen(path, "r");
  if (!f || fscanf(f, "%ld", id) != 1) {
    if (f) fclose(f);
    snprintf(why, wlen, "no tracepoint %s", tp);
    return -1;
  }
  fclose(f);
  snprintf(path, sizeof path, "%s/%s/format", dir, tp);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) {
    snprintf(why, wlen, "format of %s unreadable", tp);
    return -1;
  }
  buf[n] = 0;
  for (int k = 0; fields[k]; k++) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s;", fields[k]);
    char *p = strstr(buf, pat);
    char *o = p ? strstr(p, "offset:") : NULL;
    if (!o) {
      snprintf(why, wlen, "%s has no field %s", tp, fields[k]);
      return -1;
    }
    off[k] = atoi(o + 7);
  }
  return 0;
}

/* The field a split event's filter reads (the size that decides whether each call is recorded), and
 * its place among the event's fields (k_args). */
static const char *size_field(int i) { return i == MSR_A_AREA ? "length" : i == MSR_A_MREMAP ? "new_len" : "len"; }
static int size_at(int i) { return i == MSR_A_AREA || i == MSR_A_MREMAP ? 1 : 0; }

int msr_args_sampled_index(const char *name) {
  for (int i = 0; i < MSR_A_N; i++)
    if (i != MSR_A_BRK && i != MSR_A_BRKQ && !strcmp(k_names[i], name)) return i;
  return -1; /* munmap, madvise, mmap, mremap, faults */
}

int msr_args_open(msr_args *a, const msr_targets *t, const uint64_t *every, double fault_share) {
  memset(a, 0, sizeof *a);
  a->fault_share = fault_share > 0 && fault_share < 1 ? fault_share : 0;
  a->faults_on = 1;
  a->rng = 0x9e3779b97f4a7c15ull; /* the same ticks traced in every run of a command (repeatable) */
  for (int i = 0; i < MSR_A_N; i++)
    a->every[i] = every && every[i] > 1 && i != MSR_A_BRK && i != MSR_A_BRKQ ? every[i] : 1;
  long page = sysconf(_SC_PAGESIZE);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu > MSR_MAX_CPUS) ncpu = MSR_MAX_CPUS;
  int ok[MSR_A_N] = {0};
  for (int i = 0; i < MSR_A_N; i++)
    ok[i] = read_format(k_args[i].tracepoint, k_args[i].fields, a->ev[i].off, &a->ev[i].id, a->ev[i].why,
                        sizeof a->ev[i].why) == 0;
  /* Faults only when asked for (a period), with somewhere to look their addresses up. */
  if (!every || !every[MSR_A_FAULT]) {
    ok[MSR_A_FAULT] = ok[MSR_A_FAULTK] = ok[MSR_A_AREA] = 0;
    snprintf(a->ev[MSR_A_FAULT].why, sizeof a->ev[MSR_A_FAULT].why, "not asked for");
    snprintf(a->ev[MSR_A_FAULTK].why, sizeof a->ev[MSR_A_FAULTK].why, "not asked for");
    snprintf(a->ev[MSR_A_AREA].why, sizeof a->ev[MSR_A_AREA].why, "not asked for");
  } else if (!(a->rel = calloc(MSR_REL_PIDS, sizeof *a->rel)) ||
             !(a->recent = calloc(MSR_LAST_FAULTS, sizeof *a->recent))) {
    ok[MSR_A_FAULT] = ok[MSR_A_FAULTK] = ok[MSR_A_AREA] = 0;
    snprintf(a->ev[MSR_A_FAULT].why, sizeof a->ev[MSR_A_FAULT].why, "out of memory");
  }
  a->every[MSR_A_AREA] = a->every[MSR_A_MMAP];    /* the new mappings as often as mmap's own records */
  a->every[MSR_A_FAULTK] = a->every[MSR_A_FAULT]; /* the kernel's faults on user memory as the user's */
  /* A storm sampled one call in P leaves most mappings unrecorded, and the faults of a fresh mapping
   * that was not recorded read as first touches: with faults traced, the mappings, unmaps and moves
   * (mremap) of at least MSR_BIG_RANGE are recorded at every call (a filter on the tracepoint), the
   * smaller ones one in P, so that a thread mapping 8 MiB buffers beside one mapping 64 KiB in a loop
   * is still churn, and a large buffer realloc moves is still one mapping. */
  for (int i = 0; i < MSR_A_N; i++)
    a->split[i] = (i == MSR_A_MUNMAP || i == MSR_A_AREA || i == MSR_A_MMAP || i == MSR_A_MREMAP) && a->every[i] > 1 &&
                  ok[i] && ok[MSR_A_FAULT];
  for (int cpu = 0; cpu < ncpu; cpu++) {
    int out_fd = -1;
    for (int p = 0; p < msr_target_n(t); p++)
      for (int v = 0; v < 2 * MSR_A_N; v++) {
        int i = v % MSR_A_N, big = v >= MSR_A_N; /* the big half of a split event */
        if (!ok[i] || (big && !a->split[i])) continue;
        struct perf_event_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_TRACEPOINT;
        attr.config = (uint64_t)a->ev[i].id;
        attr.sample_period = big ? 1 : a->every[i]; /* no PERIOD in sample_type: the kernel honours it */
        /* TIME: the per-CPU buffers are merged in time order, so that a process's break moves are
       * read in the order they happened even when it migrates between CPUs. */
        attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
        msr_follow(&attr, t->attach);
        long fd = msr_open_for(t, p, &attr, cpu);
        if (fd < 0) {
          if (errno != ENODEV && errno != EINVAL) snprintf(a->ev[i].why, sizeof a->ev[i].why, "%s", strerror(errno));
          continue; /* an offline CPU, or not permitted */
        }
        if (a->split[i]) {
          char filter[64];
          snprintf(filter, sizeof filter, "%s %s %llu", size_field(i), big ? ">=" : "<",
                   (unsigned long long)MSR_BIG_RANGE);
          if (ioctl((int)fd, PERF_EVENT_IOC_SET_FILTER, filter) != 0) { /* no filters: one event, sampled */
            if (big) {
              close((int)fd);
              continue;
            }
            a->split[i] = 0; /* the first CPU's small half comes before any big half */
          }
        }
        if (out_fd < 0) {
          size_t len = (size_t)page * (1 + DATA_PAGES);
          void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
          if (base == MAP_FAILED) {
            snprintf(a->ev[i].why, sizeof a->ev[i].why, "ring buffer: %s", strerror(errno));
            close((int)fd);
            continue;
          }
          a->buf[a->nbuf].fd = (int)fd;
          a->buf[a->nbuf].base = base;
          a->nbuf++;
          out_fd = (int)fd;
        } else if (ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, out_fd) != 0) {
          snprintf(a->ev[i].why, sizeof a->ev[i].why, "set output: %s", strerror(errno));
          close((int)fd);
          continue;
        }
        if (msr_fd_push(&a->fds, &a->nfds, &a->capfds, (int)fd)) continue;
        if ((i == MSR_A_FAULT || i == MSR_A_FAULTK) && a->fault_share &&
            msr_fd_note(&a->fault_fds, &a->nfault, &a->capfault, (int)fd))
          a->fault_share = 0; /* an event it could not switch: every tick traced, nothing scaled */
        if (!big) a->ev[i].opened++;
      }
  }
  for (int i = 0; i < MSR_A_N; i++)
    if (a->ev[i].opened) a->ev[i].why[0] = 0;
  a->enabled = a->nbuf > 0;
  return a->nfds;
}

void msr_args_tick(msr_args *a) {
  if (!a->fault_share || !a->nfault) return;
  a->rng ^= a->rng << 13; /* xorshift64 */
  a->rng ^= a->rng >> 7;
  a->rng ^= a->rng << 17;
  int on = (double)(a->rng >> 11) / (double)(1ull << 53) < a->fault_share;
  a->ticks++;
  a->ticks_on += (uint64_t)on;
  if (on == a->faults_on) return;
  msr_fds_enable(a->fault_fds, a->nfault, on);
  a->faults_on = on;
}

int msr_args_hold(int *fds) {
  int n = 0;
  for (int i = 0; i < MSR_A_N; i++) {
    int off[4];
    long id;
    char why[128];
    if (read_format(k_args[i].tracepoint, k_args[i].fields, off, &id, why, sizeof why)) continue;
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = (uint64_t)id;
    long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) fds[n++] = (int)fd;
  }
  return n;
}

static uint64_t u64_at(const unsigned char *raw, uint32_t size, int off) {
  uint64_t v = 0;
  if (off >= 0 && (uint32_t)off + 8 <= size) memcpy(&v, raw + off, 8);
  return v;
}

static int bucket(uint64_t bytes) {
  int k = 0;
  while (bytes > 1 && k < MSR_HIST - 1) {
    bytes >>= 1;
    k++;
  }
  return k;
}

/* The released ranges of a process (created on first use; NULL when faults are not sampled). */
static msr_released *released_of(msr_args *a, pid_t pid, int create) {
  if (!a->rel) return NULL;
  msr_released *free_slot = NULL;
  for (int k = 0; k < MSR_REL_PIDS; k++) {
    if (a->rel[k].pid == pid) return &a->rel[k];
    if (!a->rel[k].pid && !free_slot) free_slot = &a->rel[k];
  }
  if (!create) return NULL;
  if (!free_slot) { /* more processes than slots: the one with the fewest ranges makes room */
    free_slot = &a->rel[0];
    for (int k = 1; k < MSR_REL_PIDS; k++)
      if (a->rel[k].n < free_slot->n) free_slot = &a->rel[k];
  }
  memset(free_slot, 0, sizeof *free_slot);
  free_slot->pid = pid;
  return free_slot;
}

static void release(msr_args *a, pid_t pid, uint64_t time, uint64_t start, uint64_t len, int kind, int advice) {
  msr_released *p = len ? released_of(a, pid, 1) : NULL;
  if (!p) return;
  if (kind == MSR_REL_MUNMAP) /* the faults of the mappings it gives back: churn if the process maps again */
    for (int k = 0; k < p->n; k++) {
      msr_range *r = &p->r[k];
      if (r->kind == MSR_REL_MAPPED && r->start < start + len && start < r->end) {
        if (!r->faults && !r->samples && (start > r->start || start + len < r->end)) {
          /* a part of a mapping nothing touched yet: an allocator trimming its reservation to an alignment
           * (jemalloc, Go) keeps the rest, whose faults are first touches, and the range is what is left */
          if (start <= r->start) r->start = start + len;
          else if (start + len >= r->end) r->end = start;
          continue;
        }
        if (r->faults) { /* (a range given back before holds no faults; late CPU samples may join it) */
          uint64_t lo = r->start > start ? r->start : start, hi = r->end < start + len ? r->end : start + len;
          p->pending_bytes += hi - lo;
          if (hi - lo > p->pending_max) p->pending_max = hi - lo;
        }
        p->pending += r->faults;
        p->pending_samples += r->samples;
        r->faults = r->samples = 0;
        /* a part given back (an allocator trimming its reservation to an alignment) leaves the rest
         * mapped: its later faults count again, and go at the next munmap of it */
        r->gone_at = p->remaps;
        r->gone_time = time;
      }
    }
  msr_range *last = p->n ? &p->r[(p->next + MSR_REL_RANGES - 1) % MSR_REL_RANGES] : NULL;
  if (kind != MSR_REL_MAPPED && last && last->kind == kind && last->advice == advice && start <= last->end &&
      start + len >= last->start) {
    if (start < last->start) last->start = start; /* the same release again, or its neighbour */
    if (start + len > last->end) last->end = start + len;
    return;
  }
  p->r[p->next] = (msr_range){.start = start, .end = start + len, .kind = (uint8_t)kind, .advice = (uint8_t)advice};
  if (kind == MSR_REL_MAPPED) p->r[p->next].seq = ++a->range_seq;
  p->next = (p->next + 1) % MSR_REL_RANGES;
  if (p->n < MSR_REL_RANGES) p->n++;
}

/* A new mapping of `len` bytes, or a mapping grown by them (standing for `bytes` of them where calls are
 * sampled): where it is no larger than a mapping given back with faults still pending, it could have
 * been served from that memory, so up to its bytes of the pending faults churned (in the share of the
 * bytes given back it covers). A larger one is new memory: a table grown by doubling, whose old copy is
 * freed each time, is first touches, not churn (plain-table_grow read 82% mmap churn, and glibc keeping
 * its blocks changed its faults by 13 of 131,134). */
static void maps_again(msr_args *a, pid_t pid, uint64_t len, uint64_t bytes) {
  msr_released *p = released_of(a, pid, 0);
  if (!p || !len || len > p->pending_max) return;
  p->remaps++;
  double share = p->pending_bytes > bytes ? (double)bytes / (double)p->pending_bytes : 1.0;
  uint64_t faults = (uint64_t)((double)p->pending * share + 0.5);
  uint64_t samples = (uint64_t)((double)p->pending_samples * share + 0.5);
  a->mapped_churned += faults;
  a->mapped_churned_samples += samples;
  p->pending -= faults < p->pending ? faults : p->pending;
  p->pending_samples -= samples < p->pending_samples ? samples : p->pending_samples;
  p->pending_bytes = share < 1.0 ? p->pending_bytes - bytes : 0;
  if (!p->pending_bytes) p->pending = p->pending_samples = p->pending_max = 0;
}

/* mremap moved the mapping at [from, from + len) to the newest range of the process (just made): the
 * same memory, whose faults so far go with it. The ranges it held are emptied (its old place is
 * unmapped by the move, not given back: a later mapping there is another's), so that an unmap of
 * whatever the kernel puts there next never counts them as churn (a buffer grown by realloc one page
 * at a time is moved thousands of times and given back once). */
static void moved(msr_args *a, pid_t pid, uint64_t from, uint64_t len) {
  msr_released *p = released_of(a, pid, 0);
  if (!p || !p->n || !len) return;
  msr_range *to = &p->r[(p->next + MSR_REL_RANGES - 1) % MSR_REL_RANGES];
  for (int k = 2; k <= p->n; k++) {
    msr_range *r = &p->r[(p->next + MSR_REL_RANGES - k) % MSR_REL_RANGES];
    if (r->kind != MSR_REL_MAPPED || r->start >= from + len || from >= r->end) continue;
    to->faults += r->faults;
    to->samples += r->samples;
    r->faults = r->samples = 0;
    r->start = r->end = 0;
    r->moved_seq = to->seq;
    r->moved_at = (uint16_t)(to - p->r);
  }
}

/* A sampled fault: the newest range of its process that holds its address says what gave the
 * memory back before; none, and it is a first touch. error_code bit 0: the page was present (a
 * protection fault), bit 1: a write. */
int msr_args_join(msr_args *a, uint32_t tid, uint64_t time, uint64_t window_ns) {
  if (!a->recent) return -1;
  const msr_recent *r = &a->recent[tid % MSR_LAST_FAULTS];
  if (r->tid != tid) return -1;
  int best = -1;
  for (int k = 0; k < MSR_RECENT; k++) /* the latest fault at or before `time` */
    if (r->time[k] && r->time[k] <= time && time - r->time[k] <= window_ns && (best < 0 || r->time[k] > r->time[best]))
      best = k;
  if (best < 0) return -1;
  if (r->kind[best] == MSR_REL_MAPPED) {
    /* The sample may be read after munmap gave the mapping back (the traced records are read first):
     * a sample from before that munmap is decided as the fault's was, by whether the process maps again. */
    a->mapped_samples++;
    msr_released *p = &a->rel[r->slot[best]];
    msr_range *m = &p->r[r->at[best]];
    uint32_t seq = r->seq[best];
    /* a mapping mremap moved since: the sample goes where its faults went (moved) */
    for (int hops = 0; hops < MSR_REL_RANGES && m->seq == seq && m->moved_seq; hops++) {
      msr_range *to = &p->r[m->moved_at];
      if (to->seq != m->moved_seq || to->kind != MSR_REL_MAPPED) break;
      seq = to->seq;
      m = to;
    }
    if (m->seq == seq && m->kind == MSR_REL_MAPPED) {
      if (!m->gone_time || time > m->gone_time) m->samples++;
      else if (p->remaps > m->gone_at) a->mapped_churned_samples++;
      else p->pending_samples++;
    }
  }
  return r->kind[best];
}

static void on_fault(msr_args *a, pid_t pid, uint32_t tid, uint64_t time, uint64_t address, uint64_t error_code,
                     uint64_t w) {
  int kind = MSR_REL_NONE, advice = 0, at = -1;
  msr_released *p = released_of(a, pid, 0);
  for (int k = 1; p && k <= p->n; k++) {
    int i = (p->next + MSR_REL_RANGES - k) % MSR_REL_RANGES;
    msr_range *r = &p->r[i];
    if (address >= r->start && address < r->end) {
      kind = r->kind;
      advice = r->advice;
      if (kind == MSR_REL_MAPPED) {
        r->faults += w;
        at = i;
      }
      break;
    }
  }
  a->refault[kind] += w;
  if (a->recent) {
    msr_recent *r = &a->recent[tid % MSR_LAST_FAULTS];
    if (r->tid != tid) memset(r, 0, sizeof *r);
    r->tid = tid;
    r->time[r->next] = time;
    r->kind[r->next] = (uint8_t)kind;
    r->slot[r->next] = at >= 0 ? (uint8_t)(p - a->rel) : 0;
    r->at[r->next] = at >= 0 ? (uint16_t)at : 0;
    r->seq[r->next] = at >= 0 ? p->r[at].seq : 0;
    r->next = (r->next + 1) % MSR_RECENT;
  }
  if (kind == MSR_REL_MADVISE && advice < MSR_ADVICE) a->refault_advice[advice] += w;
  if (error_code & 1) a->fault_present[kind] += w;
  else if (error_code & 2) a->fault_write[kind] += w; /* a write of a missing page; the rest read one */
}

static void on_record(msr_args *a, int i, uint32_t pid, uint32_t tid, uint64_t time, const unsigned char *raw,
                      uint32_t size) {
  const int *off = a->ev[i].off;
  uint64_t w = a->every[i];                                                      /* the calls this record stands for */
  if (a->split[i] && u64_at(raw, size, off[size_at(i)]) >= MSR_BIG_RANGE) w = 1; /* recorded each time */
  a->calls[i] += w;
  switch (i) {
    case MSR_A_MUNMAP: {
      uint64_t len = u64_at(raw, size, off[0]);
      a->bytes[i] += w * len;
      a->hist[i][bucket(len)] += w;
      a->hist_bytes[i][bucket(len)] += w * len;
      release(a, (pid_t)pid, time, u64_at(raw, size, off[1]), len, MSR_REL_MUNMAP, 0);
      break;
    }
    case MSR_A_AREA: { /* a new mapping's place (the search's length: the mapping, and any alignment pad) */
      uint64_t start = u64_at(raw, size, off[0]), length = u64_at(raw, size, off[1]);
      msr_last_mmap *m = &a->last_mmap[tid % MSR_LAST_FAULTS];
      msr_last_mremap *mr = &a->last_mremap[tid % MSR_LAST_FAULTS];
      /* a search as long as the new length at least (an mmap's own is for its length, and the thread's
       * mmap records clear this): not a mapping made after an mremap that grew in place */
      int move = mr->tid == tid && mr->new_len && length >= mr->new_len && time - mr->time < MSR_MMAP_AREA_NS;
      if (move) { /* this thread's mremap moves a mapping here: the search is for its new length */
        *m = (msr_last_mmap){.tid = tid, .len = (mr->new_len + 4095) & ~4095ull, .time = time};
        mr->new_len = 0;
      }
      /* A search padded for a huge-page alignment (__thp_get_unmapped_area: the length asked for plus one
       * alignment): the mapping alone, where this thread's mmap just before says its length; the pad
       * would cover a neighbour's memory, whose trimming munmap would then read as this mapping's churn.
       * The mapping is at the first aligned address inside, or (top-down, the search already aligned)
       * one alignment up, next to the mapping above it (6.8 on). */
      if (m->tid == tid && m->len && length > m->len && time - m->time < MSR_MMAP_AREA_NS) {
        uint64_t pad = length - m->len, aligned = (start + pad - 1) & ~(pad - 1);
        if (!(pad & (pad - 1))) {
          start = aligned == start && (u64_at(raw, size, off[2]) & MSR_AREA_TOPDOWN) ? start + pad : aligned;
          length = m->len;
        }
      }
      m->len = 0;
      if (!move) maps_again(a, (pid_t)pid, length, length * w); /* before it is a range: its own faults are new */
      release(a, (pid_t)pid, time, start, length, MSR_REL_MAPPED, 0);
      if (move) moved(a, (pid_t)pid, mr->addr, mr->old_len);
      break;
    }
    case MSR_A_FAULT:
    case MSR_A_FAULTK:
      if (i == MSR_A_FAULTK &&
          (u64_at(raw, size, off[0]) >= MSR_USER_TOP || (size > 2 && (raw[2] & MSR_TRACE_IRQ_FLAGS)))) {
        a->fault_rejected += w; /* the kernel's own memory, or a fault in interrupt context */
        break;
      }
      on_fault(a, (pid_t)pid, tid, time, u64_at(raw, size, off[0]), u64_at(raw, size, off[1]), w);
      break;
    case MSR_A_MADVISE: {
      uint64_t len = u64_at(raw, size, off[0]);
      int advice = (int)(int64_t)u64_at(raw, size, off[1]);
      a->bytes[i] += w * len;
      a->hist[i][bucket(len)] += w;
      a->hist_bytes[i][bucket(len)] += w * len;
      if (releases(advice)) release(a, (pid_t)pid, time, u64_at(raw, size, off[2]), len, MSR_REL_MADVISE, advice);
      if (advice >= 0 && advice < MSR_ADVICE) {
        a->madvise_calls[advice] += w;
        a->madvise_bytes[advice] += w * len;
      }
      break;
    }
    case MSR_A_MMAP: {
      uint64_t len = u64_at(raw, size, off[0]), flags = u64_at(raw, size, off[1]);
      if (a->rel) { /* its length, for the place the kernel finds for it next (MSR_A_AREA) */
        msr_last_mmap *m = &a->last_mmap[tid % MSR_LAST_FAULTS];
        *m = (msr_last_mmap){.tid = tid, .len = (len + 4095) & ~4095ull, .time = time};
        msr_last_mremap *mr = &a->last_mremap[tid % MSR_LAST_FAULTS];
        if (mr->tid == tid) mr->new_len = 0; /* the next place is this mmap's, not a move's */
      }
      a->bytes[i] += w * len;
      a->hist[i][bucket(len)] += w;
      a->hist_bytes[i][bucket(len)] += w * len;
      if (flags & 0x20) {
        a->mmap_anon_calls += w;
        a->mmap_anon_bytes += w * len;
      } /* MAP_ANONYMOUS */
      if (flags & 0x8000) {
        a->mmap_populate_calls += w;
        a->mmap_populate_bytes += w * len;
      } /* MAP_POPULATE: the pages are faulted in inside the call */
      break;
    }
    case MSR_A_MREMAP: {
      uint64_t old_len = u64_at(raw, size, off[0]), new_len = u64_at(raw, size, off[1]);
      a->mremap_old_bytes += w * old_len;
      a->bytes[i] += w * new_len;
      a->hist[i][bucket(new_len)] += w;
      a->hist_bytes[i][bucket(new_len)] += w * new_len;
      if (new_len > old_len) {
        a->mremap_grow_calls += w;
        a->mremap_grow_bytes += w * (new_len - old_len);
      }
      /* the pages a growth adds are mapped again as a new mapping's are (a buffer freed and grown again
       * every round: the growth could have been served from what the last round gave back) */
      if (a->rel && new_len > old_len) maps_again(a, (pid_t)pid, new_len - old_len, w * (new_len - old_len));
      if (a->rel) /* where the mapping was: a place the kernel finds for it next is a move (MSR_A_AREA) */
        a->last_mremap[tid % MSR_LAST_FAULTS] = (msr_last_mremap){
            .tid = tid, .addr = u64_at(raw, size, off[2]), .old_len = old_len, .new_len = new_len, .time = time};
      break;
    }
    case MSR_A_BRK:
    case MSR_A_BRKQ: {
      /* The break after the call, per process: the difference from the last one is a move. */
      uint64_t now = u64_at(raw, size, off[0]);
      int slot = -1, free_slot = -1;
      for (int k = 0; k < MSR_BRK_PIDS; k++) {
        if (a->brk_pid[k] == (pid_t)pid) {
          slot = k;
          break;
        }
        if (!a->brk_pid[k] && free_slot < 0) free_slot = k;
      }
      if (slot < 0) {
        if (free_slot < 0) break;
        slot = free_slot;
        a->brk_pid[slot] = (pid_t)pid;
        a->brk_query[slot] = 1; /* its first break is a baseline */
      }
      if (i == MSR_A_BRKQ) { /* entry: brk(0) asks for the break and moves nothing */
        if (now == 0) {
          a->brk_query[slot] = 1;
          msr_released *p = released_of(a, (pid_t)pid, 0);
          if (p) p->n = p->next = 0; /* the loader's brk(0): a new program image, nothing released yet */
        }
        break;
      }
      uint64_t last = a->brk_last[slot];
      if (a->brk_query[slot]) {
        a->brk_query[slot] = 0;
        a->brk_last[slot] = now;
        break;
      }
      if (now > last) {
        a->brk_up_moves++;
        a->brk_up_bytes += now - last;
        a->hist[i][bucket(now - last)]++;
        a->hist_bytes[i][bucket(now - last)] += now - last;
      } else if (now < last) {
        a->brk_down_moves++;
        a->brk_down_bytes += last - now;
        release(a, (pid_t)pid, time, now, last - now, MSR_REL_BRK, 0);
      }
      a->brk_last[slot] = now;
      break;
    }
  }
}

/* One buffer's reading position: the record at `tail` (copied, as it may wrap) and its time. */
typedef struct {
  unsigned char *data;
  size_t size;
  uint64_t head, tail;
  struct perf_event_header h;
  uint64_t time;
  int ready;
} cursor;

static void peek(cursor *c) {
  c->ready = 0;
  if (c->tail + sizeof(struct perf_event_header) > c->head) return;
  for (size_t k = 0; k < sizeof c->h; k++) ((unsigned char *)&c->h)[k] = c->data[(c->tail + k) % c->size];
  if (c->h.size < sizeof c->h || c->tail + c->h.size > c->head) return;
  c->time = 0;
  if (c->h.type == PERF_RECORD_SAMPLE && c->h.size >= sizeof c->h + 16) /* { header, pid, tid, time, ... } */
    for (size_t k = 0; k < 8; k++) ((unsigned char *)&c->time)[k] = c->data[(c->tail + sizeof c->h + 8 + k) % c->size];
  c->ready = 1;
}

static void consume(msr_args *a, cursor *c) {
  unsigned char rec[4096];
  size_t n = c->h.size < sizeof rec ? c->h.size : sizeof rec;
  for (size_t k = 0; k < n; k++) rec[k] = c->data[(c->tail + k) % c->size]; /* a record may wrap */
  size_t hs = sizeof c->h;
  if (c->h.type == PERF_RECORD_SAMPLE && n >= hs + 20) {
    /* { header, u32 pid, u32 tid, u64 time, u32 raw size, raw[] }; raw starts with u16 common_type */
    uint32_t pid, tid, rsize;
    uint16_t type;
    memcpy(&pid, rec + hs, 4);
    memcpy(&tid, rec + hs + 4, 4);
    memcpy(&rsize, rec + hs + 16, 4);
    if (hs + 20 + rsize <= n && rsize >= 2) {
      memcpy(&type, rec + hs + 20, 2);
      for (int i = 0; i < MSR_A_N; i++)
        if (a->ev[i].opened && a->ev[i].id == type) {
          on_record(a, i, pid, tid, c->time, rec + hs + 20, rsize);
          break;
        }
    }
  } else if (c->h.type == PERF_RECORD_LOST && n >= hs + 16) {
    uint64_t lost;
    memcpy(&lost, rec + hs + 8, 8);
    a->lost += lost;
  }
  c->tail += c->h.size;
}

void msr_args_drain(msr_args *a) {
  cursor cur[MSR_MAX_CPUS];
  for (int k = 0; k < a->nbuf; k++) {
    struct perf_event_mmap_page *meta = a->buf[k].base;
    cur[k].data = (unsigned char *)a->buf[k].base + meta->data_offset;
    cur[k].size = meta->data_size;
    cur[k].head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    cur[k].tail = meta->data_tail;
    peek(&cur[k]);
  }
  /* Merge the per-CPU buffers: always the oldest record next (records without a time first). */
  for (;;) {
    int best = -1;
    for (int k = 0; k < a->nbuf; k++)
      if (cur[k].ready && (best < 0 || cur[k].time < cur[best].time)) best = k;
    if (best < 0) break;
    consume(a, &cur[best]);
    peek(&cur[best]);
  }
  for (int k = 0; k < a->nbuf; k++) {
    struct perf_event_mmap_page *meta = a->buf[k].base;
    __atomic_store_n(&meta->data_tail, cur[k].tail, __ATOMIC_RELEASE);
  }
}

void msr_args_close(msr_args *a) {
  long page = sysconf(_SC_PAGESIZE);
  for (int k = 0; k < a->nbuf; k++) munmap(a->buf[k].base, (size_t)page * (1 + DATA_PAGES));
  for (int k = 0; k < a->nfds; k++) close(a->fds[k]);
  free(a->fds);
  a->fds = NULL;
  a->nbuf = a->nfds = a->capfds = 0;
  free(a->rel);
  free(a->recent);
  free(a->fault_fds);
  a->fault_fds = NULL;
  a->nfault = a->capfault = 0;
  a->rel = NULL;
  a->recent = NULL;
}
static void hist_json(ms_json *j, const char *key, const uint64_t *h, const uint64_t *bytes) {
  /* [[bucket_low_bytes, count, bytes], ...] for the non-empty buckets */
  msj_arr_begin(j, key);
  for (int k = 0; k < MSR_HIST; k++) {
    if (!h[k]) continue;
    msj_arr_begin(j, NULL);
    msj_u64(j, NULL, 1ull << k);
    msj_u64(j, NULL, h[k]);
    msj_u64(j, NULL, bytes[k]);
    msj_arr_end(j);
  }
  msj_arr_end(j);
}

/* The share of the run's faults that were traced, where they were traced in a share of the ticks (else
 * 1): the faults the tracepoints counted while on (each hit counts, recorded or not), less those not
 * the program's, over the run's page faults; without those, the share of ticks traced. */
static double traced_share(const msr_args *a, double tree_faults) {
  if (!a->fault_share || !a->ticks) return 1;
  uint64_t hits = 0;
  for (int k = 0; k < a->nfault; k++) {
    uint64_t v = 0;
    if (read(a->fault_fds[k], &v, sizeof v) == (ssize_t)sizeof v) hits += v;
  }
  double traced = (double)hits - (double)a->fault_rejected;
  double share = tree_faults > 0 && traced > 0 ? traced / tree_faults : (double)a->ticks_on / (double)a->ticks;
  return share > 1 ? 1 : share > 0 ? share : 1;
}

static uint64_t scaled(uint64_t v, double share) { return (uint64_t)((double)v / share + 0.5); }

void msr_args_json(ms_json *j, const msr_args *a, double tree_faults) {
  msj_obj_begin(j, "syscall_args");
  for (int i = 0; i < MSR_A_N; i++) {
    if (i == MSR_A_BRKQ || i == MSR_A_FAULT || i == MSR_A_FAULTK || i == MSR_A_AREA ||
        (!a->ev[i].opened && !a->calls[i]))
      continue;
    msj_obj_begin(j, k_names[i]);
    msj_u64(j, "calls", a->calls[i]);
    if (a->every[i] > 1) msj_u64(j, "every", a->every[i]);
    switch (i) {
      case MSR_A_MUNMAP:
        msj_u64(j, "bytes", a->bytes[i]);
        hist_json(j, "sizes", a->hist[i], a->hist_bytes[i]);
        break;
      case MSR_A_MMAP:
        msj_u64(j, "bytes", a->bytes[i]);
        msj_u64(j, "anon_calls", a->mmap_anon_calls);
        msj_u64(j, "anon_bytes", a->mmap_anon_bytes);
        msj_u64(j, "populate_calls", a->mmap_populate_calls);
        msj_u64(j, "populate_bytes", a->mmap_populate_bytes);
        hist_json(j, "sizes", a->hist[i], a->hist_bytes[i]);
        break;
      case MSR_A_MADVISE:
        msj_u64(j, "bytes", a->bytes[i]);
        msj_obj_begin(j, "by_advice"); /* advice number (MADV_*) -> [calls, bytes] */
        for (int k = 0; k < MSR_ADVICE; k++) {
          if (!a->madvise_calls[k]) continue;
          char key[16];
          snprintf(key, sizeof key, "%d", k);
          msj_arr_begin(j, key);
          msj_u64(j, NULL, a->madvise_calls[k]);
          msj_u64(j, NULL, a->madvise_bytes[k]);
          msj_arr_end(j);
        }
        msj_obj_end(j);
        hist_json(j, "sizes", a->hist[i], a->hist_bytes[i]);
        break;
      case MSR_A_MREMAP:
        msj_u64(j, "old_bytes", a->mremap_old_bytes);
        msj_u64(j, "new_bytes", a->bytes[i]);
        msj_u64(j, "grow_calls", a->mremap_grow_calls);
        msj_u64(j, "grow_bytes", a->mremap_grow_bytes);
        hist_json(j, "new_sizes", a->hist[i], a->hist_bytes[i]);
        break;
      case MSR_A_BRK:
        msj_u64(j, "up_moves", a->brk_up_moves);
        msj_u64(j, "up_bytes", a->brk_up_bytes);
        msj_u64(j, "down_moves", a->brk_down_moves);
        msj_u64(j, "down_bytes", a->brk_down_bytes);
        break;
    }
    msj_obj_end(j);
  }
  if (a->ev[MSR_A_FAULT].opened) {
    /* {"every": P, "by_release": {"none"|"munmap"|"madvise"|"brk": [faults, on a present page, writes of a
     *  missing page]} (the rest read a missing page),
     *  "madvise_advice": {"4": faults}} */
    static const char *rel_names[MSR_REL_N] = {"none", "munmap", "madvise", "brk", "mapped"};
    double share = traced_share(a, tree_faults); /* the counts stand for all the run's faults */
    msj_obj_begin(j, "faults");
    msj_u64(j, "every", scaled(a->every[MSR_A_FAULT], share));
    if (a->fault_share) {
      msj_dbl(j, "traced_share", share); /* of the run's faults, those traced (each record: every/share) */
      msj_dbl(j, "ticks_share", a->ticks ? (double)a->ticks_on / (double)a->ticks : 1);
    }
    msj_u64(j, "mapped_churned", scaled(a->mapped_churned, share));
    msj_u64(j, "mapped_samples", a->mapped_samples);
    msj_u64(j, "mapped_churned_samples", a->mapped_churned_samples);
    msj_obj_begin(j, "by_release");
    for (int k = 0; k < MSR_REL_N; k++) {
      msj_arr_begin(j, rel_names[k]);
      msj_u64(j, NULL, scaled(a->refault[k], share));
      msj_u64(j, NULL, scaled(a->fault_present[k], share));
      msj_u64(j, NULL, scaled(a->fault_write[k], share));
      msj_arr_end(j);
    }
    msj_obj_end(j);
    msj_obj_begin(j, "madvise_advice");
    for (int k = 0; k < MSR_ADVICE; k++) {
      if (!a->refault_advice[k]) continue;
      char key[16];
      snprintf(key, sizeof key, "%d", k);
      msj_u64(j, key, scaled(a->refault_advice[k], share));
    }
    msj_obj_end(j);
    msj_obj_end(j);
  }
  msj_u64(j, "lost_records", a->lost);
  msj_obj_begin(j, "unsupported");
  for (int i = 0; i < MSR_A_N; i++)
    if (!a->ev[i].opened &&
        !((i == MSR_A_FAULT || i == MSR_A_FAULTK || i == MSR_A_AREA) && !strcmp(a->ev[i].why, "not asked for")))
      msj_str(j, k_names[i], a->ev[i].why[0] ? a->ev[i].why : "did not open");
  msj_obj_end(j);
  msj_obj_end(j);
}
