/* Call sites from outside the program, for the processes the in-program sampler (libmssites) does
 * not reach: a static executable, a setuid one, a program started with `env -i`. Each event of the
 * sites spec ("page-faults=40,madvise=1") is sampled by the kernel every `period` hits on every
 * thread of the tree (inherited, opened per CPU as msr_cpu.c does), each sample with the thread's
 * user call chain, which the kernel walks by frame pointers (Go keeps them; C built without them
 * gives its innermost frame only). The kernel's side-band records (exec, fork, executable mappings)
 * give each process's mappings and say whether it mapped libmssites: a process that did has its
 * own document, better unwound, and is left out here.
 *
 * At the end, one document per other process that was sampled, in libmssites' format (a line of
 * `sites.jsonl`: events, stacks [event, count, [addresses]], maps), so that where.read_sampled
 * reads both the same way. Nothing runs in the measured process but the kernel's own sampling.
 *
 * The same sampler gives the user call chains of the CPU time (ms-run --cpu-stacks-dir): the event
 * "cpu-clock=NS" samples every NS of CPU time, every process of the tree whatever it mapped, each
 * sample split by the mode it was taken in: "cpu-clock" in user mode, "cpu-clock:kernel" in the
 * kernel (its user chain is where the program entered it). Its documents are the lines of `cpu.jsonl`. */
#ifndef MSR_SITES_H
#define MSR_SITES_H
#include <stdint.h>
#include <sys/types.h>
#include "ms_json.h"
#include "msr_args.h"
#include "msr_ring.h"
#include "msr_when.h"

#define MSR_SITES_EVENTS 8     /* page-faults and the memory system calls */
#define MSR_SITES_FRAMES 48    /* as libmssites keeps */
#define MSR_SITES_STACKS 16384 /* distinct (process, event, chain) kept; the rest are counted as cut */
#define MSR_SITES_PROCS 1024   /* processes followed */

typedef struct {
  uint64_t start, end, pgoff;
  int path; /* index into the interned paths */
} msr_site_map;

typedef struct {
  pid_t pid;
  char comm[17];
  uint8_t skip; /* its image mapped libmssites: the in-program sampler has it */
  uint8_t gone; /* it exited (PERF_RECORD_EXIT of its main thread) */
  int nmaps, capmaps;
  msr_site_map *maps; /* newest last */
  uint64_t samples;
} msr_site_proc;

typedef struct {
  uint64_t n, hash;
  int32_t proc;
  uint8_t ev;
  uint16_t depth;
  uint32_t when[MSR_WHEN]; /* its samples by bucket of time (msr_when.h; written for cpu-clock only) */
  uint64_t ret;            /* the word at the user stack pointer where it is a return address, else 0 */
  uint64_t ip[MSR_SITES_FRAMES];
} msr_site_stack;

typedef struct {
  int enabled;
  char why[192];
  const char *dir; /* where the documents go */
  char *skip;      /* libmssites, resolved */
  int nev;
  char name[MSR_SITES_EVENTS][32];
  uint64_t period[MSR_SITES_EVENTS];
  int opened[MSR_SITES_EVENTS];
  int kernel_of[MSR_SITES_EVENTS]; /* cpu-clock: the index its kernel-mode samples go to (0: none) */
  char ev_why[MSR_SITES_EVENTS][96];
  int n; /* CPUs with a ring buffer */
  int fds[MSR_MAX_CPUS];
  void *base[MSR_MAX_CPUS];
  int nextra, capextra;
  int *extra;    /* the other events, writing into their CPU's buffer */
  uint64_t freq; /* rate mode (attach: no counts to size a period from): samples per second */
  uint64_t *ids;
  uint8_t *id_ev; /* the event of each id */
  int nids;
  uint64_t samples, lost, cut;
  msr_site_stack *stacks;
  int nstacks;
  int32_t *slot;
  msr_site_proc procs[MSR_SITES_PROCS];
  int nproc;
  char **paths;
  int npaths, cappaths;
  int written;
  const char *prefix; /* the documents: lines of PREFIX.jsonl ("sites" unless set) */
  int timed;          /* cpu-clock is sampled: the documents say when (a stack's fourth member) */
  msr_when when;
  /* With `skip`, the sampling events are on only while a live process of the tree has not mapped
   * it (msr_sites_gate): each event costs every fault or call of every process it watches, and the
   * in-program sampler already samples those that did. */
  int *sampling; /* the sampling events (not the side-band ones, which stay on) */
  int nsampling, capsampling;
  int sampling_on; /* 1 at the start (enabled at exec) */
  int skip_gate;   /* a sampling event could not be listed: never gated, always on */
  uint64_t ticks, ticks_on;
} msr_sites;

/* Opens the sampling on the targets (a command not yet exec'd, or running threads). `spec`:
 * "event=period,..."; with `freq` > 0 each event is sampled about `freq` times a second on each CPU
 * instead, each stack weighed by the periods of its samples. `skip`: libmssites' path (NULL: every
 * process sampled gets a document). Returns 0 when at least one event opened. */
int msr_sites_open(msr_sites *s, const msr_targets *t, const char *spec, uint64_t freq, const char *dir,
                   const char *skip);
/* A running process's executable mappings, from /proc (attach: they were made before). */
void msr_sites_seed(msr_sites *s, pid_t pid);
void msr_sites_drain(msr_sites *s);
/* At each tick, after msr_sites_drain: with `skip`, the sampling events on while some live process
 * has not mapped it (a static executable, one started with env -i), off otherwise. */
void msr_sites_gate(msr_sites *s);
/* Writes the documents of the processes sampled that did not map `skip`. */
void msr_sites_write(msr_sites *s);
void msr_sites_close(msr_sites *s);
/* `key` (e.g. "outside_sites"): what was opened, sampled and written, and every process of the tree seen. */
void msr_sites_json(ms_json *j, const char *key, const msr_sites *s);
#endif
