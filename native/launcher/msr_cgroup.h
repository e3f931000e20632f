/* The command's own cgroup (msr_cgroup.c): where it can be made, the measured run's counters are
 * per-CPU events of that cgroup rather than events copied into every task of the tree. */
#ifndef MSR_CGROUP_H
#define MSR_CGROUP_H
#include <stddef.h>
#include <sys/types.h>

typedef struct {
  int fd;          /* the cgroup's directory, for perf_event_open(PERF_FLAG_PID_CGROUP); -1: none */
  char path[8320]; /* "" once removed */
} msr_cgroup;

/* Creates DIR/memsleuth-run-PID beside this process's own cgroup v2 (removing those a killed ms-run
 * left). Returns 0, or -1 with the reason in `why`. */
int msr_cgroup_make(msr_cgroup *cg, char *why, size_t cap);
/* Moves a process into it. Returns 0, or -1 with the reason in `why`. */
int msr_cgroup_enter(const msr_cgroup *cg, pid_t pid, char *why, size_t cap);
/* Closes and removes it (after its processes were reaped). */
void msr_cgroup_remove(msr_cgroup *cg);
#endif
