/* ms-run's parts: options (msr_options.c), the process tree (msr_tree.c), the preload check
 * (msr_check.c) and the measured run (ms_run.c: spawn, supervise, classify, write). */
#ifndef MSR_H
#define MSR_H
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include "msr_args.h"
#include "msr_cgroup.h"
#include "msr_cpu.h"
#include "msr_sites.h"

#define MSR_MAX_ENV 256

typedef enum { MSR_RUN, MSR_ATTACH, MSR_EVENTS, MSR_HOLD_EVENTS, MSR_PRELOAD_CHECK, MSR_HELP } msr_mode;
#define MSR_MAX_ATTACH 64

typedef struct {
  msr_mode mode;
  const char *out, *preload, *expect_malloc, *checker, *stdout_path, *stderr_path, *stdin_path;
  double timeout_s;         /* 0: no limit */
  uint64_t mem_limit_bytes; /* 0: no cap */
  int oom_exit_code;        /* -1: none */
  uint64_t tail_bytes;
  uint64_t sample_ms;
  uint64_t max_points; /* the RSS timeline is thinned to at most this many points */
  int no_counters;
  int no_syscalls;      /* --no-syscalls: count no system call by name (a timed run: each count costs the call) */
  int inherited_events; /* --inherited-events: no cgroup of the command's own (msr_cgroup.c) */
  int note_cwds;    /* --note-cwds: the working directories the tree's processes ran in (what they may leave there) */
  int syscall_args; /* record munmap/madvise/mmap/mremap/brk arguments (msr_args.c) */
  uint64_t args_every[MSR_A_N]; /* --syscall-args-every NAME=P, by msr_args index (0: every call) */
  double fault_share;           /* --fault-share: the faults traced in this share of the ticks (0: all) */
  uint64_t cpu_sample_us;       /* --cpu-sample-us: sample CPU time by kernel path (msr_cpu.c); 0: off */
  const char *cpu_stacks_dir;   /* --cpu-stacks-dir: the CPU samples' user call chains (msr_sites.c) */
  const char *outside_sites;    /* --outside-sites EVENT=PERIOD,...: call sites sampled by the kernel (msr_sites.c) */
  const char *outside_dir;      /* --outside-dir: where their documents go */
  const char *outside_skip;     /* --outside-skip: the in-program sampler; its processes are left to it */
  uint64_t outside_freq;        /* --outside-freq: sample each event about this often a second per CPU */
  pid_t attach[MSR_MAX_ATTACH]; /* --attach PID[,PID...]: measure running processes (MSR_ATTACH) */
  int nattach;
  double duration_s; /* --duration: the attached window; 0: until SIGINT/SIGTERM */
  const char *env[MSR_MAX_ENV];
  int nenv;
  char **argv; /* the command */
} msr_options;

/* Parses argv; prints one line and returns 2 on bad input, else 0. */
int msr_parse_options(int argc, char **argv, msr_options *o);
void msr_usage(FILE *f);

/* ---- the process tree (msr_tree.c) ----
 * ms-run is a child subreaper (PR_SET_CHILD_SUBREAPER), so everything the command starts,
 * including daemons that double-fork or setsid, stays below it and is found here. */
#define MSR_MAX_PROCS 4096
typedef struct {
  int n;
  pid_t pid[MSR_MAX_PROCS];
  /* Each process's page faults (minor, major) with those of the children it has waited for, as
   * its stat file had them when the tree was found: the kernel's own per-task counts (rusage's),
   * which cost the program nothing, unlike a perf event on every fault. */
  uint64_t minflt[MSR_MAX_PROCS], majflt[MSR_MAX_PROCS];
  /* The task whose files the tick reads: the process itself, or a live thread of it where its main
   * thread has exited (msr_live_task), found with the tree so that no stat file is read twice. */
  pid_t task[MSR_MAX_PROCS];
  /* statm's data size (pages), as msr_tree_rss_kb read it; 0: unread. */
  uint64_t data[MSR_MAX_PROCS];
} msr_procs;

/* The live descendants of this process (zombies excluded), from /proc. What is known of the
 * machine's other processes is kept from one call to the next (msr_tree_of). */
void msr_descendants(msr_procs *out);
/* Notes every process now on the machine as outside this one's tree, before the command starts (it
 * has no child yet): no stat file read (30 ms for 3,000 processes here), and its ticks then read
 * only what is new. */
void msr_tree_prepare(void);
/* The live processes of a cgroup and of the cgroups below it (the command's own: msr_cgroup.c), read
 * from cgroup.procs: what msr_descendants finds without reading every process's stat. */
void msr_tree_in_cgroup(const char *dir, msr_procs *out);
/* The live descendants of `roots`, and the roots themselves when `with_roots` (attach). A call
 * reads the stat files of the tree's processes and of those new since the last listing of /proc,
 * made again when a task was created since and at least every 100 ms (msr_tree.c). */
void msr_tree_of(const pid_t *roots, int nroots, int with_roots, msr_procs *out);
/* A process's own figures from its stat file (read through the file the tree keeps open): faults
 * (its own, not its waited-for children's), CPU time in clock ticks, threads, and its start time
 * (clock ticks since boot: with the pid, which process it is). */
typedef struct {
  uint64_t minflt, majflt, utime, stime, born;
  int threads;
} msr_stat;
int msr_proc_stat(pid_t pid, msr_stat *s);
/* The page faults of those processes and of the children they have waited for, summed. */
void msr_tree_faults(const msr_procs *p, uint64_t *minflt, uint64_t *majflt);
/* Resident memory of those processes, summed (KiB): all of it, and the anonymous part; each one's
 * data size is noted in `p->data`. */
void msr_tree_rss_kb(msr_procs *p, uint64_t *rss_kb, uint64_t *anon_kb);
/* The heap (the [heap] mapping: from the start of the break to the break) of those processes,
 * summed (KiB); a process's maps are read again only when its data size moved (after
 * msr_tree_rss_kb). */
uint64_t msr_tree_heap_kb(const msr_procs *p);
/* The command name (comm) of a process, or "?". */
void msr_comm(pid_t pid, char *out, size_t cap);
/* The task a process's memory files are read through: the process, or a live thread of it where
 * its main thread has exited (pthread_exit: the main thread's own files are then empty); 0: none
 * lives. msr_proc_file: "/proc/PID/NAME", or that thread's "/proc/PID/task/TID/NAME". */
pid_t msr_live_task(pid_t pid);
void msr_proc_file(pid_t pid, const char *name, char *path, size_t cap);
/* Tasks (processes and threads) the whole machine has created since boot: /proc/stat's `processes`,
 * or -1. The difference over a run bounds what its tree created, other users' included. */
int64_t msr_machine_tasks(void);
/* What wait4 told about the command (`main`) and about every other process of its tree. */
typedef struct {
  pid_t main;
  int main_done, main_status;
  struct rusage main_ru;   /* includes the children the command itself waited for */
  struct rusage others_ru; /* processes reaped by ms-run: orphans that were reparented to it */
} msr_reaper;

/* Reaps every exited child without blocking. Returns 1 once the command has been reaped. */
int msr_reap(msr_reaper *r);
/* SIGKILLs the process group and every descendant until none is left, reaping them all. */
void msr_kill_tree(pid_t pgid, msr_reaper *r);

/* ---- the preload check (msr_check.c) ---- */
int msr_preload_check(const msr_options *o);
/* The libmscheck.so beside this executable (or --checker). */
void msr_checker_path(const msr_options *o, char *out, size_t cap);

/* ---- shared helpers ---- */
uint64_t msr_now_ns(void);
/* Puts KEY=VALUE entries into the environment (after fork, before exec). */
void msr_apply_env(const msr_options *o);
#endif
