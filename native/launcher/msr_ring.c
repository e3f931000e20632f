#include "msr_ring.h"
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int msr_target_n(const msr_targets *t) { return t->cgroup_fd >= 0 ? 1 : t->n; }

void msr_follow(struct perf_event_attr *a, int attach) {
  a->disabled = !attach;
  a->enable_on_exec = !attach;
  a->inherit = 1;
  a->wakeup_events = 1 << 30;
}

long msr_open_for(const msr_targets *t, int p, struct perf_event_attr *a, int cpu) {
  if (t->cgroup_fd < 0) return syscall(SYS_perf_event_open, a, t->pid[p], cpu, -1, PERF_FLAG_FD_CLOEXEC);
  a->inherit = 0;
  a->enable_on_exec = 0;
  a->disabled = 0;
  return syscall(SYS_perf_event_open, a, t->cgroup_fd, cpu, -1, PERF_FLAG_FD_CLOEXEC | PERF_FLAG_PID_CGROUP);
}

int msr_fd_note(int **fds, int *n, int *cap, int fd) {
  if (*n == *cap) {
    int c = *cap ? 2 * *cap : 64;
    int *t = realloc(*fds, (size_t)c * sizeof *t);
    if (!t) return -1;
    *fds = t;
    *cap = c;
  }
  (*fds)[(*n)++] = fd;
  return 0;
}

int msr_fd_push(int **fds, int *n, int *cap, int fd) {
  if (msr_fd_note(fds, n, cap, fd) == 0) return 0;
  close(fd);
  return -1;
}

void msr_fds_enable(const int *fds, int n, int on) {
  for (int k = 0; k < n; k++) ioctl(fds[k], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

static int by_time(const void *a, const void *b) {
  const msr_rec *x = a, *y = b;
  if (x->time != y->time) return x->time < y->time ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

size_t msr_ring_read(void *const *base, int n, msr_rec_time time_of, uint64_t *lost, unsigned char **arena,
                     msr_rec **recs) {
  size_t hs = sizeof(struct perf_event_header), total = 0, used = 0, nrec = 0;
  *arena = NULL;
  *recs = NULL;
  for (int k = 0; k < n; k++) {
    struct perf_event_mmap_page *meta = base[k];
    total += __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) - meta->data_tail;
  }
  if (!total) return 0;
  unsigned char *a = malloc(total);
  msr_rec *r = malloc((total / hs + 1) * sizeof *r);
  if (!a || !r) { /* the records stay in the buffers for the next read */
    free(a);
    free(r);
    return 0;
  }
  for (int k = 0; k < n; k++) {
    struct perf_event_mmap_page *meta = base[k];
    unsigned char *data = (unsigned char *)base[k] + meta->data_offset;
    size_t size = meta->data_size;
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE), tail = meta->data_tail;
    while (tail + hs <= head) {
      struct perf_event_header h;
      for (size_t b = 0; b < hs; b++) ((unsigned char *)&h)[b] = data[(tail + b) % size];
      if (h.size < hs || tail + h.size > head || used + h.size > total) break;
      unsigned char *rec = a + used;
      for (size_t b = 0; b < h.size; b++) rec[b] = data[(tail + b) % size]; /* a record may wrap */
      if (h.type == PERF_RECORD_LOST && h.size >= hs + 16) {
        uint64_t l;
        memcpy(&l, rec + hs + 8, 8);
        *lost += l;
      } else {
        r[nrec++] = (msr_rec){time_of(rec, h.size), used, h.size};
      }
      used += h.size;
      tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
  if (nrec) qsort(r, nrec, sizeof *r, by_time);
  *arena = a;
  *recs = r;
  return nrec;
}
