/* libmssites: where in the code the page faults and the memory system calls come from, sampled
 * inside the program in memsleuth's explaining run (never in a measured one).
 *
 * MEMSLEUTH_SITES="page-faults=P,madvise=P,..." names the events and their periods (one sample
 * every P events, chosen from the measured runs' counts so that each event gets a few hundred
 * samples whatever the program's length); MEMSLEUTH_SITES_OUT is the folder for the documents.
 *
 * Each event is a perf event of the process (inherited by its threads only, removed at exec: the
 * preloaded library opens it again in the new image, and a child forked by fork() opens its own
 * as it starts) with `sigtrap`: the kernel sends the thread that caused the P-th event a SIGTRAP
 * as it returns to user space, and the handler unwinds that thread's stack there with the C
 * runtime's unwinder (.eh_frame, so no frame pointers are needed). One process, one perf start-up:
 * nothing outside the program runs.
 *
 * A child that is about to exec must never get a SIGTRAP it cannot take. posix_spawn and vfork
 * children reset every handled signal to SIG_DFL (glibc does it inside, past any interposer) and
 * fault on their new stack: an inherited event killed all 200 of 200 /bin/true children of a
 * posix_spawn loop here, so children of a clone without CLONE_THREAD inherit nothing
 * (inherit_thread). fork() children that reset their handlers before exec (git does, for every
 * signal) keep the sampler's: signal() and sigaction() on SIGTRAP are taken here, the program's
 * disposition kept for the SIGTRAPs that are not the sampler's (chain) and reported back as its
 * own; `git clone --no-local`'s upload-pack child died of SIGTRAP before (git: "Could not read
 * from remote repository").
 * Stacks are kept as (event, frames) -> count and written once at exit (or _exit: ms_dump.h), a
 * line of $MEMSLEUTH_SITES_OUT/sites.jsonl, with the executable mappings (named in symbols.py).
 *
 * A SIGTRAP that is not the sampler's goes to the program's previous disposition. Needs kernel
 * 5.13 or later (sigtrap); without it, or without permission, the document says which event did
 * not open and why, and memsleuth falls back to perf record. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "ms_dump.h"
#include "ms_events.h"

#define MAX_EVENTS 12
#define MAX_FRAMES 48
#define STACK_SLOTS 8192        /* distinct (event, stack) pairs kept per process */
#define TRAP_PERF_CODE 6        /* si_code of a perf event's SIGTRAP (TRAP_PERF) */
#define TRAP_PERF_FLAG_ASYNC 1u /* delivered late (SIGTRAP was blocked): not the event's context */

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "libmssites reads the interrupted pc from the signal context: x86-64 and AArch64 only"
#endif

/* The kernel's siginfo layout for a perf SIGTRAP on 64-bit targets (si_perf_data, si_perf_type,
 * si_perf_flags: glibc 2.36's headers do not name them yet). */
typedef struct {
  int signo, errno_, code, pad;
  void *addr;
  unsigned long data;
  uint32_t type, flags;
} perf_siginfo;

typedef struct {
  char name[32];
  long period;
  int fd, err;
  char why[64];
} event;

typedef struct {
  uint64_t hash;
  uint32_t gen; /* the slot is empty unless it is g_gen: a forked child starts a generation */
  int ev, nframes;
  uint64_t count;
  uintptr_t frames[MAX_FRAMES];
} stack;

static event g_events[MAX_EVENTS];
static int g_nevents;
static stack g_stacks[STACK_SLOTS];
/* A forked child bumps it instead of clearing the table: clearing would fault in ~1.7 MiB of pages
 * in every child, which this very sampler would then report as the child's page faults. */
static uint32_t g_gen = 1;
/* The slots in use this generation, in the order taken: the report reads these only, since reading
 * the whole table would fault its untouched pages in (in every forked child, too). */
static uint16_t g_used[STACK_SLOTS];
static uint32_t g_nused;
static atomic_flag g_lock = ATOMIC_FLAG_INIT;
static _Atomic uint64_t g_samples, g_async, g_dropped, g_unwound_none;
/* The program's own SIGTRAP disposition (what it set, or had before the sampler's went in). */
static struct sigaction g_previous;
static int g_trap_installed; /* the sampler's handler is in: SIGTRAP's disposition is taken here */
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction_fn;
static char g_out[4096];
static int g_ready;
/* MEMSLEUTH_SITES_SWITCH=SHARE: ms-run switches the page-faults event on and off with the ticks in
 * which it traces the faults (msr_inside.c), on in about SHARE of them; the event is sampled SHARE
 * times as often, opened in the state ms-run wrote for the tick under way, and its fd is written
 * as a line of OUT/.switch/fds for ms-run to take. */
static double g_switch_share;
static int g_switch_on = 1;

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static void lock(void) {
  while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire)) {}
}

static void unlock(void) { atomic_flag_clear_explicit(&g_lock, memory_order_release); }

static void keep(int ev, const uintptr_t *frames, int n) {
  uint64_t h = mix(0x9e3779b97f4a7c15ULL ^ (uint64_t)ev);
  for (int i = 0; i < n; i++) h = mix(h ^ frames[i]);
  lock();
  for (uint32_t k = 0; k < STACK_SLOTS; k++) {
    stack *s = &g_stacks[(h + k) & (STACK_SLOTS - 1)];
    if (s->gen == g_gen && s->hash == h && s->ev == ev && s->nframes == n) {
      s->count++;
      unlock();
      return;
    }
    if (s->gen != g_gen) {
      g_used[g_nused++] = (uint16_t)((h + k) & (STACK_SLOTS - 1));
      s->gen = g_gen;
      s->hash = h;
      s->ev = ev;
      s->nframes = n;
      s->count = 1;
      memcpy(s->frames, frames, (size_t)n * sizeof *frames);
      unlock();
      return;
    }
  }
  unlock();
  atomic_fetch_add(&g_dropped, 1);
}

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (!real_sigaction_fn) real_sigaction_fn = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
  if (!real_sigaction_fn) {
    errno = ENOSYS;
    return -1;
  }
  return real_sigaction_fn(sig, act, old);
}

static void chain(int sig, siginfo_t *si, void *uc) {
  /* Not ours: what the program would have had without the sampler. */
  struct sigaction prev = g_previous;
  if (prev.sa_flags & SA_RESETHAND) { /* a one-shot handler: SIG_DFL from now on */
    memset(&g_previous, 0, sizeof g_previous);
    g_previous.sa_handler = SIG_DFL;
  }
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, si, uc);
  } else if (prev.sa_handler == SIG_DFL) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(sig, &dfl, NULL);
    raise(sig); /* blocked in this handler: taken, with its default action, as it returns */
  } else if (prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
}

/* ---- SIGTRAP's disposition, as the program sets and reads it ------------------------------ */

MS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (sig != SIGTRAP || !g_trap_installed) return real_sigaction(sig, act, old);
  struct sigaction was = g_previous;
  if (act) g_previous = *act;
  if (old) *old = was;
  return 0;
}

static void (*handler_of(const struct sigaction *a))(int) {
  return a->sa_flags & SA_SIGINFO ? (void (*)(int))(void *)a->sa_sigaction : a->sa_handler;
}

typedef void (*handler_fn)(int);
typedef handler_fn (*signal_fn)(int, handler_fn);

static handler_fn set_handler(int sig, handler_fn h, int flags, const char *name, signal_fn *real) {
  if (sig != SIGTRAP || !g_trap_installed) {
    if (!*real) *real = (signal_fn)dlsym(RTLD_NEXT, name);
    if (*real) return (*real)(sig, h);
    errno = ENOSYS;
    return SIG_ERR;
  }
  if (h == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  handler_fn was = handler_of(&g_previous);
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = h;
  a.sa_flags = flags;
  g_previous = a;
  return was;
}

/* glibc's signal() has BSD semantics (the handler stays, calls restart); sysv_signal() resets it
 * after one signal and does not block it in its handler. */
MS_EXPORT handler_fn signal(int sig, handler_fn h) {
  static signal_fn real;
  return set_handler(sig, h, SA_RESTART, "signal", &real);
}
MS_EXPORT handler_fn bsd_signal(int sig, handler_fn h) {
  static signal_fn real;
  return set_handler(sig, h, SA_RESTART, "bsd_signal", &real);
}
MS_EXPORT handler_fn sysv_signal(int sig, handler_fn h) {
  static signal_fn real;
  return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, "sysv_signal", &real);
}
MS_EXPORT handler_fn __sysv_signal(int sig, handler_fn h) {
  static signal_fn real;
  return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, "__sysv_signal", &real);
}

static void on_trap(int sig, siginfo_t *si, void *ucv) {
  if (si->si_code != TRAP_PERF_CODE) {
    chain(sig, si, ucv);
    return;
  }
  int saved = errno;
  const perf_siginfo *p = (const perf_siginfo *)(const void *)si;
  if (p->flags & TRAP_PERF_FLAG_ASYNC) {
    atomic_fetch_add(&g_async, 1);
    errno = saved;
    return;
  }
  ucontext_t *uc = ucv;
  uintptr_t frames[MAX_FRAMES];
#if defined(__x86_64__)
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
#else
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc, fp = (uintptr_t)uc->uc_mcontext.regs[29];
#endif
  int n = ms_unwind(frames, MAX_FRAMES, pc, fp);
  if (n <= 1) atomic_fetch_add(&g_unwound_none, 1);
  int ev = (int)p->data;
  if (ev >= 0 && ev < g_nevents && n > 0) {
    atomic_fetch_add(&g_samples, 1);
    keep(ev, frames, n);
  }
  errno = saved;
}

static int open_event(event *e, int index) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  if (!strcmp(e->name, "page-faults")) {
    /* The minor faults (the period is sized from their count): ~100-115 ns a fault here while on,
     * the only fault event open (msr_inside.h), and ms-run switches it with the ticks whose faults
     * it traces. Major faults are not sampled. */
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_PAGE_FAULTS_MIN;
  } else {
    long id = ms_tracepoint_id(e->name, e->why, sizeof e->why);
    if (id < 0) return (int)id;
    a.type = PERF_TYPE_TRACEPOINT;
    a.config = (uint64_t)id;
  }
  /* No PERF_SAMPLE_PERIOD: with it the kernel overflows a tracepoint on every hit. */
  a.sample_period = (uint64_t)e->period;
  if (g_switch_share && a.type == PERF_TYPE_SOFTWARE) { /* on in a share of the ticks: as many samples */
    double p = (double)e->period * g_switch_share;
    a.sample_period = p >= 1 ? (uint64_t)(p + 0.5) : 1;
    a.disabled = !g_switch_on;
  }
  a.sigtrap = 1;
  a.remove_on_exec = 1; /* the kernel asks it of sigtrap; the new image opens its own */
  a.inherit = 1;
  a.inherit_thread = 1; /* threads only: a child about to exec must not get the sampler's SIGTRAP */
  a.sig_data = (uint64_t)index;
  a.exclude_hv = 1;
  int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0 && errno == EACCES && a.type == PERF_TYPE_SOFTWARE) {
    a.exclude_kernel = 1; /* unprivileged: the faults taken in user mode only */
    fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  }
  if (fd < 0) {
    int err = errno;
    snprintf(e->why, sizeof e->why, "%s",
             err == EINVAL ? "sigtrap sampling not supported (kernel before 5.13?)" : strerror(err));
    return -err;
  }
  return fd;
}

static void parse_events(const char *spec) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", spec);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok && g_nevents < MAX_EVENTS; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    long period = eq ? atol(eq + 1) : 1;
    if (eq) *eq = 0;
    if (!*tok || strlen(tok) >= sizeof g_events[0].name) continue;
    event *e = &g_events[g_nevents++];
    snprintf(e->name, sizeof e->name, "%s", tok);
    e->period = period > 0 ? period : 1;
    e->fd = -1;
  }
}

static void write_report(void);

/* The state ms-run wrote for the tick under way; no file (ms-run cannot switch): not switched. */
static void switch_read(void) {
  const char *share = getenv("MEMSLEUTH_SITES_SWITCH");
  double s = share ? atof(share) : 0;
  if (!(s > 0 && s < 1)) return;
  char path[4200], c = 0;
  snprintf(path, sizeof path, "%s/.switch/state", g_out);
  int saved = errno;
  int f = open(path, O_RDONLY | O_CLOEXEC);
  if (f >= 0) {
    if (pread(f, &c, 1, 0) == 1 && (c == '0' || c == '1')) {
      g_switch_share = s;
      g_switch_on = c == '1';
    }
    close(f);
  }
  errno = saved;
}

/* "PID FD", the page-faults event's fd, a line of OUT/.switch/fds for ms-run to take (one small
 * O_APPEND write: whole, and no file per process; msr_inside.h). */
static void switch_note(void) {
  int fd = -1;
  for (int i = 0; i < g_nevents; i++)
    if (!strcmp(g_events[i].name, "page-faults")) fd = g_events[i].fd;
  if (!g_switch_share || fd < 0) return;
  int saved = errno; /* in a forked child, before fork returns to the program */
  char path[4200], line[40];
  snprintf(path, sizeof path, "%s/.switch/fds", g_out);
  int f = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (f >= 0) {
    int n = snprintf(line, sizeof line, "%d %d\n", (int)getpid(), fd);
    (void)!write(f, line, (size_t)n);
    close(f);
  }
  errno = saved;
}

/* Why no event may open in this process, or NULL. Under valgrind (its preloads in LD_PRELOAD) the
 * kernel's SIGTRAP reaches valgrind's own code, which takes it as a fatal signal and ends the run
 * ("VALGRIND INTERNAL ERROR: Valgrind received a signal 5 (SIGTRAP) - exiting"). */
static const char *refused(void) {
  const char *pre = getenv("LD_PRELOAD");
  return pre && strstr(pre, "vgpreload") ? "under valgrind, which takes a SIGTRAP as fatal" : NULL;
}

static void open_events(void) {
  const char *why = refused();
  for (int i = 0; i < g_nevents; i++) {
    if (why) {
      g_events[i].fd = -1;
      snprintf(g_events[i].why, sizeof g_events[i].why, "%s", why);
      continue;
    }
    int fd = open_event(&g_events[i], i);
    g_events[i].fd = fd >= 0 ? fd : -1;
    g_events[i].err = fd >= 0 ? 0 : -fd;
  }
}

static void on_fork_child(void) {
  /* A forked child inherits no event (inherit_thread): its fds are its parent's events. It opens
   * its own, in the state ms-run wrote for the tick under way, and its samples start from nothing. */
  int saved = errno;
  for (int i = 0; i < g_nevents; i++)
    if (g_events[i].fd >= 0) close(g_events[i].fd);
  switch_read();
  open_events();
  errno = saved;
  ms_dump_forked();
  g_gen++;
  g_nused = 0;
  atomic_store(&g_samples, 0);
  atomic_store(&g_async, 0);
  atomic_store(&g_dropped, 0);
  atomic_store(&g_unwound_none, 0);
  atomic_flag_clear(&g_lock);
  switch_note(); /* ms-run switches the child's page-faults event too */
}

__attribute__((constructor)) static void sites_init(void) {
  const char *spec = getenv("MEMSLEUTH_SITES");
  const char *out = getenv("MEMSLEUTH_SITES_OUT");
  if (!spec || !out || !*out) return;
  snprintf(g_out, sizeof g_out, "%s", out);
  parse_events(spec);
  switch_read();
  /* The unwinder loads and caches on first use: do it here, not in a signal handler. */
  uintptr_t frames[MAX_FRAMES];
  ms_unwind(frames, MAX_FRAMES, 0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  real_sigaction(SIGTRAP, &sa, &g_previous);
  g_trap_installed = 1;
  open_events();
  switch_note();
  pthread_atfork(NULL, NULL, on_fork_child);
  ms_dump_at_exit(write_report);
  g_ready = 1;
}

static void write_report(void) {
  if (!g_ready) return;
  /* No sample may arrive on this thread while it holds the table (one that does is taken as late,
   * g_async). The events stay on: the process's other threads may run on until it ends. */
  sigset_t trap, old;
  sigemptyset(&trap);
  sigaddset(&trap, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &trap, &old);
  static char buf[1 << 12]; /* once per process */
  ms_doc doc;
  FILE *f = ms_dump_open(&doc, buf, sizeof buf);
  if (!f) {
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return;
  }
  char comm[64] = "";
  char cbuf[256];
  FILE *c = ms_dump_fopen("/proc/self/comm", "re", cbuf, sizeof cbuf);
  if (c) {
    if (fgets(comm, sizeof comm, c)) comm[strcspn(comm, "\n")] = 0;
    fclose(c);
  }
  fprintf(f, "{\"pid\":%d,\"comm\":", (int)getpid());
  ms_dump_json_str(f, comm);
  fprintf(f, ",\"samples\":%llu,\"async\":%llu,\"dropped\":%llu,\"unwound_none\":%llu,\"events\":[",
          (unsigned long long)atomic_load(&g_samples), (unsigned long long)atomic_load(&g_async),
          (unsigned long long)atomic_load(&g_dropped), (unsigned long long)atomic_load(&g_unwound_none));
  for (int i = 0; i < g_nevents; i++) {
    event *e = &g_events[i];
    fprintf(f, "%s{\"name\":", i ? "," : "");
    ms_dump_json_str(f, e->name);
    fprintf(f, ",\"period\":%ld,\"opened\":%s", e->period, e->fd >= 0 ? "true" : "false");
    if (g_switch_share && !strcmp(e->name, "page-faults")) fprintf(f, ",\"switched\":%.4f", g_switch_share);
    if (e->fd < 0) {
      fputs(",\"why\":", f);
      ms_dump_json_str(f, e->why[0] ? e->why : strerror(e->err));
    }
    fputc('}', f);
  }
  fputs("],\"stacks\":[", f);
  lock();
  for (uint32_t u = 0; u < g_nused; u++) {
    stack *s = &g_stacks[g_used[u]];
    fprintf(f, "%s[%d,%llu,[", u ? "," : "", s->ev, (unsigned long long)s->count);
    for (int i = 0; i < s->nframes; i++) fprintf(f, "%s%lu", i ? "," : "", (unsigned long)s->frames[i]);
    fputs("]]", f);
  }
  unlock();
  fputc(']', f);
  ms_dump_maps(f, g_nused > 0);
  fputs("}", f);
  ms_dump_close(f, &doc, g_out, "sites");
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}
