/* The arguments that carry a mechanism, from the kernel: every munmap, madvise, mmap, mremap
 * and brk of the process tree, read from the syscall tracepoints' raw fields (sampling events
 * with period 1, inherited). The kernel refuses a ring buffer on an inherited per-task event,
 * so the events are opened per CPU (as perf record does), all of one CPU writing into one
 * buffer; a record says which tracepoint it is by its raw common_type. Kept as totals and size
 * histograms, never as a list: a storm of a million calls costs ms-run a few KiB.
 *
 * Each record costs the calling thread the kernel's output path (~0.7 us here), so a storm may be
 * sampled: with every[i] = P > 1, munmap/madvise/mmap/mremap record one call in P (P prime, so a
 * repeating pattern of calls shorter than P is sampled evenly) and each record counts P times; the
 * JSON says "every": P, and its totals are then estimates (the events are per CPU, each counting its
 * own period, so up to P - 1 calls per CPU go unrecorded). brk is always recorded at every call:
 * its moves are read in order. */
#ifndef MSR_ARGS_H
#define MSR_ARGS_H
#include <stdint.h>
#include <sys/types.h>
#include "ms_json.h"
#include "msr_ring.h"

/* MSR_A_BRKQ (brk's entry) only marks queries, brk(0): the break they return starts a new
 * baseline (a new program image after exec, whose randomised break says nothing of a move). */
/* MSR_A_FAULT is not a syscall: the user page faults (exceptions:page_fault_user), one in
 * every[MSR_A_FAULT], each looked up in the ranges its process released before it (below); it is
 * opened only when that period is given. */
enum {
  MSR_A_MUNMAP,
  MSR_A_MADVISE,
  MSR_A_MMAP,
  MSR_A_MREMAP,
  MSR_A_BRK,
  MSR_A_BRKQ,
  MSR_A_FAULT,
  MSR_A_FAULTK, /* the faults the kernel takes on user memory (a read() into a new buffer), as MSR_A_FAULT */
  MSR_A_AREA,   /* mmap:vm_unmapped_area, the address a new mapping got (with faults only) */
  MSR_A_N
};
#define MSR_HIST 48 /* log2 size buckets: bucket k holds sizes in [2^k, 2^(k+1)) */
#define MSR_ADVICE 32
#define MSR_BRK_PIDS 64

#define MSR_MAX_CPUS 256
/* With faults traced, the unmaps and new mappings of at least this many bytes are recorded at every
 * call even in a sampled storm: faulting such a range in costs 256 faults or more, against ~0.7 us
 * for the record. */
#define MSR_BIG_RANGE (1ull << 20)

/* Released ranges, per process: what munmap, a purging madvise and a shrinking break gave back,
 * newest first, so that a sampled fault says whether it touches again memory given back before
 * it, and by what. A ring per process: the oldest ranges are forgotten first. */
#define MSR_REL_PIDS 64
#define MSR_LAST_FAULTS 128 /* threads whose recent traced faults are remembered (a hash by tid) */
#define MSR_RECENT 1024     /* faults remembered per thread: a 10 ms drain at the runner's period (~20,000 a run) */
typedef struct {
  uint32_t tid;
  int next;
  uint64_t time[MSR_RECENT];
  uint8_t kind[MSR_RECENT];
  /* MSR_REL_MAPPED: the mapping it hit (its process's slot, its place in the ring, its number) */
  uint8_t slot[MSR_RECENT];
  uint16_t at[MSR_RECENT];
  uint32_t seq[MSR_RECENT];
} msr_recent;
/* A thread's last mmap: its length, for the place the kernel finds for it (mmap:vm_unmapped_area) */
typedef struct {
  uint32_t tid;
  uint64_t len, time;
} msr_last_mmap;
#define MSR_MMAP_AREA_NS 10000000ull /* the place is found within the call: 10 ms of slack */
/* A thread's last mremap: a place found for it (mmap:vm_unmapped_area) within the call is where the
 * kernel moved the mapping [addr, addr + old_len) to, grown to new_len: the same memory, not a fresh
 * mapping (its pages move, nothing is faulted in again but the growth). */
typedef struct {
  uint32_t tid;
  uint64_t addr, old_len, new_len, time;
} msr_last_mremap;
#define MSR_REL_RANGES 256
/* MSR_REL_MAPPED is not a release: a mapping made during the run (its faults are first touches of
 * it; those of a mapping that munmap later gives back are counted as churned). */
enum { MSR_REL_NONE, MSR_REL_MUNMAP, MSR_REL_MADVISE, MSR_REL_BRK, MSR_REL_MAPPED, MSR_REL_N };
typedef struct {
  uint64_t start, end;
  uint8_t kind, advice;
  uint32_t seq;     /* MSR_REL_MAPPED: its number, unique in the run (a remembered fault names it) */
  uint64_t faults;  /* MSR_REL_MAPPED: sampled faults in it so far */
  uint64_t samples; /* MSR_REL_MAPPED: CPU samples taken in its faults so far */
  /* MSR_REL_MAPPED: munmap last gave it (or a part) back at gone_time (0: never), when the process had
   * made gone_at remaps */
  uint64_t gone_at, gone_time;
  /* MSR_REL_MAPPED: mremap moved it to the range at moved_at numbered moved_seq (0: never moved); a CPU
   * sample joined later to a fault made here is counted there */
  uint32_t moved_seq;
  uint16_t moved_at;
} msr_range;
typedef struct {
  pid_t pid;
  int n, next;              /* ranges held, and the slot the next one goes to */
  uint64_t pending;         /* faults of mappings munmap gave back, churn once the process maps again */
  uint64_t pending_samples; /* and the CPU samples taken in those faults */
  /* the bytes given back with them, and the largest mapping among those: a later mapping larger than
   * any of them is new memory (a table grown by doubling, its old copy freed), not one that could have
   * been served from what was given back; one no larger makes up to its own bytes of them churn */
  uint64_t pending_bytes, pending_max;
  uint64_t remaps; /* mappings made so far that could have reused memory given back */
  msr_range r[MSR_REL_RANGES];
} msr_released;

typedef struct {
  long id;      /* tracepoint id (= the raw common_type of its records) */
  int opened;   /* on how many CPUs */
  int off[4];   /* raw-field offsets of the arguments this syscall needs */
  char why[96]; /* why it did not open */
} msr_argev;

typedef struct {
  int fd;     /* the buffer's own event; the others of its CPU write into it */
  void *base; /* the mmap'd ring buffer (metadata page first) */
} msr_argbuf;

typedef struct {
  int enabled;
  msr_argev ev[MSR_A_N];
  msr_argbuf buf[MSR_MAX_CPUS];
  int nbuf;
  int *fds; /* every event, each CPU's first owning its buffer */
  int nfds, capfds;
  uint64_t calls[MSR_A_N];
  uint64_t bytes[MSR_A_N]; /* munmap/madvise/mmap: len; mremap: new_len */
  uint64_t hist[MSR_A_N][MSR_HIST];
  uint64_t hist_bytes[MSR_A_N][MSR_HIST]; /* the bytes of the calls in each bucket of hist */
  uint64_t madvise_calls[MSR_ADVICE], madvise_bytes[MSR_ADVICE];
  uint64_t mmap_anon_calls, mmap_anon_bytes;
  uint64_t mmap_populate_calls, mmap_populate_bytes;
  uint64_t mremap_old_bytes, mremap_grow_calls, mremap_grow_bytes;
  uint64_t brk_up_moves, brk_up_bytes, brk_down_moves, brk_down_bytes;
  pid_t brk_pid[MSR_BRK_PIDS];
  uint64_t brk_last[MSR_BRK_PIDS];
  int brk_query[MSR_BRK_PIDS]; /* the next exit of this process's brk is a query */
  uint64_t lost;               /* records the kernel dropped (buffer full) */
  uint64_t every[MSR_A_N];     /* 0/1: every call; P: one call in P, counted P times */
  int split[MSR_A_N];          /* munmap, mmap, mapped_areas: those of MSR_BIG_RANGE or more at every call */
  msr_released *rel;           /* MSR_REL_PIDS processes' released ranges (when faults are sampled) */
  /* Sampled faults (each counting every[MSR_A_FAULT]) by what released their address before them
   * (MSR_REL_NONE: nothing did, a first touch), and how: on a present page (a protection fault:
   * copy-on-write), a write of a missing page; the rest read a missing page. */
  uint64_t refault[MSR_REL_N], refault_advice[MSR_ADVICE];
  uint64_t fault_present[MSR_REL_N], fault_write[MSR_REL_N];
  uint64_t mapped_churned; /* faults in mappings made during the run that munmap gave back, the process
                            * mapping again after (a mapping given back at teardown is no churn) */
  /* The CPU samples taken in faults of mappings made during the run, and of those the ones in mappings
   * that churned (as mapped_churned): the churn's share by time, where the faults' count would weigh a
   * library's many small first touches against a few huge pages zeroed (msr_args_join). */
  uint64_t mapped_samples, mapped_churned_samples;
  uint32_t range_seq;
  /* Each thread's recent traced faults (time, and what released the address): a CPU sample taken
   * inside a fault handler is the time of the latest of them before it (msr_cpu.c). */
  msr_recent *recent; /* MSR_LAST_FAULTS threads, by tid (with the ranges) */
  msr_last_mmap last_mmap[MSR_LAST_FAULTS];
  msr_last_mremap last_mremap[MSR_LAST_FAULTS];
  /* Faults traced in a share of the ticks only (msr_args_tick): every traced fault enters the
   * tracepoint, recorded or not (~0.2 us here, 10% of a fault-heavy program), so a run of many faults
   * traces them in a random share of its ticks, and the counts are scaled to all its faults. */
  double fault_share; /* 0 or 1: every tick */
  int *fault_fds;     /* the fault events (user and kernel), switched on and off together */
  int nfault, capfault;
  int faults_on; /* traced in the tick under way */
  uint64_t ticks, ticks_on, rng;
  uint64_t fault_rejected; /* kernel-fault records not the program's (interrupt context, kernel memory) */
} msr_args;

/* Opens the events on `pid` (not yet exec'd: enable_on_exec). Returns how many opened.
 * fault_share in (0, 1): the faults are traced in that share of the ticks (msr_args_tick). */
int msr_args_open(msr_args *a, const msr_targets *t, const uint64_t *every, double fault_share);
/* At each tick of the run: whether the faults are traced until the next one (at random, in
 * fault_share of the ticks). */
void msr_args_tick(msr_args *a);
/* Keeps every tracepoint msr_args_open reads registered (one counting event each on the calling
 * process) so that an explaining run's closes are cheap (ms-run --hold-events --syscall-args): fds
 * opened into `fds` (at most MSR_A_N), their number returned. */
int msr_args_hold(int *fds);
/* The index of a syscall that may be sampled (munmap, madvise, mmap, mremap), or -1. */
int msr_args_sampled_index(const char *name);
/* Reads every record the ring buffers hold now. */
void msr_args_drain(msr_args *a);
/* A CPU sample taken in a fault handler of thread `tid` at `time`: what released the address of the
 * thread's last traced fault (MSR_REL_*), when that fault was at most `window_ns` before; -1
 * otherwise or when faults are not traced. A sample in a fault of a mapping made during the run is
 * counted to that mapping (mapped_samples, mapped_churned_samples). */
int msr_args_join(msr_args *a, uint32_t tid, uint64_t time, uint64_t window_ns);
void msr_args_close(msr_args *a);
/* "syscall_args": totals, the break's moves, size histograms, and what did not open. `tree_faults`:
 * the run's page faults (its counters; < 0 unknown), to which the faults traced in a share of the
 * ticks are scaled. */
void msr_args_json(ms_json *j, const msr_args *a, double tree_faults);
#endif
