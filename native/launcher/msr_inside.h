/* The in-program sampler's page faults (libmssites), switched with the fault trace's ticks.
 *
 * Sampling the faults inside the program costs every fault of every process ~100-115 ns here while
 * the event is on, the only fault event open (the counters take the faults from rusage): a C program
 * of 983,000 faults ran 0.11 s longer with it on throughout (12 interleaved rounds). Where the explaining run traces its
 * faults in a share of the ticks (msr_args_tick), the sampler's fault event is switched on and off
 * in the same ticks, its period shortened by the share so that it takes as many samples:
 * - ms-run writes the state of the tick under way to DIR/.switch/state ('1' or '0') before the
 *   command starts and at each tick it changes; libmssites (MEMSLEUTH_SITES_SWITCH=SHARE) reads it
 *   when it opens its event, opens the event in that state, and appends "PID FD" (its pid, the
 *   event's fd number) as a line of DIR/.switch/fds (one small O_APPEND write: no file per process);
 * - at each tick ms-run reads the lines added since the last tick and takes each fd from its process
 *   (pidfd_getfd: the same event; an inherited event's copies in its threads and forked children
 *   follow it), and from then on switches the event with the ticks; a process's event is on in about the share of its ticks
 *   whatever its length (its state until ms-run takes it is the state of a random tick too);
 * - a process's fds are closed when it exits (its pidfd polls readable).
 * Where ms-run cannot take another process's fds (no pidfd_getfd, ptrace refused), it writes no
 * state file and the sampler keeps its event on for the whole run, as without a share. */
#ifndef MSR_INSIDE_H
#define MSR_INSIDE_H
#include <stdint.h>
#include <sys/types.h>
#include "ms_json.h"

#define MSR_INSIDE_PROCS 256 /* processes switched at once; later ones keep their first state */

typedef struct {
  int enabled;
  char why[160];
  char dir[4096]; /* DIR/.switch */
  int state_fd;
  int fds_fd;       /* DIR/.switch/fds, read from `read_to` on at each tick */
  uint64_t read_to; /* the bytes of whole lines read so far */
  int on;
  int nheld;
  pid_t pid[MSR_INSIDE_PROCS];
  int pidfd[MSR_INSIDE_PROCS], fd[MSR_INSIDE_PROCS];
  uint64_t taken, gone, refused, full; /* gone: it ended or exec'd before a tick took it */
} msr_inside;

/* Before the command starts (`child`: forked, not yet exec'd): whether ms-run may take its fds, and
 * the state file, on (the fault trace is on until the first tick). Off, with `why`, if not. */
void msr_inside_open(msr_inside *w, const char *sites_dir, pid_t child);
/* At each tick, after msr_args_tick: the new processes' events taken, every event set to `on`, the
 * exited processes' fds closed. */
void msr_inside_tick(msr_inside *w, int on);
void msr_inside_close(msr_inside *w);
/* "inside_switch": enabled, taken, gone, refused, full, why. */
void msr_inside_json(ms_json *j, const msr_inside *w);
#endif
