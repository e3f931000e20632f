/* ms-run: measures one command from outside and writes one JSON document.
 *
 *   ms-run [options] -- CMD ARGS...          (options: ms-run --help, msr_options.c)
 *
 * Counters are opened on the forked child before it execs (enable_on_exec, inherit), so they
 * cover the command and every thread and process it starts, and nothing of ms-run. ms-run is a
 * child subreaper: whatever the command starts stays below it, the memory cap and the RSS
 * timeline cover that whole tree, and whatever is still running when the command ends is
 * killed and named in the document. The command's stdout/stderr go to files (their tails are
 * kept). Lines written to the fd named by MEMSLEUTH_FD (the probe's regions, a workload's
 * result) are kept as strings, one per line, never spliced into the document. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <time.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h> /* clone3's struct clone_args, CLONE_INTO_CGROUP */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ms_events.h"
#include "ms_json.h"
#include "ms_report.h"
#include "msr.h"
#include "msr_args.h"
#include "msr_inside.h"

#define MAX_LEFTOVERS 32
#define MAX_CWDS 32 /* distinct working directories noted (--note-cwds) */

static volatile sig_atomic_t g_interrupted;
static volatile pid_t g_command_pgid; /* the measured command's process group (its own) */
/* A signal stops the run unless the measured command (its process group) sent it: a program that
 * signals its parent is measured as it is, and cannot end the comparison. */
static void on_signal(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  if (si && si->si_code == SI_USER && si->si_pid > 0 && g_command_pgid > 0 && getpgid(si->si_pid) == g_command_pgid)
    return;
  g_interrupted = sig;
}

/* ---- modes that measure nothing ---- */

static int events_mode(void) {
  ms_counters c;
  ms_counters_open(&c, 0, 0);
  ms_counters_enable(&c);
  ms_snapshot s0, s1;
  ms_counters_read(&c, &s0);
  ms_counters_read(&c, &s1);
  ms_json j;
  msj_init_growable(&j, 8192);
  msj_obj_begin(&j, NULL);
  msj_str(&j, "tracefs", ms_tracefs_events_dir());
  msj_i64(&j, "grouped", c.grouped);
  /* Every event ms-run knows, with its kind: the one list the Python side is checked against. */
  msj_arr_begin(&j, "events");
  for (int i = 0; i < c.n; i++) {
    msj_obj_begin(&j, NULL);
    msj_str(&j, "name", c.ev[i].def->name);
    msj_str(&j, "kind",
            c.ev[i].def->kind == MS_KIND_SOFTWARE   ? "software"
            : c.ev[i].def->kind == MS_KIND_HARDWARE ? "hardware"
                                                    : "syscall");
    msj_obj_end(&j);
  }
  msj_arr_end(&j);
  msj_arr_begin(&j, "opened");
  for (int i = 0; i < c.n; i++)
    if (c.ev[i].fd >= 0) msj_str(&j, NULL, c.ev[i].def->name);
  msj_arr_end(&j);
  ms_json_counters(&j, &c, &s0, &s1, 1);
  msj_obj_end(&j);
  msj_raw(&j, "\n");
  fwrite(j.buf, 1, j.len, stdout);
  free(j.buf);
  ms_counters_close(&c);
  return 0;
}

/* Closing the last perf event of a tracepoint unregisters it, and the kernel then waits for an
 * RCU grace period: about 40 ms per syscall tracepoint on the machines we measured, paid by the
 * measured process at exit. A holder that keeps one event open per tracepoint for the length of
 * a whole comparison makes every other close cheap (the tracepoint stays registered). With
 * `args`, the tracepoints an explaining run records arguments and faults from too (page faults,
 * vm_unmapped_area, brk's exit: 0.16 s of a 1 s run's exit here); a holder of its own around the
 * explaining runs, since a page-fault tracepoint registered adds work to every fault. */
static int hold_events(int args) {
  ms_counters c;
  /* no fault event: one open anywhere switches on the lookup that every fault on the machine pays */
  ms_counters_open(&c, 0, MS_OPEN_NO_HARDWARE | MS_OPEN_NO_FAULTS);
  int fds[MSR_A_N];
  int n = args ? msr_args_hold(fds) : 0;
  puts("ready");
  fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {}
  for (int i = 0; i < n; i++) close(fds[i]);
  ms_counters_close(&c);
  return 0;
}

/* ---- the measured run ---- */

typedef struct {
  char *data;
  size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 65536;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return;
    b->data = p;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}

/* Reads what is there now (the fd is non-blocking). */
static void drain(int fd, sbuf *b) {
  char tmp[65536];
  for (;;) {
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n > 0) {
      sb_add(b, tmp, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

static char *file_tail(int fd, uint64_t max, size_t *len) {
  struct stat st;
  *len = 0;
  if (fd < 0 || fstat(fd, &st) < 0) return NULL;
  off_t start = (uint64_t)st.st_size > max ? st.st_size - (off_t)max : 0;
  size_t n = (size_t)(st.st_size - start);
  char *buf = malloc(n + 1);
  if (!buf) return NULL;
  ssize_t r = pread(fd, buf, n, start);
  *len = r > 0 ? (size_t)r : 0;
  buf[*len] = 0;
  return buf;
}

static int open_output(const char *path, const char *tmpl_name) {
  if (path) return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char tmpl[PATH_MAX];
  const char *dir = getenv("TMPDIR");
  snprintf(tmpl, sizeof tmpl, "%s/ms-run-%s-XXXXXX", dir && *dir ? dir : "/tmp", tmpl_name);
  int fd = mkostemp(tmpl, O_CLOEXEC);
  if (fd >= 0) unlink(tmpl);
  return fd;
}

/* The timeline of the whole process tree: at each tick, resident memory, the heap, and the
 * running totals of the counters ms-run already holds (faults, each syscall) and of the
 * syscall arguments, so a rate over any span is a difference. When it is full, every other
 * point is dropped and the interval doubles: a long run keeps its whole span, coarser. */
#define TL_MAX_COLS 32
typedef struct {
  uint64_t (*pt)[TL_MAX_COLS];
  uint64_t n, max, interval_ms;
  int ncols;
  const char *col[TL_MAX_COLS];
  int event[TL_MAX_COLS]; /* the counter behind a column, -1, or a TL_* source below */
} timeline;

/* Columns read from elsewhere than a counter: the tree's faults from its stat files and rusage
 * (the command's run opens no fault event), and the syscall arguments (arg_value). */
enum { TL_MINFLT = -8, TL_MAJFLT = -9 };

static void tl_col(timeline *t, const char *name, int event) {
  if (t->ncols < TL_MAX_COLS) {
    t->col[t->ncols] = name;
    t->event[t->ncols] = event;
    t->ncols++;
  }
}

/* Every other point kept, and the ticks twice as far apart: the points stay evenly spaced. */
static void tl_thin(timeline *t) {
  for (uint64_t k = 0; k < (t->n + 1) / 2; k++) memcpy(t->pt[k], t->pt[2 * k], sizeof t->pt[k]);
  t->n = (t->n + 1) / 2;
  t->interval_ms *= 2;
}

static uint64_t *tl_next(timeline *t) {
  if (t->n == t->max) tl_thin(t);
  uint64_t *p = t->pt[t->n++];
  memset(p, 0, sizeof t->pt[0]);
  return p;
}

typedef struct {
  pid_t pid;
  int exec_errno;
  uint64_t wall_ns;
  msr_reaper reaper;
  int timed_out, over_limit;
  uint64_t peak_rss_kb, peak_procs;
  uint64_t tree_ns;       /* ms-run's CPU time reading the tree's files at this tick (keep_ticks_cheap) */
  int dear_ticks;         /* ticks in a row whose reading cost more than 1/TICK_SPACING of the interval */
  int64_t tasks0, tasks1; /* msr_machine_tasks at the start and the end */
  const char *events_by;  /* run mode with events: "cgroup" or "inherited" (open_counters) */
  char events_why[256];   /* why not by cgroup */
  const char *cgroup;     /* the command's own cgroup (its tree is read from it), or NULL */
  timeline tl;
  const ms_counters *ctr;  /* NULL without counters */
  const ms_counters *ctrs; /* attach: one set per thread found at the start; a cgroup: one per CPU; `nctr` */
  int nctr;
  const pid_t *roots; /* attach: the processes measured (their trees are) */
  int nroots;
  int threads_at_start, threads_at_end, window_stop; /* attach (nroots > 0) */
  uint64_t exited_ns;                                /* attach: when the last attached process exited (0: it did not) */
  uint64_t window_flt[2]; /* attach: the window's faults so far (minor, major), /proc's differences */
  msr_args args;
  msr_cpu cpu;
  msr_sites outside;
  msr_inside inside; /* the in-program sampler's fault event, switched with the fault trace's ticks */
  msr_sites ustacks; /* --cpu-stacks-dir: the CPU samples' user chains */
  sbuf lines;
  int nleft; /* processes still running when the command ended */
  pid_t left_pid[MAX_LEFTOVERS];
  char left_comm[MAX_LEFTOVERS][32];
  int left_more;
  char *cwd[MAX_CWDS]; /* --note-cwds: where the tree's processes ran */
  int ncwd;
  int bounded[2]; /* the command's stdout and stderr where they are ms-run's own files (bound_output), or -1 */
  uint64_t keep_bytes;
} run_result;

/* A command's output that ms-run keeps only the tail of is an unlinked file of its own in TMPDIR:
 * a command writing gigabytes to stdout filled /tmp (on tmpfs, memory) for a tail of a few KiB. At
 * each tick, once the file holds more than twice `keep` bytes on disk, all but its last `keep` bytes
 * are punched out: its size and the writer's offset stay, the hole is never read (file_tail reads
 * the end), and the disk holds about `keep` bytes whatever the command writes. */
static void bound_output(int fd, uint64_t keep) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_blocks * 512 <= 2 * keep) return;
  off_t end = (st.st_size - (off_t)keep) & ~(off_t)4095;
  if (end > 0) (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, end);
}

/* Forks the command in its own process group with its environment; it execs when `go` is written.
 * With a cgroup (its directory's fd, else -1) the child is created in it (clone3's
 * CLONE_INTO_CGROUP; `*entered` says so): moving a task there afterwards takes the cgroups' write
 * lock, whose RCU grace period cost 7-15 ms a run on the 2-vCPU VM. Else, or where the kernel
 * refuses, a plain fork. */
static pid_t spawn(const msr_options *o, int cgroup_fd, int *entered, int in_fd, int out_fd, int err_fd, int probe_w,
                   int go_r, int exec_w) {
  pid_t pid = -1;
  *entered = 0;
#ifdef CLONE_INTO_CGROUP
  if (cgroup_fd >= 0) {
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_INTO_CGROUP;
    ca.exit_signal = SIGCHLD;
    ca.cgroup = (uint64_t)cgroup_fd;
    pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
    if (pid > 0) *entered = 1;
  }
#else
  (void)cgroup_fd;
#endif
  if (pid < 0) pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* if ms-run itself is killed, take the command with it */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  dup2(in_fd, 0); /* /dev/null, or --stdin's file, opened afresh for this run */
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  int wfd = dup(probe_w); /* dup clears CLOEXEC: this one survives exec */
  char fdstr[16];
  snprintf(fdstr, sizeof fdstr, "%d", wfd);
  setenv("MEMSLEUTH_FD", fdstr, 1);
  msr_apply_env(o);
  if (o->no_syscalls) setenv("MEMSLEUTH_NO_SYSCALLS", "1", 1); /* the probe's regions count none either */
  if (o->preload) setenv("LD_PRELOAD", o->preload, 1);
  char go;
  if (read(go_r, &go, 1) != 1) _exit(127);
  execvp(o->argv[0], o->argv);
  int e = errno;
  (void)!write(exec_w, &e, sizeof e);
  _exit(127);
}

/* The timeline's columns: fixed ones, the tree's faults where no counter counts them (`faults`),
 * then one per counter that opened, then the arguments. */
static void tl_columns(timeline *t, const ms_counters *ctr, const msr_args *args, int faults) {
  static const char *fixed[] = {"t_ms", "rss_kb", "anon_kb", "procs", "heap_kb"};
  for (int k = 0; k < 5; k++) tl_col(t, fixed[k], -1);
  if (faults) {
    tl_col(t, "page-faults-minor", TL_MINFLT);
    tl_col(t, "page-faults-major", TL_MAJFLT);
  }
  for (int i = 0; ctr && i < ctr->n; i++) {
    const ms_event *e = &ctr->ev[i];
    if (e->fd >= 0 && (e->def->kind == MS_KIND_SYSCALL || !strcmp(e->def->name, "page-faults-minor") ||
                       !strcmp(e->def->name, "page-faults-major") || !strcmp(e->def->name, "context-switches")))
      tl_col(t, e->def->name, i);
  }
  if (args->enabled) {
    static const char *arg_cols[] = {"munmap_bytes",      "madvise_bytes", "mmap_bytes",
                                     "mremap_grow_bytes", "brk_up_bytes",  "brk_down_bytes"};
    for (int k = 0; k < 6; k++) tl_col(t, arg_cols[k], -2 - k);
  }
}

static uint64_t arg_value(const msr_args *a, int code) {
  switch (code) {
    case -2:
      return a->bytes[MSR_A_MUNMAP];
    case -3:
      return a->bytes[MSR_A_MADVISE];
    case -4:
      return a->bytes[MSR_A_MMAP];
    case -5:
      return a->mremap_grow_bytes;
    case -6:
      return a->brk_up_bytes;
    case -7:
      return a->brk_down_bytes;
  }
  return 0;
}

/* The counters now: the command's set, or every attached thread's summed. */
static void read_counters(const run_result *r, ms_snapshot *snap) {
  if (!r->nctr) {
    ms_counters_read(r->ctr, snap);
    return;
  }
  memset(snap, 0, sizeof *snap);
  for (int k = 0; k < r->nctr; k++) {
    ms_snapshot one;
    ms_counters_read(&r->ctrs[k], &one);
    for (int i = 0; i < MS_MAX_EVENTS; i++) {
      snap->r[i].value += one.r[i].value;
      snap->r[i].enabled_ns += one.r[i].enabled_ns;
      snap->r[i].running_ns += one.r[i].running_ns;
    }
  }
}

static void the_tree(const run_result *r, msr_procs *procs) {
  if (r->nroots) msr_tree_of(r->roots, r->nroots, 1, procs);
  else if (r->cgroup) msr_tree_in_cgroup(r->cgroup, procs);
  else msr_descendants(procs);
}

/* The working directory of each process of the tree, noted once each (--note-cwds). */
static void note_cwds(run_result *r, const msr_procs *procs) {
  for (int i = 0; i < procs->n && r->ncwd < MAX_CWDS; i++) {
    char path[64], dir[4096];
    snprintf(path, sizeof path, "/proc/%d/cwd", (int)procs->pid[i]);
    ssize_t n = readlink(path, dir, sizeof dir - 1);
    if (n <= 0) continue;
    dir[n] = 0;
    int seen = 0;
    for (int k = 0; k < r->ncwd && !seen; k++) seen = !strcmp(r->cwd[k], dir);
    if (!seen && (r->cwd[r->ncwd] = strdup(dir))) r->ncwd++;
  }
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What ms-run spends reading the tree's files is at most about 1/TICK_SPACING of a CPU (60 processes
 * read every 10 ms: 3.3 ms a tick here, a third of a CPU): when TICK_DEAR ticks in a row each cost
 * more than that, the timeline is thinned and the ticks spaced twice as far (as when it fills), up
 * to TICK_MAX_MS; a tree whose reading takes longer than TICK_MAX_MS / TICK_SPACING costs more. The
 * samplers' buffers are read at each tick as ever. */
#define TICK_SPACING 20
#define TICK_DEAR 8
#define TICK_MAX_MS 160

static void keep_ticks_cheap(run_result *r) {
  if (r->tree_ns * TICK_SPACING <= r->tl.interval_ms * 1000000ull) r->dear_ticks = 0;
  else if (++r->dear_ticks >= TICK_DEAR && r->tl.interval_ms < TICK_MAX_MS) {
    tl_thin(&r->tl);
    r->dear_ticks = 0;
  }
  r->tree_ns = 0;
}

/* One tick's point of the timeline. `found`: the tree as the caller found it at this tick (attached,
 * for the window's times: it is not read twice), else NULL: it is found here. */
static void sample_tree(const msr_options *o, run_result *r, uint64_t t_ns, uint64_t t0, msr_procs *found) {
  static msr_procs own;
  msr_procs *procs = found ? found : &own;
  uint64_t c0 = cpu_ns();
  if (!found) the_tree(r, procs);
  if (o->note_cwds) note_cwds(r, procs);
  if (!procs->n) return; /* exiting: no live process to read, and a zero would be no measurement */
  uint64_t rss, anon;
  msr_tree_rss_kb(procs, &rss, &anon);
  if (!rss) return; /* the last process is tearing its memory down: not a measurement */
  if (rss > r->peak_rss_kb) r->peak_rss_kb = rss;
  if ((uint64_t)procs->n > r->peak_procs) r->peak_procs = (uint64_t)procs->n;
  ms_snapshot snap;
  if (r->ctr) read_counters(r, &snap);
  uint64_t drain0 = cpu_ns();
  if (r->args.enabled) msr_args_drain(&r->args);
  c0 += cpu_ns() - drain0; /* reading the calls' arguments is the evidence's cost, not the tick's */
  /* The live processes' faults (with their waited-for children's), and those of the processes
   * ms-run itself reaped: every fault of the tree since it started, but those of a process that
   * has exited and is not yet waited for (it counts again once it is). */
  uint64_t flt[2] = {r->window_flt[0], r->window_flt[1]};
  if (!r->nroots) {
    msr_tree_faults(procs, &flt[0], &flt[1]);
    flt[0] += (uint64_t)r->reaper.others_ru.ru_minflt;
    flt[1] += (uint64_t)r->reaper.others_ru.ru_majflt;
  }
  uint64_t *p = tl_next(&r->tl);
  for (int c = 0; c < r->tl.ncols; c++) {
    int ev = r->tl.event[c];
    if (ev >= 0) {
      double v = 0;
      ms_scale(snap.r[ev], &v); /* counters start at zero: the reading is the running total */
      p[c] = (uint64_t)(v + 0.5);
    } else if (ev == TL_MINFLT || ev == TL_MAJFLT) {
      p[c] = flt[ev == TL_MINFLT ? 0 : 1];
    } else if (ev < -1) {
      p[c] = arg_value(&r->args, ev);
    }
    /* A running total never goes down: a read that fails or finds the event not scheduled at
     * this tick (it reads 0) keeps the previous tick's total. */
    if (ev != -1 && r->tl.n > 1 && p[c] < r->tl.pt[r->tl.n - 2][c]) p[c] = r->tl.pt[r->tl.n - 2][c];
  }
  p[0] = (t_ns - t0) / 1000000u;
  p[1] = rss;
  p[2] = anon;
  p[3] = (uint64_t)procs->n;
  p[4] = msr_tree_heap_kb(procs);
  r->tree_ns += cpu_ns() - c0; /* the counters' read with it: a tick's own cost */
  if (o->mem_limit_bytes && !r->nroots && rss * 1024u > o->mem_limit_bytes &&
      !r->over_limit) { /* never attached ones */
    r->over_limit = 1;
    msr_kill_tree(r->pid, &r->reaper);
  }
}

static void on_child(int sig) { (void)sig; }

/* Runs the command to its end (or its limits), sampling the tree; then ends whatever is left. */
static void supervise(const msr_options *o, run_result *r, int probe_r, uint64_t t0) {
  /* SIGCHLD is blocked but while waiting, where it ends the wait: the command's end is seen when it
   * happens, not at the next tick (its wall time would read up to a tick long). */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_child;
  sigaction(SIGCHLD, &sa, NULL);
  sigset_t chld, before, waiting;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &before);
  waiting = before;
  sigdelset(&waiting, SIGCHLD);
  uint64_t next_sample = t0;
  uint64_t deadline = o->timeout_s > 0 ? t0 + (uint64_t)(o->timeout_s * 1e9) : 0;
  struct pollfd pfd = {probe_r, POLLIN, 0};
  int pipe_open = 1;
  while (!msr_reap(&r->reaper)) {
    uint64_t t = msr_now_ns();
    /* Asleep until the next sample, to the nanosecond (ppoll): a wait in whole milliseconds, rounded
     * down, would spin through the last fraction of every tick (a tenth of a CPU at 10 ms). */
    uint64_t wait_ns = next_sample > t ? next_sample - t : 0;
    if (wait_ns > o->sample_ms * 1000000u) wait_ns = o->sample_ms * 1000000u;
    struct timespec wait = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
    /* The pipe is read as it fills, so a chatty probe never blocks the command. */
    if (ppoll(&pfd, pipe_open ? 1 : 0, &wait, &waiting) > 0 && (pfd.revents & (POLLIN | POLLHUP))) {
      char tmp[65536];
      ssize_t n = read(probe_r, tmp, sizeof tmp);
      if (n > 0) sb_add(&r->lines, tmp, (size_t)n);
      else if (n == 0) pipe_open = 0;
    }
    if (msr_reap(&r->reaper)) break;
    t = msr_now_ns();
    if (t >= next_sample) {
      sample_tree(o, r, t, t0, NULL); /* drains the traced faults first: the CPU samples are joined to them */
      if (r->cpu.enabled) msr_cpu_drain(&r->cpu);
      if (r->outside.enabled) {
        msr_sites_drain(&r->outside);
        msr_sites_gate(&r->outside);
      }
      if (r->ustacks.enabled) msr_sites_drain(&r->ustacks);
      msr_args_tick(&r->args); /* the CPU samples read, joined to the faults: the next tick's faults */
      msr_inside_tick(&r->inside, r->args.faults_on);
      keep_ticks_cheap(r);
      for (int i = 0; i < 2; i++) bound_output(r->bounded[i], r->keep_bytes);
      next_sample = t + r->tl.interval_ms * 1000000u;
    }
    if (deadline && t >= deadline && !r->timed_out) {
      r->timed_out = 1;
      msr_kill_tree(r->pid, &r->reaper);
    }
    if (g_interrupted) msr_kill_tree(r->pid, &r->reaper);
  }
  r->wall_ns = msr_now_ns() - t0;
  /* The command is done; what it left running is named, then ended with it. */
  msr_procs left;
  msr_descendants(&left);
  for (int i = 0; i < left.n; i++) {
    if (r->nleft < MAX_LEFTOVERS) {
      r->left_pid[r->nleft] = left.pid[i];
      msr_comm(left.pid[i], r->left_comm[r->nleft], sizeof r->left_comm[0]);
      r->nleft++;
    } else {
      r->left_more++;
    }
  }
  msr_kill_tree(r->pid, &r->reaper);
  sigprocmask(SIG_SETMASK, &before, NULL);
  /* Every writer of the pipe is gone now: read it to its end. */
  int fl = fcntl(probe_r, F_GETFL);
  fcntl(probe_r, F_SETFL, fl | O_NONBLOCK);
  drain(probe_r, &r->lines);
}

static const char *classify(const msr_options *o, const run_result *r, char *detail, size_t cap) {
  int st = r->reaper.main_status;
  detail[0] = 0;
  if (r->exec_errno) {
    snprintf(detail, cap, "cannot execute %s: %s%s", o->argv[0], strerror(r->exec_errno),
             r->exec_errno == ENOEXEC ? " (not a binary the kernel can start: a script needs a #! line)" : "");
    return "error";
  }
  if (g_interrupted) {
    snprintf(detail, cap, "interrupted by signal %d", (int)g_interrupted);
    return "error";
  }
  if (r->timed_out) {
    snprintf(detail, cap, "killed after %.3g s", o->timeout_s);
    return "timeout";
  }
  if (r->over_limit) {
    snprintf(detail, cap, "resident memory of the process tree exceeded the %.1f MiB limit; killed by ms-run",
             (double)o->mem_limit_bytes / (1024.0 * 1024.0));
    return "oom";
  }
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    snprintf(detail, cap, "killed by signal %d (SIG%s)%s", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?",
             WCOREDUMP(st) ? ", core dumped" : "");
    return "crashed";
  }
  if (WIFEXITED(st)) {
    int code = WEXITSTATUS(st);
    if (code != 0 && code == o->oom_exit_code) {
      snprintf(detail, cap, "the command reported out of memory (exit %d)", code);
      return "oom";
    }
    if (code != 0) {
      snprintf(detail, cap, "exited with status %d", code);
      return "error";
    }
  }
  return "ok";
}

/* The CPU samples' user chains (--cpu-stacks-dir): the cpu-clock at --cpu-sample-us's period, every
 * process of the tree, documents: lines of DIR/cpu.jsonl. */
static void open_cpu_stacks(msr_sites *u, const msr_targets *t, const msr_options *o) {
  char spec[64];
  snprintf(spec, sizeof spec, "cpu-clock=%llu", (unsigned long long)o->cpu_sample_us * 1000u);
  msr_sites_open(u, t, spec, 0, o->cpu_stacks_dir, NULL);
  u->prefix = "cpu";
}

/* Reads what every sampler still holds once the run has ended, and writes the stack samplers'
 * documents. */
static void drain_samplers(run_result *r) {
  if (r->args.enabled) msr_args_drain(&r->args);
  if (r->cpu.enabled) msr_cpu_drain(&r->cpu);
  if (r->outside.enabled) {
    msr_sites_drain(&r->outside);
    msr_sites_write(&r->outside);
  }
  if (r->ustacks.enabled) {
    msr_sites_drain(&r->ustacks);
    msr_sites_write(&r->ustacks);
  }
}

/* The run's page faults, minor and major: rusage's (an attached window's, /proc's differences). No
 * fault is a perf event: one costs every fault on the machine its lookup. */
static double tree_faults(const run_result *r) {
  const struct rusage *a = &r->reaper.main_ru, *b = &r->reaper.others_ru;
  return (double)(a->ru_minflt + b->ru_minflt + a->ru_majflt + b->ru_majflt);
}

static int write_document(const msr_options *o, run_result *r, const ms_counters *ctr, const ms_snapshot *s0,
                          const ms_snapshot *s1, int out_fd, int err_fd) {
  char detail[512];
  const char *st = classify(o, r, detail, sizeof detail);
  int ws = r->reaper.main_status;
  int sig = r->reaper.main_done && WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
  int code = r->reaper.main_done && WIFEXITED(ws) && !r->exec_errno ? WEXITSTATUS(ws) : -1;
  struct rusage *a = &r->reaper.main_ru, *b = &r->reaper.others_ru;
  uint64_t maxrss = (uint64_t)(a->ru_maxrss > b->ru_maxrss ? a->ru_maxrss : b->ru_maxrss);
  if (r->peak_rss_kb > maxrss) maxrss = r->peak_rss_kb;

  size_t out_len, err_len;
  char *out_tail = file_tail(out_fd, o->tail_bytes, &out_len);
  char *err_tail = file_tail(err_fd, o->tail_bytes, &err_len);

  ms_json j;
  msj_init_growable(&j, 65536);
  msj_obj_begin(&j, NULL);
  msj_i64(&j, "schema", 2);
  msj_arr_begin(&j, "argv");
  for (char **p = o->argv; *p; p++) msj_str(&j, NULL, *p);
  msj_arr_end(&j);
  msj_str(&j, "status", st);
  msj_str(&j, "detail", detail[0] ? detail : NULL);
  if (code >= 0) msj_i64(&j, "exit_code", code);
  else msj_null(&j, "exit_code");
  if (sig) {
    msj_i64(&j, "signal", sig);
    msj_str(&j, "signal_name", sigabbrev_np(sig));
  } else {
    msj_null(&j, "signal");
    msj_null(&j, "signal_name");
  }
  msj_u64(&j, "wall_ns", r->wall_ns);
  /* The command's own rusage (with the children it waited for) plus the orphans ms-run reaped. */
  msj_u64(&j, "user_ns",
          ms_tv_ns(a->ru_utime.tv_sec, a->ru_utime.tv_usec) + ms_tv_ns(b->ru_utime.tv_sec, b->ru_utime.tv_usec));
  msj_u64(&j, "sys_ns",
          ms_tv_ns(a->ru_stime.tv_sec, a->ru_stime.tv_usec) + ms_tv_ns(b->ru_stime.tv_sec, b->ru_stime.tv_usec));
  msj_i64(&j, "minflt", a->ru_minflt + b->ru_minflt);
  msj_i64(&j, "majflt", a->ru_majflt + b->ru_majflt);
  msj_i64(&j, "nvcsw", a->ru_nvcsw + b->ru_nvcsw);
  msj_i64(&j, "nivcsw", a->ru_nivcsw + b->ru_nivcsw);
  msj_u64(&j, "maxrss_kb", maxrss);
  msj_u64(&j, "peak_tree_rss_kb", r->peak_rss_kb);
  msj_u64(&j, "peak_procs", r->peak_procs);
  if (r->tasks0 >= 0 && r->tasks1 >= r->tasks0) msj_i64(&j, "machine_tasks_created", r->tasks1 - r->tasks0);
  else msj_null(&j, "machine_tasks_created");
  if (o->timeout_s > 0) msj_dbl(&j, "timeout_s", o->timeout_s);
  else msj_null(&j, "timeout_s");
  if (o->mem_limit_bytes) msj_u64(&j, "mem_limit_bytes", o->mem_limit_bytes);
  else msj_null(&j, "mem_limit_bytes");
  msj_str(&j, "preload", o->preload);
  msj_i64(&j, "counters_grouped", ctr->grouped);
  msj_bool(&j, "syscalls_counted", !o->no_counters && !o->no_syscalls);
  if (o->no_counters) {
    static const char *empty[] = {"counters", "syscalls", "running_fraction", "unsupported"};
    for (int k = 0; k < 4; k++) {
      msj_obj_begin(&j, empty[k]);
      msj_obj_end(&j);
    }
  } else {
    ms_json_counters(&j, ctr, s0, s1, 1);
  }
  if (r->events_by) {
    msj_str(&j, "events_by", r->events_by);
    msj_str(&j, "events_by_why", r->events_why[0] ? r->events_why : NULL);
  }
  if (r->args.enabled || o->syscall_args) msr_args_json(&j, &r->args, tree_faults(r));
  if (o->cpu_sample_us) msr_cpu_json(&j, &r->cpu);
  if (o->outside_sites) msr_sites_json(&j, "outside_sites", &r->outside);
  if (r->inside.enabled || r->inside.why[0]) msr_inside_json(&j, &r->inside);
  if (o->cpu_sample_us && o->cpu_stacks_dir) msr_sites_json(&j, "cpu_stacks", &r->ustacks);
  if (o->note_cwds) {
    msj_arr_begin(&j, "cwds");
    for (int k = 0; k < r->ncwd; k++) msj_str(&j, NULL, r->cwd[k]);
    msj_arr_end(&j);
  }
  if (r->nroots) {
    msj_obj_begin(&j, "attached");
    msj_arr_begin(&j, "pids");
    for (int k = 0; k < r->nroots; k++) msj_i64(&j, NULL, r->roots[k]);
    msj_arr_end(&j);
    msj_i64(&j, "threads_at_start", r->threads_at_start);
    msj_i64(&j, "threads_at_end", r->threads_at_end);
    if (r->exited_ns) msj_u64(&j, "exited_at_ns", r->exited_ns);
    else msj_null(&j, "exited_at_ns");
    msj_str(&j, "ended_by", r->exited_ns ? "exit" : r->window_stop ? "signal" : "duration");
    msj_obj_end(&j);
  }
  msj_obj_begin(&j, "timeline");
  msj_u64(&j, "sample_ms", o->sample_ms);
  msj_u64(&j, "interval_ms", r->tl.interval_ms); /* after thinning */
  msj_arr_begin(&j, "columns");
  for (int c = 0; c < r->tl.ncols; c++) msj_str(&j, NULL, r->tl.col[c]);
  msj_arr_end(&j);
  msj_arr_begin(&j, "rows");
  for (uint64_t k = 0; k < r->tl.n; k++) {
    msj_arr_begin(&j, NULL);
    for (int c = 0; c < r->tl.ncols; c++) msj_u64(&j, NULL, r->tl.pt[k][c]);
    msj_arr_end(&j);
  }
  msj_arr_end(&j);
  msj_obj_end(&j);
  msj_arr_begin(&j, "leftover_processes");
  for (int k = 0; k < r->nleft; k++) {
    msj_obj_begin(&j, NULL);
    msj_i64(&j, "pid", r->left_pid[k]);
    msj_str(&j, "comm", r->left_comm[k]);
    msj_obj_end(&j);
  }
  msj_arr_end(&j);
  msj_i64(&j, "leftover_more", r->left_more);
  /* One string per line written to MEMSLEUTH_FD; the reader parses each on its own, so a
   * program that writes anything there can spoil its own lines and nothing else. */
  msj_arr_begin(&j, "fd_lines");
  for (char *p = r->lines.data; p && p < r->lines.data + r->lines.len;) {
    char *nl = memchr(p, '\n', (size_t)(r->lines.data + r->lines.len - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(r->lines.data + r->lines.len - p);
    if (n) msj_strn(&j, NULL, p, n);
    p += n + (nl ? 1 : 0);
  }
  msj_arr_end(&j);
  msj_strn(&j, "stdout_tail", out_tail ? out_tail : "", out_len);
  msj_strn(&j, "stderr_tail", err_tail ? err_tail : "", err_len);
  msj_obj_end(&j);
  msj_raw(&j, "\n");
  free(out_tail);
  free(err_tail);
  if (j.overflow) {
    fprintf(stderr, "ms-run: out of memory writing the document\n");
    return 2;
  }

  int fd = 1;
  if (o->out) {
    fd = open(o->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      fprintf(stderr, "ms-run: cannot write %s: %s\n", o->out, strerror(errno));
      return 2;
    }
  }
  for (size_t off = 0; off < j.len;) {
    ssize_t w = write(fd, j.buf + off, j.len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "ms-run: cannot write the document: %s\n", strerror(errno));
      return 2;
    }
    off += (size_t)w;
  }
  if (o->out && close(fd) != 0) {
    fprintf(stderr, "ms-run: cannot write %s: %s\n", o->out, strerror(errno));
    return 2;
  }
  free(j.buf);
  return 0;
}

/* SIGINT, SIGTERM and SIGHUP end the run (or the attached window) through g_interrupted. */
static void catch_stops(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* ---- attach: running processes measured for a window ---- */

/* Every process's times and faults (msr_stat: /proc/PID/stat) at the start of the window and as last
 * read: the window's share is the difference (a process that exits keeps what was last read of it;
 * one born in the window starts at zero). A process is its pid and its start time: one that gets the
 * pid of a process that ended in the window is another (its counts less the ended one's would wrap
 * around). */
typedef struct {
  pid_t pid[MSR_MAX_PROCS];
  msr_stat start[MSR_MAX_PROCS], last[MSR_MAX_PROCS];
  int n;
} window_times;

/* Returns the threads of those processes. */
static int times_update(window_times *w, const msr_procs *procs, int at_start) {
  int threads = 0;
  for (int i = 0; i < procs->n; i++) {
    pid_t pid = procs->pid[i];
    msr_stat t;
    if (msr_proc_stat(pid, &t)) continue;
    threads += t.threads;
    int k = 0;
    while (k < w->n && (w->pid[k] != pid || w->last[k].born != t.born)) k++;
    if (k == w->n) {
      if (w->n == MSR_MAX_PROCS) continue;
      w->n++;
      w->pid[k] = pid;
      w->start[k] = at_start ? t : (msr_stat){.born = t.born};
    }
    w->last[k] = t;
  }
  return threads;
}

/* The window's faults so far, minor and major: each process's since the start (or its birth). */
static void window_faults(const window_times *w, uint64_t flt[2]) {
  flt[0] = flt[1] = 0;
  for (int k = 0; k < w->n; k++) {
    flt[0] += w->last[k].minflt - w->start[k].minflt;
    flt[1] += w->last[k].majflt - w->start[k].majflt;
  }
}

/* The threads of the processes in `procs` (/proc/PID/task), appended to `tids` when new. */
static void threads_of(const msr_procs *procs, pid_t **tids, int *n, int *cap) {
  for (int i = 0; i < procs->n; i++) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)procs->pid[i]);
    DIR *d = opendir(path);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      pid_t tid = (pid_t)atoi(e->d_name);
      if (tid <= 0) continue;
      int seen = 0;
      for (int k = 0; k < *n && !seen; k++) seen = (*tids)[k] == tid;
      if (seen) continue;
      if (*n == *cap) {
        int c = *cap ? 2 * *cap : 256;
        pid_t *t = realloc(*tids, (size_t)c * sizeof *t);
        if (!t) break;
        *tids = t;
        *cap = c;
      }
      (*tids)[(*n)++] = tid;
    }
    closedir(d);
  }
}

/* Measures the processes of --attach and their trees for the window, then detaches: nothing is
 * started, stopped or signalled; every event is the kernel's, on the threads found at the start
 * (inherited: the threads and processes they create in the window are counted too), and closing
 * them detaches. The document is a run's, its rusage replaced by /proc's differences. */
static int attach_mode(const msr_options *o) {
  catch_stops();
  prctl(PR_SET_PDEATHSIG, SIGTERM); /* memsleuth killed: ms-run detaches (its events close with it) */
  struct rlimit nofile;             /* a thread's events per CPU: raise the soft limit to what is allowed */
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  static run_result r;
  memset(&r, 0, sizeof r);
  r.roots = o->attach;
  r.nroots = o->nattach;
  r.tl.max = o->max_points;
  r.tl.interval_ms = o->sample_ms;
  r.tl.pt = calloc(o->max_points + 1, sizeof *r.tl.pt);
  static window_times w;
  memset(&w, 0, sizeof w);
  msr_procs procs;
  the_tree(&r, &procs);
  if (!r.tl.pt || !procs.n) {
    fprintf(stderr, "ms-run: %s\n", r.tl.pt ? "no process to attach to (gone?)" : "out of memory");
    return 2;
  }
  pid_t *tids = NULL;
  int ntid = 0, cap = 0;
  threads_of(&procs, &tids, &ntid, &cap);
  r.threads_at_start = r.threads_at_end = ntid;

  ms_counters *ctrs = calloc((size_t)ntid, sizeof *ctrs);
  int nctr = 0;
  if (!o->no_counters && ctrs)
    for (int k = 0; k < ntid; k++)
      if (ms_counters_open(&ctrs[nctr], tids[k], MS_OPEN_INHERIT | MS_OPEN_NO_FAULTS) > 0) nctr++;
  if (nctr) {
    r.ctr = &ctrs[0];
    r.ctrs = ctrs;
    r.nctr = nctr;
  } else if (!o->no_counters && ctrs && ntid) {
    /* No thread's counters opened: the last attempt's events, every one refused with its reason, so
     * that the document lists them as unsupported instead of counting nothing as zero calls. */
    r.ctr = &ctrs[0];
    fprintf(stderr, "ms-run: no counter opened on the attached threads: the window's counts are not measured\n");
  }
  msr_targets targets = {tids, ntid, 1, -1};
  if (o->syscall_args) msr_args_open(&r.args, &targets, o->args_every, o->fault_share);
  if (o->cpu_sample_us) {
    msr_cpu_open(&r.cpu, &targets, o->cpu_sample_us * 1000u, NULL);
    msr_cpu_name_later(&r.cpu);
    r.cpu.faults = &r.args;
  }
  if (o->outside_sites) {
    msr_sites_open(&r.outside, &targets, o->outside_sites, o->outside_freq, o->outside_dir, NULL);
    for (int i = 0; i < procs.n; i++) msr_sites_seed(&r.outside, procs.pid[i]);
  }
  if (o->cpu_sample_us && o->cpu_stacks_dir) {
    open_cpu_stacks(&r.ustacks, &targets, o);
    for (int i = 0; i < procs.n; i++) msr_sites_seed(&r.ustacks, procs.pid[i]);
  }
  tl_columns(&r.tl, r.ctr, &r.args, 1);
  for (int k = 0; k < nctr; k++) ms_counters_enable(&ctrs[k]);
  times_update(&w, &procs, 1);
  ms_snapshot s0, s1;
  memset(&s0, 0, sizeof s0);
  r.tasks0 = msr_machine_tasks();
  uint64_t t0 = msr_now_ns();
  uint64_t deadline = o->duration_s > 0 ? t0 + (uint64_t)(o->duration_s * 1e9) : 0;
  while (!g_interrupted) {
    uint64_t t = msr_now_ns();
    if (deadline && t >= deadline) break;
    uint64_t c0 = cpu_ns();
    the_tree(&r, &procs);
    if (procs.n) { /* the tick's faults: read before its timeline row */
      r.threads_at_end = times_update(&w, &procs, 0);
      window_faults(&w, r.window_flt);
    }
    r.tree_ns = cpu_ns() - c0;
    sample_tree(o, &r, t, t0, &procs);
    if (r.cpu.enabled) msr_cpu_drain(&r.cpu);
    if (r.outside.enabled) msr_sites_drain(&r.outside);
    if (r.ustacks.enabled) msr_sites_drain(&r.ustacks);
    msr_args_tick(&r.args);
    keep_ticks_cheap(&r);
    if (!procs.n) { /* every attached process has exited: what was measured is kept */
      r.exited_ns = t - t0;
      break;
    }
    uint64_t next = t + r.tl.interval_ms * 1000000u, now = msr_now_ns();
    if (deadline && next > deadline) next = deadline;
    if (next > now) {
      struct timespec ts = {(time_t)((next - now) / 1000000000u), (long)((next - now) % 1000000000u)};
      nanosleep(&ts, NULL); /* a signal ends it early */
    }
  }
  r.wall_ns = msr_now_ns() - t0;
  r.tasks1 = msr_machine_tasks();
  if (r.ctr) read_counters(&r, &s1);
  else memset(&s1, 0, sizeof s1);
  drain_samplers(&r);
  long hz = sysconf(_SC_CLK_TCK);
  uint64_t ut = 0, st = 0, flt[2];
  for (int k = 0; k < w.n; k++) {
    ut += w.last[k].utime - w.start[k].utime;
    st += w.last[k].stime - w.start[k].stime;
  }
  window_faults(&w, flt);
  struct rusage *ru = &r.reaper.main_ru;
  ru->ru_utime.tv_sec = (time_t)(ut / (uint64_t)hz);
  ru->ru_utime.tv_usec = (suseconds_t)(ut % (uint64_t)hz * 1000000u / (uint64_t)hz);
  ru->ru_stime.tv_sec = (time_t)(st / (uint64_t)hz);
  ru->ru_stime.tv_usec = (suseconds_t)(st % (uint64_t)hz * 1000000u / (uint64_t)hz);
  ru->ru_minflt = (long)flt[0];
  ru->ru_majflt = (long)flt[1];
  r.reaper.main_done = 1; /* classify: the window ended as it should */
  r.reaper.main_status = 0;
  r.window_stop = g_interrupted;
  g_interrupted = 0; /* a stop is how a window without --duration ends, not an error */
  static const ms_counters none;
  int rc = write_document(o, &r, r.ctr ? r.ctr : &none, &s0, &s1, -1, -1);
  for (int k = 0; k < nctr; k++) ms_counters_close(&ctrs[k]); /* detached: nothing of ms-run is left */
  msr_args_close(&r.args);
  msr_cpu_close(&r.cpu);
  msr_sites_close(&r.outside);
  msr_sites_close(&r.ustacks);
  free(ctrs);
  free(tids);
  return rc;
}

/* The counters as per-CPU events of the command's own cgroup (msr_cgroup.c): one set per CPU,
 * `*sets`. Returns how many, or 0 with the reason in `why` (nothing left open). */
static int cgroup_counters(const msr_cgroup *cg, int flags, ms_counters **sets, char *why, size_t cap) {
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu < 1 || ncpu > 4096) return 0;
  /* about a dozen events per CPU: many CPUs need more descriptors than the usual soft limit */
  struct rlimit rl;
  if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  ms_counters *c = calloc((size_t)ncpu, sizeof *c);
  int n = 0, ok = c != NULL;
  if (!c) snprintf(why, cap, "out of memory");
  for (long k = 0; ok && k < ncpu; k++) {
    ms_counters_open_cgroup(&c[n], cg->fd, (int)k, flags);
    if (c[n].ev[0].err == ENODEV) { /* an offline CPU */
      ms_counters_close(&c[n]);
      continue;
    }
    n++;
  }
  /* What a task's events open here: the cgroup's must open as many on every CPU. Opened after the
   * cgroup's, so that closing it unregisters no tracepoint (each waits out an RCU grace period). */
  static ms_counters task;
  ms_counters_open(&task, getpid(), flags);
  ms_counters_close(&task);
  for (int k = 0; ok && k < n; k++)
    for (int i = 0; ok && i < c[k].n; i++) {
      const ms_event *e = &c[k].ev[i];
      if (e->fd >= 0 || task.ev[i].err) continue;
      char reason[160];
      snprintf(why, cap, "%s did not open for a cgroup on a CPU: %s", e->def->name,
               ms_event_reason(e, reason, sizeof reason));
      ok = 0;
    }
  if (ok && !n) snprintf(why, cap, "no CPU took a cgroup's events");
  if (!ok || !n) {
    for (int k = 0; k < n; k++) ms_counters_close(&c[k]);
    free(c);
    return 0;
  }
  *sets = c;
  return n;
}

/* The command's events follow it through a cgroup of its own where one can be made and its events
 * open (and the command moved into it), else through inheritance: `r->events_by`, and why not. */
static int any_events(const msr_options *o) {
  return !o->no_counters || o->syscall_args || o->cpu_sample_us || o->outside_sites;
}

/* Before the command is spawned: its own cgroup, and the counters' sets on it (one per CPU, in
 * `*percpu`). Returns how many sets (-1: the cgroup without counters, for the samplers), or 0 where
 * there is none: the reason is in `r->events_why`, nothing is left made or open. */
static int cgroup_before_spawn(const msr_options *o, run_result *r, msr_cgroup *cg, ms_counters **percpu) {
  if (!any_events(o)) return 0;
  if (o->inherited_events) {
    snprintf(r->events_why, sizeof r->events_why, "--inherited-events");
    return 0;
  }
  if (msr_cgroup_make(cg, r->events_why, sizeof r->events_why)) return 0;
  int n = o->no_counters ? -1
                         : cgroup_counters(cg, MS_OPEN_NO_FAULTS | (o->no_syscalls ? MS_OPEN_NO_SYSCALLS : 0), percpu,
                                           r->events_why, sizeof r->events_why);
  if (!n) msr_cgroup_remove(cg);
  return n;
}

/* The command's events follow it through a cgroup of its own where one was made, its events opened
 * (`n` sets: cgroup_before_spawn) and the command is in it (`entered` at its spawn, else moved now),
 * else through inheritance: `r->events_by`, and why not. */
static void open_counters(const msr_options *o, run_result *r, msr_cgroup *cg, ms_counters *ctr, ms_counters **percpu,
                          int n, int entered) {
  if (!any_events(o)) return;
  r->events_by = "inherited";
  if (n) {
    if (!entered && msr_cgroup_enter(cg, r->pid, r->events_why, sizeof r->events_why)) {
      for (int k = 0; k < n; k++) ms_counters_close(&(*percpu)[k]);
      n = 0;
    }
    if (n) {
      r->events_by = "cgroup";
      r->cgroup = cg->path;
      if (n > 0) {
        r->ctr = &(*percpu)[0];
        r->ctrs = *percpu;
        r->nctr = n;
      }
      return;
    }
    free(*percpu);
    *percpu = NULL;
    msr_cgroup_remove(cg);
  }
  if (!o->no_counters) {
    ms_counters_open(
        ctr, r->pid,
        MS_OPEN_INHERIT | MS_OPEN_ENABLE_ON_EXEC | MS_OPEN_NO_FAULTS | (o->no_syscalls ? MS_OPEN_NO_SYSCALLS : 0));
    r->ctr = ctr;
  }
}

static int run_mode(const msr_options *o) {
  int out_fd = open_output(o->stdout_path, "stdout");
  int err_fd = open_output(o->stderr_path, "stderr");
  if (out_fd < 0 || err_fd < 0) {
    perror("ms-run: cannot create output files");
    return 2;
  }
  /* Each run reads its input from the start: the file is opened here, once per run. */
  int in_fd = open(o->stdin_path ? o->stdin_path : "/dev/null", O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) {
    fprintf(stderr, "ms-run: --stdin %s: %s\n", o->stdin_path ? o->stdin_path : "/dev/null", strerror(errno));
    return 2;
  }
  int probe_pipe[2], go_pipe[2], exec_pipe[2];
  if (pipe2(probe_pipe, O_CLOEXEC) || pipe2(go_pipe, O_CLOEXEC) || pipe2(exec_pipe, O_CLOEXEC)) {
    perror("ms-run: pipe");
    return 2;
  }
  /* Orphans of the command are reparented to ms-run, not to init: nothing escapes the run. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  catch_stops();
  /* If memsleuth dies (even SIGKILL), ms-run is told with SIGTERM and ends the command's whole
   * tree as on Ctrl-C, rather than leaving it running. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);

  run_result r;
  memset(&r, 0, sizeof r);
  r.bounded[0] = o->stdout_path ? -1 : out_fd; /* a file the user named keeps all of it */
  r.bounded[1] = o->stderr_path ? -1 : err_fd;
  r.keep_bytes = o->tail_bytes * 2 > (8u << 20) ? o->tail_bytes * 2 : (8u << 20);
  r.tl.max = o->max_points;
  r.tl.interval_ms = o->sample_ms;
  r.tl.pt = calloc(o->max_points + 1, sizeof *r.tl.pt);
  if (!r.tl.pt) {
    perror("ms-run: out of memory");
    return 2;
  }

  ms_counters ctr;
  memset(&ctr, 0, sizeof ctr);
  msr_cgroup cg;
  memset(&cg, 0, sizeof cg);
  cg.fd = -1;
  ms_counters *percpu = NULL;
  int nsets = cgroup_before_spawn(o, &r, &cg, &percpu), entered = 0;
  msr_tree_prepare(); /* the machine's processes noted as outside now: none read at the first tick */
  r.pid = spawn(o, nsets ? cg.fd : -1, &entered, in_fd, out_fd, err_fd, probe_pipe[1], go_pipe[0], exec_pipe[1]);
  close(in_fd);
  if (r.pid > 0) g_command_pgid = r.pid; /* spawn's child makes itself a group leader */
  if (r.pid < 0) {
    perror("ms-run: fork");
    for (int k = 0; nsets > 0 && k < nsets; k++) ms_counters_close(&percpu[k]);
    msr_cgroup_remove(&cg);
    return 2;
  }
  r.reaper.main = r.pid;
  setpgid(r.pid, r.pid); /* also from the parent: no race with a kill of the group */
  close(probe_pipe[1]);
  close(go_pipe[0]);
  close(exec_pipe[1]);

  open_counters(o, &r, &cg, &ctr, &percpu, nsets, entered);
  msr_targets command = {&r.pid, 1, 0, cg.fd};
  if (o->syscall_args) msr_args_open(&r.args, &command, o->args_every, o->fault_share);
  if (o->cpu_sample_us) {
    msr_cpu_open(&r.cpu, &command, o->cpu_sample_us * 1000u, o->preload);
    msr_cpu_name_later(&r.cpu); /* the command exists: nothing is forked after this thread starts */
    r.cpu.faults = &r.args;
  }
  if (o->outside_sites) msr_sites_open(&r.outside, &command, o->outside_sites, 0, o->outside_dir, o->outside_skip);
  /* libmssites' faults switched with the traced ones: where they are traced in a share of the ticks. */
  if (o->outside_dir && o->outside_skip && r.args.fault_share && r.args.nfault)
    msr_inside_open(&r.inside, o->outside_dir, r.pid);
  if (o->cpu_sample_us && o->cpu_stacks_dir) open_cpu_stacks(&r.ustacks, &command, o);
  tl_columns(&r.tl, r.ctr, &r.args, 1);
  ms_snapshot s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);

  for (int k = 0; k < r.nctr; k++) ms_counters_enable(&percpu[k]);
  r.tasks0 = msr_machine_tasks();
  uint64_t t0 = msr_now_ns();
  (void)!write(go_pipe[1], "g", 1);
  close(go_pipe[1]);
  if (read(exec_pipe[0], &r.exec_errno, sizeof r.exec_errno) != sizeof r.exec_errno) r.exec_errno = 0;
  close(exec_pipe[0]);

  supervise(o, &r, probe_pipe[0], t0);
  r.tasks1 = msr_machine_tasks();
  if (r.ctr) read_counters(&r, &s1);
  drain_samplers(&r);
  int rc = write_document(o, &r, r.ctr ? r.ctr : &ctr, &s0, &s1, out_fd, err_fd);
  ms_counters_close(&ctr);
  for (int k = 0; k < r.nctr; k++) ms_counters_close(&percpu[k]);
  free(percpu);
  msr_cgroup_remove(&cg);
  msr_args_close(&r.args);
  msr_cpu_close(&r.cpu);
  msr_sites_close(&r.outside);
  msr_sites_close(&r.ustacks);
  msr_inside_close(&r.inside);
  if (rc) return rc;
  return g_interrupted ? 130 : 0;
}

int main(int argc, char **argv) {
  msr_options o;
  if (msr_parse_options(argc, argv, &o)) {
    fputs("ms-run: see ms-run --help\n", stderr);
    return 2;
  }
  switch (o.mode) {
    case MSR_HELP:
      msr_usage(stdout);
      return 0;
    case MSR_EVENTS:
      return events_mode();
    case MSR_HOLD_EVENTS:
      return hold_events(o.syscall_args);
    case MSR_PRELOAD_CHECK:
      return msr_preload_check(&o);
    case MSR_ATTACH:
      return attach_mode(&o);
    case MSR_RUN:
      break;
  }
  return run_mode(&o);
}
