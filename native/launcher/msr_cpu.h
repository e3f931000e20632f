/* Where the process tree's CPU time goes, by kernel path: the software cpu-clock sampled every
 * `period_ns` of CPU time on every thread of the tree (inherited, opened per CPU as msr_args.c
 * does, because the kernel refuses a ring buffer on an inherited per-task event), each sample
 * with its kernel call chain only (no user stack: a kernel chain is a few frames the kernel
 * walks itself, a user one would need DWARF). A sample with no kernel frame was in user mode.
 *
 * Kept as distinct (executable, kernel chain) pairs with their counts, never as a list: an hour
 * of samples costs ms-run the same table. The kernel's side-band records (exec, fork, executable
 * mappings) say which program every process runs and whether its image mapped each preloaded
 * library: a preload that an `env -i`, a static program or a setuid one did not take is seen. The executable is the process's command name (comm) as
 * of its last exec, from the kernel's COMM and FORK records. The chains' addresses are named from
 * /proc/kallsyms when the document is written (root; otherwise the addresses stay numbers and the
 * document says why). Nothing here runs in the measured process but the kernel's own sampling. */
#ifndef MSR_CPU_H
#define MSR_CPU_H
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include "ms_json.h"
#include "msr_args.h"
#include "msr_ring.h"
#include "msr_when.h"

#define MSR_CPU_FRAMES 32                    /* kernel frames kept: all of a chain, or its innermost and outermost 16 */
#define MSR_CPU_STACKS 4096                  /* distinct (executable, chain) pairs kept; the rest are counted as cut */
#define MSR_CPU_COMMS 128                    /* distinct executables */
#define MSR_CPU_PIDS 8192                    /* processes whose executable is tracked */
#define MSR_CPU_PRELOADS 8                   /* preloaded libraries whose mapping is checked in every process */
#define MSR_CPU_FAULT_WINDOW_NS 100000000ull /* 100 ms: a few sampled huge-page faults apart */

typedef struct {
  uint64_t n;
  uint64_t hash;
  int16_t comm;
  uint16_t depth;
  uint8_t elided;          /* the chain was deeper than MSR_CPU_FRAMES: its middle is left out */
  uint8_t release;         /* 0, or 1 + what released the address of the thread's last traced fault
                    * (MSR_REL_*) when it was at most MSR_CPU_FAULT_WINDOW_NS before: a sample
                    * taken in a fault handler is then that fault's time */
  uint32_t when[MSR_WHEN]; /* its samples by bucket of time (msr_when.h) */
  uint64_t ip[MSR_CPU_FRAMES];
} msr_cpu_stack;

typedef struct {
  int enabled;
  char why[128]; /* why it did not open, or why kernel frames are missing */
  uint64_t period_ns;
  int fds[MSR_MAX_CPUS];
  void *base[MSR_MAX_CPUS];
  int n;
  int *extra; /* the events of the other targets, writing into their CPU's buffer */
  int nextra, capextra;
  int n_cpu_last; /* the CPU of the last buffer */
  uint64_t samples, kernel, lost, cut;
  msr_cpu_stack *stacks;
  int nstacks;
  int32_t *slot; /* open addressing over stacks, 2 * MSR_CPU_STACKS slots */
  char comm[MSR_CPU_COMMS][16];
  uint64_t comm_samples[MSR_CPU_COMMS];
  int ncomm;
  pid_t pid[MSR_CPU_PIDS];
  int16_t pid_comm[MSR_CPU_PIDS]; /* the program it runs (its last exec's name) */
  uint8_t pid_exec[MSR_CPU_PIDS]; /* its image was exec'd under ms-run: what it mapped is known */
  uint8_t pid_mask[MSR_CPU_PIDS]; /* which preloaded libraries its image mapped (bit i: preload[i]) */
  int npid;
  char *preload[MSR_CPU_PRELOADS]; /* the preloaded libraries, resolved */
  int npreload;
  msr_args *faults; /* the traced faults, drained before these samples (or NULL) */
  msr_when when;    /* the stacks' buckets of time */
  /* The kernel's symbols, read from /proc/kallsyms by a thread of ms-run while the run goes (reading
   * and sorting them takes ~60 ms, which the document's writing would otherwise add to every run). */
  pthread_t namer;
  int naming; /* the thread was started and is not joined yet */
  struct msr_ksym *ksyms;
  size_t nksym;
  char kwhy[160]; /* why the frames stay unnamed */
} msr_cpu;

/* Opens the sampler on `pid` (not yet exec'd: enable_on_exec), one sample per `period_ns` of CPU
 * time; `preload` (LD_PRELOAD's list, or NULL): the libraries whose mapping is checked in every
 * process of the tree. Returns 0 when it opened on at least one CPU. */
int msr_cpu_open(msr_cpu *c, const msr_targets *t, uint64_t period_ns, const char *preload);
/* Starts reading the kernel's symbols in the background (msr_cpu_json waits for it). Called once
 * the command exists: ms-run forks nothing after it. */
void msr_cpu_name_later(msr_cpu *c);
/* Reads every record the ring buffers hold now. */
void msr_cpu_drain(msr_cpu *c);
void msr_cpu_close(msr_cpu *c);
/* "cpu_profile": the counts, the executables and the distinct stacks with named frames. */
void msr_cpu_json(ms_json *j, msr_cpu *c);
#endif
