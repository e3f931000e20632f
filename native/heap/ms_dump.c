/* Shared by libmsheap and libmssites: see ms_dump.h. */
#define _GNU_SOURCE
#include "ms_dump.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

void ms_dump_maps(FILE *f) {
  FILE *m = fopen("/proc/self/maps", "re");
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

FILE *ms_dump_open(const char *dir, const char *prefix, char *path, int pathlen) {
  char tmp[4400];
  snprintf(path, (size_t)pathlen, "%s/%s-%d.json", dir, prefix, (int)getpid());
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  return fopen(tmp, "we");
}

void ms_dump_close(FILE *f, const char *path) {
  char tmp[4400];
  fclose(f);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  rename(tmp, path);
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
