/* The counter engine shared by the in-process probe and the ms-run launcher.
 *
 * Events are opened in small groups (PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING)
 * so that events whose ratio matters (cycles and instructions) are scheduled together. An event
 * that cannot be opened is recorded once with its errno; the rest are measured. Nothing here
 * allocates: the probe runs inside allocator benchmarks and must not disturb the heap. */
#ifndef MS_EVENTS_H
#define MS_EVENTS_H
#include <stdint.h>
#include <sys/types.h>
#include "ms_math.h"

enum { MS_KIND_SOFTWARE = 0, MS_KIND_HARDWARE = 1, MS_KIND_SYSCALL = 2 };

#define MS_MAX_EVENTS 24

typedef struct {
  const char *name; /* output name: "page-faults-minor", "cycles", or the syscall name */
  int kind;         /* MS_KIND_* */
  int group;        /* events with the same group number are opened as one perf group */
  uint32_t type;    /* perf type; for syscalls resolved at open time */
  uint64_t config;
} ms_event_def;

typedef struct {
  const ms_event_def *def;
  int fd;        /* -1 when not open */
  int leader;    /* index of the event whose fd is read for this one's group */
  int slot;      /* position inside the group read */
  int err;       /* errno of the failed open, 0 when open */
  int user_only; /* opened with exclude_kernel: the kernel refused kernel-side counting */
  char why[64];  /* short reason beyond errno ("no tracefs", "tracepoint missing") */
} ms_event;

typedef struct {
  int n;
  ms_event ev[MS_MAX_EVENTS];
  int grouped; /* 0 when the kernel refused group reads and events are read singly */
} ms_counters;

typedef struct {
  ms_reading r[MS_MAX_EVENTS];
} ms_snapshot;

/* MS_OPEN_NO_FAULTS: the page-fault events are left out of the set (not even listed as unopened):
 * the caller counts faults from the kernel's per-task counts (rusage, /proc), which cost nothing,
 * where a perf event on a fault type costs every fault on the machine its lookup (~45 ns). */
enum {
  MS_OPEN_INHERIT = 1,
  MS_OPEN_ENABLE_ON_EXEC = 2,
  MS_OPEN_NO_HARDWARE = 4,
  MS_OPEN_NO_SYSCALLS = 8,
  MS_OPEN_NO_FAULTS = 16
};

/* Opens every event for `pid` (0 = the calling process). Returns the number that opened. */
int ms_counters_open(ms_counters *c, pid_t pid, int flags);
/* Opens every event for the tasks of a cgroup (its directory's fd) while they run on one CPU: no
 * copy per task (inheritance), one set per CPU, summed by the caller. Returns the number that opened. */
int ms_counters_open_cgroup(ms_counters *c, int cgroup_fd, int cpu, int flags);
void ms_counters_enable(ms_counters *c);
void ms_counters_close(ms_counters *c);
/* Reads every open event; unopened ones read as zeros. Returns 0, or -1 if a read failed. */
int ms_counters_read(const ms_counters *c, ms_snapshot *s);

/* The tracefs events directory, mounting tracefs when it is absent and we are root, or NULL. */
const char *ms_tracefs_events_dir(void);
/* The tracepoint id of syscalls:sys_enter_<name>, or -errno with a short reason in `why`. */
long ms_tracepoint_id(const char *name, char *why, int whylen);
/* Human reason for an unopened event: strerror plus an explanation of the common cases. */
const char *ms_event_reason(const ms_event *e, char *buf, int len);
#endif
