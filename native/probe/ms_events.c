#define _GNU_SOURCE
#include "ms_events.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HWC(cache, op, res) \
  ((PERF_COUNT_HW_CACHE_##cache) | (PERF_COUNT_HW_CACHE_OP_##op << 8) | (PERF_COUNT_HW_CACHE_RESULT_##res << 16))

/* Groups: 0 software; 1..5 hardware, kept small so that each group fits the PMU's counters
 * (a group larger than the PMU never schedules); 6 syscall tracepoints. */
static const ms_event_def k_events[] = {
    {"task-clock-ns", MS_KIND_SOFTWARE, 0, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults-minor", MS_KIND_SOFTWARE, 0, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"page-faults-major", MS_KIND_SOFTWARE, 0, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"context-switches", MS_KIND_SOFTWARE, 0, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", MS_KIND_SOFTWARE, 0, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"cycles", MS_KIND_HARDWARE, 1, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", MS_KIND_HARDWARE, 1, PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", MS_KIND_HARDWARE, 2, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", MS_KIND_HARDWARE, 2, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-misses", MS_KIND_HARDWARE, 3, PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"L1-dcache-load-misses", MS_KIND_HARDWARE, 4, PERF_TYPE_HW_CACHE, HWC(L1D, READ, MISS)},
    {"dTLB-load-misses", MS_KIND_HARDWARE, 5, PERF_TYPE_HW_CACHE, HWC(DTLB, READ, MISS)},
    {"mmap", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
    {"munmap", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
    {"madvise", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
    {"brk", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
    {"mprotect", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
    {"mremap", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
    {"futex", MS_KIND_SYSCALL, 6, PERF_TYPE_TRACEPOINT, 0},
};
#define N_EVENTS ((int)(sizeof k_events / sizeof k_events[0]))

/* Where the events count: one task (and, inherited, its new ones), or a cgroup on one CPU. */
typedef struct {
  pid_t pid; /* the task, or the cgroup's directory fd */
  int cpu;   /* -1 with a task */
  unsigned long flags;
} target;

static long perf_open(struct perf_event_attr *a, const target *t, int group_fd) {
  return syscall(SYS_perf_event_open, a, t->pid, t->cpu, group_fd, t->flags);
}

static int dir_has_events(const char *dir) {
  char p[256];
  struct stat st;
  snprintf(p, sizeof p, "%s/syscalls", dir);
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *ms_tracefs_events_dir(void) {
  static const char *found;
  static int tried;
  if (tried) return found;
  tried = 1;
  if (dir_has_events("/sys/kernel/tracing/events")) return found = "/sys/kernel/tracing/events";
  if (dir_has_events("/sys/kernel/debug/tracing/events")) return found = "/sys/kernel/debug/tracing/events";
  /* tracefs is often not mounted until something asks for it (perf mounts it on demand). */
  if (geteuid() == 0 && mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0 &&
      dir_has_events("/sys/kernel/tracing/events"))
    return found = "/sys/kernel/tracing/events";
  return NULL;
}

/* Tracepoint id of syscalls:sys_enter_<name>, or -errno. */
long ms_tracepoint_id(const char *name, char *why, int whylen) {
  const char *dir = ms_tracefs_events_dir();
  if (!dir) {
    snprintf(why, whylen, "tracefs not reachable");
    return -ENOENT;
  }
  char p[256];
  snprintf(p, sizeof p, "%s/syscalls/sys_enter_%s/id", dir, name);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    snprintf(why, whylen, e == ENOENT ? "no such tracepoint" : "tracepoint id unreadable");
    return -e;
  }
  char buf[32] = {0};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) {
    snprintf(why, whylen, "tracepoint id unreadable");
    return -EIO;
  }
  long id = 0;
  sscanf(buf, "%ld", &id);
  return id;
}

static void fill_attr(struct perf_event_attr *a, const ms_event_def *d, uint64_t config, int flags, int is_leader,
                      int grouped) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = d->type;
  a->config = config;
  a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  if (grouped) a->read_format |= PERF_FORMAT_GROUP;
  /* Members follow their leader: only the leader carries disabled / enable_on_exec. */
  a->disabled = is_leader ? 1 : 0;
  a->enable_on_exec = (is_leader && (flags & MS_OPEN_ENABLE_ON_EXEC)) ? 1 : 0;
  a->inherit = (flags & MS_OPEN_INHERIT) ? 1 : 0;
  /* User and kernel both: a page fault's or a syscall's cost is in the kernel. Excluding the
   * hypervisor keeps the open working where paranoid forbids it. */
  a->exclude_hv = 1;
}

static int open_all(ms_counters *c, const target *t, int flags, int grouped) {
  int opened = 0;
  int leader_of_group[16];
  int slots_of_group[16];
  for (int g = 0; g < 16; g++) {
    leader_of_group[g] = -1;
    slots_of_group[g] = 0;
  }
  c->n = 0;
  c->grouped = grouped;
  for (int i = 0; i < N_EVENTS && i < MS_MAX_EVENTS; i++) {
    const ms_event_def *d = &k_events[i];
    if ((flags & MS_OPEN_NO_FAULTS) && d->type == PERF_TYPE_SOFTWARE &&
        (d->config == PERF_COUNT_SW_PAGE_FAULTS_MIN || d->config == PERF_COUNT_SW_PAGE_FAULTS_MAJ))
      continue;
    ms_event *e = &c->ev[c->n++];
    memset(e, 0, sizeof *e);
    e->def = d;
    e->fd = -1;
    e->leader = -1;
    if (d->kind == MS_KIND_HARDWARE && (flags & MS_OPEN_NO_HARDWARE)) {
      e->err = EPERM;
      snprintf(e->why, sizeof e->why, "disabled by option");
      continue;
    }
    if (d->kind == MS_KIND_SYSCALL && (flags & MS_OPEN_NO_SYSCALLS)) {
      e->err = ECANCELED;
      snprintf(e->why, sizeof e->why, "not counted in a timed run");
      continue;
    }
    uint64_t config = d->config;
    if (d->kind == MS_KIND_SYSCALL) {
      long id = ms_tracepoint_id(d->name, e->why, sizeof e->why);
      if (id < 0) {
        e->err = (int)-id;
        continue;
      }
      config = (uint64_t)id;
    }
    int g = d->group;
    int lead = grouped ? leader_of_group[g] : -1;
    struct perf_event_attr a;
    fill_attr(&a, d, config, flags, lead < 0, grouped);
    long fd = perf_open(&a, t, lead < 0 ? -1 : c->ev[lead].fd);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && d->kind != MS_KIND_SYSCALL) {
      /* perf_event_paranoid 2 lets a user count its own processes in user space only: page
       * faults taken by user code still count (a fault's registers are the user's), faults
       * inside system calls and kernel time do not. Better than nothing, and said so. */
      a.exclude_kernel = 1;
      fd = perf_open(&a, t, lead < 0 ? -1 : c->ev[lead].fd);
      if (fd >= 0) e->user_only = 1;
    }
    if (fd < 0) {
      e->err = errno;
      /* The kernel may refuse group reads on inherited counters; the caller retries ungrouped. */
      if (grouped && lead < 0 && errno == EINVAL && (flags & MS_OPEN_INHERIT)) return -1;
      continue;
    }
    e->fd = (int)fd;
    if (lead < 0) {
      e->leader = c->n - 1;
      e->slot = 0;
      if (grouped) {
        leader_of_group[g] = c->n - 1;
        slots_of_group[g] = 1;
      }
    } else {
      e->leader = lead;
      e->slot = slots_of_group[g]++;
    }
    opened++;
  }
  return opened;
}

static int open_target(ms_counters *c, const target *t, int flags) {
  int n = open_all(c, t, flags, 1);
  if (n >= 0) return n;
  ms_counters_close(c);
  return open_all(c, t, flags, 0);
}

int ms_counters_open(ms_counters *c, pid_t pid, int flags) {
  target t = {pid, -1, PERF_FLAG_FD_CLOEXEC};
  return open_target(c, &t, flags);
}

int ms_counters_open_cgroup(ms_counters *c, int cgroup_fd, int cpu, int flags) {
  target t = {cgroup_fd, cpu, PERF_FLAG_FD_CLOEXEC | PERF_FLAG_PID_CGROUP};
  return open_target(c, &t, flags & ~(MS_OPEN_INHERIT | MS_OPEN_ENABLE_ON_EXEC));
}

void ms_counters_enable(ms_counters *c) {
  for (int i = 0; i < c->n; i++)
    if (c->ev[i].fd >= 0 && c->ev[i].leader == i) ioctl(c->ev[i].fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
}

void ms_counters_close(ms_counters *c) {
  for (int i = 0; i < c->n; i++)
    if (c->ev[i].fd >= 0) {
      close(c->ev[i].fd);
      c->ev[i].fd = -1;
    }
}

int ms_counters_read(const ms_counters *c, ms_snapshot *s) {
  int rc = 0;
  memset(s, 0, sizeof *s);
  for (int i = 0; i < c->n; i++) {
    const ms_event *e = &c->ev[i];
    if (e->fd < 0 || e->leader != i) continue;
    uint64_t buf[3 + MS_MAX_EVENTS];
    ssize_t n = read(e->fd, buf, sizeof buf);
    if (n < (ssize_t)(3 * sizeof(uint64_t))) {
      rc = -1;
      continue;
    }
    if (c->grouped) {
      /* { nr, time_enabled, time_running, value[nr] } */
      uint64_t nr = buf[0];
      for (int j = 0; j < c->n; j++) {
        if (c->ev[j].fd < 0 || c->ev[j].leader != i || (uint64_t)c->ev[j].slot >= nr) continue;
        s->r[j].value = buf[3 + c->ev[j].slot];
        s->r[j].enabled_ns = buf[1];
        s->r[j].running_ns = buf[2];
      }
    } else {
      /* { value, time_enabled, time_running } */
      s->r[i].value = buf[0];
      s->r[i].enabled_ns = buf[1];
      s->r[i].running_ns = buf[2];
    }
  }
  return rc;
}

const char *ms_event_reason(const ms_event *e, char *buf, int len) {
  const char *hint = e->why[0] ? e->why : "";
  if (!hint[0]) {
    if (e->def->kind == MS_KIND_HARDWARE && (e->err == ENOENT || e->err == EOPNOTSUPP || e->err == ENODEV))
      hint = "no PMU for this event (VM or container)";
    else if (e->err == EACCES || e->err == EPERM)
      hint = "not permitted: see /proc/sys/kernel/perf_event_paranoid or run as root";
    else if (e->err == ENOSYS) hint = "kernel has no perf_event_open";
  }
  if (e->err == ECANCELED) snprintf(buf, len, "%s", hint); /* left closed on purpose: the why alone */
  else snprintf(buf, len, "%s%s%s", strerror(e->err), hint[0] ? ": " : "", hint);
  return buf;
}
