/* Reading perf ring buffers, shared by the samplers that keep one buffer per CPU (msr_cpu.c,
 * msr_sites.c): every record the buffers hold, copied whole (a record may wrap), each with the
 * time it is ordered by, so that the records of all CPUs are read in time order. */
#ifndef MSR_RING_H
#define MSR_RING_H
#include <stddef.h>
#include <stdint.h>
#include <linux/perf_event.h>
#include <sys/types.h>

/* What a per-CPU sampler opens its events on: the command ms-run starts (one pid, events enabled at
 * its exec), or the threads of running processes (attach: every thread, enabled at once). Either
 * way the events are inherited: threads and processes created later are followed. Where the
 * command has a cgroup of its own (`cgroup_fd`, msr_cgroup.c), one event per CPU on the cgroup
 * instead, live at once (the command waits to exec until ms-run is ready): nothing is copied into
 * each new task. */
typedef struct {
  const pid_t *pid;
  int n;
  int attach;
  int cgroup_fd; /* -1: none */
} msr_targets;

/* How many opens a sampler makes per CPU: one per target, or one for the cgroup. */
int msr_target_n(const msr_targets *t);
/* A polled sampler's event follows its targets: from the command's exec (a running process: at
 * once), into the tasks they create, with no wake-ups (ms-run polls its buffers). */
void msr_follow(struct perf_event_attr *a, int attach);
/* perf_event_open of `a` for target `p` on `cpu`, or for the cgroup (its attributes adjusted). */
long msr_open_for(const msr_targets *t, int p, struct perf_event_attr *a, int cpu);

/* Appends `fd` to a list that grows; on failure closes it and returns -1. */
int msr_fd_push(int **fds, int *n, int *cap, int fd);
/* The same for an fd another list owns (and closes): on failure -1, the fd left open. */
int msr_fd_note(int **fds, int *n, int *cap, int fd);
/* Switches the events on or off (an inherited event's copies in the tasks follow it). */
void msr_fds_enable(const int *fds, int n, int on);

typedef struct {
  uint64_t time;
  size_t off; /* in the arena */
  uint32_t len;
} msr_rec;

/* The time a record is ordered by (UINT64_MAX: after every timed record). */
typedef uint64_t (*msr_rec_time)(const unsigned char *rec, size_t len);

/* Copies the records of the `n` buffers at `base` into `*arena` (malloc'd; free it) and lists them in
 * `*recs` (malloc'd) sorted by `time_of`, ties in the order read; PERF_RECORD_LOST records are not
 * listed but added to `*lost`. Advances each buffer's tail. Returns how many records are listed. */
size_t msr_ring_read(void *const *base, int n, msr_rec_time time_of, uint64_t *lost, unsigned char **arena,
                     msr_rec **recs);
#endif
