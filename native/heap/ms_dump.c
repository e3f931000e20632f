/* Shared by libmsheap and libmssites: see ms_dump.h. */
#define _GNU_SOURCE
#include "ms_dump.h"
#include "ms_json.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <unwind.h>

void ms_dump_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

FILE *ms_dump_fopen(const char *path, const char *mode, char *buf, size_t size) {
  FILE *f = fopen(path, mode);
  if (f) setvbuf(f, buf, _IOFBF, size);
  return f;
}

void ms_dump_maps(FILE *f, int needed) {
  static char buf[8192]; /* at the report, once per process: not on a thread's stack, which may be small */
  FILE *m = needed ? ms_dump_fopen("/proc/self/maps", "re", buf, sizeof buf) : NULL;
  fputs(",\"maps\":[", f);
  if (m) {
    char line[1024];
    int first = 1;
    while (fgets(line, sizeof line, m)) {
      unsigned long lo, hi, off;
      char perms[8], path[900];
      path[0] = 0;
      if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %899[^\n]", &lo, &hi, perms, &off, path) >= 4 && perms[2] == 'x' &&
          path[0] == '/') {
        fprintf(f, "%s[%lu,%lu,%lu,", first ? "" : ",", lo, hi, off);
        ms_dump_json_str(f, path);
        fputc(']', f);
        first = 0;
      }
    }
    fclose(m);
  }
  fputc(']', f);
}

static ssize_t doc_write(void *cookie, const char *data, size_t n) {
  ms_doc *d = cookie;
  if (d->failed) return -1;
  if (d->len + n > d->cap) {
    size_t cap = d->cap ? d->cap : 1 << 16;
    while (cap < d->len + n) cap *= 2;
    /* By system call: libmsheap interposes mmap (ms_own.c), and these pages are not the program's. */
    void *p = d->text
                  ? (void *)syscall(SYS_mremap, d->text, d->cap, cap, MREMAP_MAYMOVE)
                  : (void *)syscall(SYS_mmap, NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      d->failed = 1;
      return -1;
    }
    d->text = p;
    d->cap = cap;
  }
  memcpy(d->text + d->len, data, n);
  d->len += n;
  return (ssize_t)n;
}

FILE *ms_dump_open(ms_doc *doc, char *buf, size_t size) {
  memset(doc, 0, sizeof *doc);
  cookie_io_functions_t io = {.write = doc_write};
  FILE *f = fopencookie(doc, "w", io);
  if (f) setvbuf(f, buf, _IOFBF, size);
  return f;
}

void ms_dump_close(FILE *f, ms_doc *doc, const char *dir, const char *prefix) {
  int saved = errno;
  fclose(f);
  if (doc->text && !doc->failed) { /* the line's newlines are msj_append_line's */
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.jsonl", dir, prefix);
    msj_append_line(path, doc->text, doc->len);
  }
  if (doc->text) syscall(SYS_munmap, doc->text, doc->cap);
  memset(doc, 0, sizeof *doc);
  errno = saved;
}

typedef void (*exit_fn)(int);
static void (*g_report)(void);
static _Atomic int g_reported;
static pid_t g_pid;                    /* the process the document is of */
static exit_fn real__exit, real__Exit; /* resolved at start: a vfork child must not call dlsym */

static void report_once(void) {
  if (g_report && getpid() == g_pid && !atomic_exchange(&g_reported, 1)) g_report();
}

void ms_dump_at_exit(void (*report)(void)) {
  g_report = report;
  g_pid = getpid();
  real__exit = (exit_fn)dlsym(RTLD_NEXT, "_exit");
  real__Exit = (exit_fn)dlsym(RTLD_NEXT, "_Exit");
  atexit(report_once);
}

void ms_dump_forked(void) {
  g_pid = getpid();
  atomic_store(&g_reported, 0);
}

static __attribute__((noreturn)) void exit_now(exit_fn real, int status) {
  report_once();
  if (real) real(status);
  for (;;) syscall(SYS_exit_group, status);
}

/* exit() reaches the kernel through glibc's own _exit, not these: its document came from atexit.
 * With both libraries preloaded, the first one's _exit calls the next one's (RTLD_NEXT). */
MS_EXPORT void _exit(int status) { exit_now(real__exit, status); }
MS_EXPORT void _Exit(int status) { exit_now(real__Exit, status); }

void ms_dump_quiet(sigset_t *old) {
  sigset_t trap;
  sigemptyset(&trap);
  sigaddset(&trap, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &trap, old);
}

void ms_dump_loud(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* ---- stacks ---------------------------------------------------------------------------------- */

#if defined(__x86_64__)
#define FP_REG 6 /* rbp in DWARF's numbering */
#elif defined(__aarch64__)
#define FP_REG 29
#endif

/* libgcc's lookup of a pc's unwind information (unwind-dw2-fde.h, exported by libgcc_s). */
struct dwarf_eh_bases {
  void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

typedef struct {
  uintptr_t *frames;
  int n, max, started;
  uintptr_t pc, last_ip, last_fp;
} walk;

static _Unwind_Reason_Code step(struct _Unwind_Context *c, void *arg) {
  walk *w = arg;
  uintptr_t ip = (uintptr_t)_Unwind_GetIP(c);
  if (!w->started) {
    /* A signal's frames come first: the program's stack starts at the interrupted pc, which is
     * exact (not a return address), so it is kept + 1 like the rest. */
    if (ip != w->pc) return _URC_NO_REASON;
    w->started = 1;
    ip += 1;
  }
  if (!ip || w->n >= w->max) return _URC_END_OF_STACK;
  w->frames[w->n++] = ip;
  w->last_ip = ip;
  w->last_fp = (uintptr_t)_Unwind_GetGR(c, FP_REG);
  return _URC_NO_REASON;
}

/* Reads `len` bytes of this process at `addr` without faulting on an address that is not mapped. */
static int safe_read(uintptr_t addr, void *to, size_t len) {
  struct iovec local = {to, len}, remote = {(void *)addr, len};
  return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) == (long)len;
}

/* The frame pointers' chain, read a window at a time: each read copies from the next frame to the
 * end of its FP_WINDOW-aligned block (within one page, or two where the frame's pair straddles a
 * page), so a chain costs one syscall per block it crosses, not one per frame. Read a frame at a
 * time, a JIT's frames made process_vm_readv 4.3% of an explaining run's samples (node). */
#define FP_WINDOW 2048
static int fp_continue(uintptr_t fp, uintptr_t *frames, int n, int max) {
  uintptr_t window[FP_WINDOW / sizeof(uintptr_t) + 2];
  uintptr_t lo = 0, hi = 0; /* the process's bytes [lo, hi) copied in `window` */
  while (n < max && fp && !(fp & 7)) {
    if (fp < lo || fp + 2 * sizeof(uintptr_t) > hi) {
      uintptr_t end = (fp + 2 * sizeof(uintptr_t) + FP_WINDOW - 1) & ~(uintptr_t)(FP_WINDOW - 1);
      if (!safe_read(fp, window, end - fp)) break;
      lo = fp, hi = end;
    }
    const uintptr_t *pair = window + (fp - lo) / sizeof(uintptr_t); /* the caller's frame pointer, then
                                                                       this frame's return address */
    if (!pair[1]) break;
    frames[n++] = pair[1];
    if (pair[0] <= fp || pair[0] - fp > (1u << 20)) break; /* a caller's frame lies above, and near */
    fp = pair[0];
  }
  return n;
}

static int no_unwind_info(uintptr_t ret) {
  struct dwarf_eh_bases bases;
  return ret > 1 && _Unwind_Find_FDE((void *)(ret - 1), &bases) == NULL;
}

int ms_unwind(uintptr_t *frames, int max, uintptr_t pc, uintptr_t pc_fp) {
  walk w = {frames, 0, max, pc == 0, pc, 0, 0};
  _Unwind_Backtrace(step, &w);
  if (!w.started) { /* the unwinder could not cross the signal frame: the pc, then its frame pointers */
    if (max < 1) return 0;
    frames[0] = pc + 1;
    return no_unwind_info(pc + 1) ? fp_continue(pc_fp, frames, 1, max) : 1;
  }
  if (w.n && w.n < max && no_unwind_info(w.last_ip)) return fp_continue(w.last_fp, frames, w.n, max);
  return w.n;
}
