/* ms-run: measures one command from outside and writes one JSON document.
 *
 *   ms-run [options] -- CMD ARGS...
 *
 * Counters are opened on the forked child before it execs (enable_on_exec, inherit), so they
 * cover the command and every thread and child it starts, and nothing of ms-run itself. The
 * child's stdout/stderr go to files (their tails are kept), never into the JSON. The probe's
 * region lines and the malloc-resolve line arrive on a pipe named by MEMSLEUTH_FD. Usage and
 * options: `ms-run --help`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ms_events.h"
#include "ms_json.h"

#define MAX_ENV 64
#define MAX_SAMPLES 4096

typedef struct {
  const char *out, *preload, *expect_malloc, *checker, *stdout_path, *stderr_path;
  double timeout_s;
  uint64_t mem_limit_bytes;
  int oom_exit_code;
  int tail_bytes;
  int sample_ms;
  int no_counters;
  const char *env[MAX_ENV];
  int nenv;
  char **argv;
} options;

static volatile sig_atomic_t g_interrupted;
static void on_signal(int sig) { g_interrupted = sig; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f) {
  fputs("usage: ms-run [options] -- CMD ARGS...\n"
        "  --out FILE           write the JSON document here (default: stdout)\n"
        "  --timeout SECONDS    kill the command's process group after this long (status timeout)\n"
        "  --mem-limit BYTES    kill it when its resident memory exceeds this (status oom)\n"
        "  --preload PATH       LD_PRELOAD this allocator\n"
        "  --expect-malloc PATH the object malloc must resolve to, else status preload-failed\n"
        "  --checker PATH       the malloc-resolve library (default: libmscheck.so beside ms-run)\n"
        "  --env KEY=VALUE      set in the command's environment (repeatable)\n"
        "  --oom-exit-code N    an exit with this code means the command ran out of memory\n"
        "  --stdout FILE, --stderr FILE   keep the command's output (default: tails only)\n"
        "  --tail BYTES         how much of each output to keep in the JSON (default 4096)\n"
        "  --sample-ms N        RSS sampling interval (default 10)\n"
        "  --no-counters        open no perf events (to measure the instrumentation's cost)\n"
        "  --events             print which events open on this machine, then exit\n"
        "  --hold-events        keep the syscall tracepoints registered until stdin closes\n"
        "  --dlopen-check PATH  report whether PATH loads as a shared object and defines malloc\n",
        f);
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = v;
  return 0;
}

/* ---- JSON helpers for the document ---- */

static void put_events_json(ms_json *j, const ms_counters *c, const ms_snapshot *s0, const ms_snapshot *s1) {
  char why[160];
  msj_obj_begin(j, "counters");
  for (int i = 0; i < c->n; i++) {
    const ms_event *e = &c->ev[i];
    if (e->def->kind == MS_KIND_SYSCALL || e->fd < 0) continue;
    double v;
    if (ms_scale(ms_reading_delta(s0->r[i], s1->r[i]), &v) == MS_NOT_COUNTED) msj_null(j, e->def->name);
    else msj_dbl(j, e->def->name, v);
  }
  msj_obj_end(j);
  msj_obj_begin(j, "syscalls");
  for (int i = 0; i < c->n; i++) {
    const ms_event *e = &c->ev[i];
    if (e->def->kind != MS_KIND_SYSCALL || e->fd < 0) continue;
    double v;
    ms_scale(ms_reading_delta(s0->r[i], s1->r[i]), &v);
    msj_u64(j, e->def->name, (uint64_t)(v + 0.5));
  }
  msj_obj_end(j);
  msj_obj_begin(j, "running_fraction");
  for (int i = 0; i < c->n; i++) {
    if (c->ev[i].fd < 0) continue;
    ms_reading d = ms_reading_delta(s0->r[i], s1->r[i]);
    if (d.running_ns < d.enabled_ns) msj_dbl(j, c->ev[i].def->name, ms_running_fraction(d));
  }
  msj_obj_end(j);
  msj_obj_begin(j, "unsupported");
  for (int i = 0; i < c->n; i++)
    if (c->ev[i].fd < 0) msj_str(j, c->ev[i].def->name, ms_event_reason(&c->ev[i], why, sizeof why));
  msj_obj_end(j);
}

static int events_mode(void) {
  ms_counters c;
  ms_counters_open(&c, 0, 0);
  ms_counters_enable(&c);
  ms_snapshot s0, s1;
  ms_counters_read(&c, &s0);
  ms_counters_read(&c, &s1);
  char buf[8192];
  ms_json j;
  msj_init(&j, buf, sizeof buf);
  msj_obj_begin(&j, NULL);
  msj_str(&j, "tracefs", ms_tracefs_events_dir());
  msj_i64(&j, "grouped", c.grouped);
  msj_arr_begin(&j, "opened");
  for (int i = 0; i < c.n; i++) if (c.ev[i].fd >= 0) msj_str(&j, NULL, c.ev[i].def->name);
  msj_arr_end(&j);
  put_events_json(&j, &c, &s0, &s1);
  msj_obj_end(&j);
  puts(buf);
  ms_counters_close(&c);
  return 0;
}

/* Closing the last perf event of a tracepoint unregisters it, and the kernel then waits for an
 * RCU grace period: about 40 ms per syscall tracepoint on the machines we measured, paid by the
 * measured process at exit. A holder that keeps one event open per tracepoint for the length of
 * a whole comparison makes every other close cheap (the tracepoint stays registered). */
static int hold_events(void) {
  ms_counters c;
  ms_counters_open(&c, 0, MS_OPEN_NO_HARDWARE);
  puts("ready");
  fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {}
  ms_counters_close(&c);
  return 0;
}

static int dlopen_check(const char *path) {
  /* Run in ms-run's own short-lived process, never in the caller's: loading an allocator runs
   * its constructors. RTLD_LOCAL so that the library is looked at, not interposed. */
  char buf[8192];
  ms_json j;
  msj_init(&j, buf, sizeof buf);
  msj_obj_begin(&j, NULL);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    msj_raw(&j, "\"ok\":false");
    j.need_comma = 1;
    const char *err = dlerror();
    msj_str(&j, "error", err ? err : "dlopen failed");
  } else {
    msj_raw(&j, "\"ok\":true");
    j.need_comma = 1;
    /* dlsym on a handle also searches the library's dependencies (libc), so malloc is the
     * library's own only when dladdr places it in the library's own file. */
    void *m = dlsym(h, "malloc");
    Dl_info mi;
    struct link_map *lm = NULL;
    int own = m && dladdr(m, &mi) && mi.dli_fname && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm &&
              lm->l_name && strcmp(mi.dli_fname, lm->l_name) == 0;
    msj_raw(&j, own ? ",\"defines_malloc\":true" : ",\"defines_malloc\":false");
  }
  msj_obj_end(&j);
  puts(buf);
  return h ? 0 : 1;
}

/* ---- the run ---- */

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

static void drain(int fd, sbuf *b) {
  char tmp[65536];
  for (;;) {
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n > 0) { sb_add(b, tmp, (size_t)n); continue; }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

static uint64_t rss_kb_of(pid_t pid) {
  char p[64], buf[128];
  snprintf(p, sizeof p, "/proc/%d/statm", (int)pid);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long size = 0, resident = 0;
  if (sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024u;
}

/* The last `max` bytes of a file, for the JSON. */
static char *file_tail(int fd, int max, size_t *len) {
  struct stat st;
  *len = 0;
  if (fd < 0 || fstat(fd, &st) < 0) return NULL;
  off_t start = st.st_size > max ? st.st_size - max : 0;
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

/* Extracts "object":"..." from the malloc-resolve line (written by libmscheck, which escapes
 * only quote and backslash). */
static void find_resolved(const char *lines, char *out, size_t cap) {
  out[0] = 0;
  const char *p = strstr(lines, "\"type\":\"malloc-resolve\"");
  if (!p) return;
  p = strstr(p, "\"object\":\"");
  if (!p) return;
  p += 10;
  size_t k = 0;
  for (; *p && *p != '"' && k + 1 < cap; p++) {
    if (*p == '\\' && p[1]) p++;
    out[k++] = *p;
  }
  out[k] = 0;
}

static int same_file(const char *a, const char *b) {
  struct stat sa, sb2;
  if (stat(a, &sa) < 0 || stat(b, &sb2) < 0) return 0;
  return sa.st_dev == sb2.st_dev && sa.st_ino == sb2.st_ino;
}

int main(int argc, char **argv) {
  options o;
  memset(&o, 0, sizeof o);
  o.tail_bytes = 4096;
  o.sample_ms = 10;
  o.oom_exit_code = -1;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG() do { if (!v) { fprintf(stderr, "ms-run: %s needs a value\n", a); return 2; } i++; } while (0)
    if (!strcmp(a, "--")) { i++; break; }
    else if (!strcmp(a, "--help")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--events")) return events_mode();
    else if (!strcmp(a, "--hold-events")) return hold_events();
    else if (!strcmp(a, "--dlopen-check")) { NEED_ARG(); return dlopen_check(v); }
    else if (!strcmp(a, "--out")) { NEED_ARG(); o.out = v; }
    else if (!strcmp(a, "--timeout")) {
      NEED_ARG();
      char *end;
      o.timeout_s = strtod(v, &end);
      if (*end || o.timeout_s <= 0) { fprintf(stderr, "ms-run: bad --timeout %s\n", v); return 2; }
    }
    else if (!strcmp(a, "--mem-limit")) { NEED_ARG(); if (parse_u64(v, &o.mem_limit_bytes) || !o.mem_limit_bytes) { fprintf(stderr, "ms-run: bad --mem-limit %s\n", v); return 2; } }
    else if (!strcmp(a, "--preload")) { NEED_ARG(); o.preload = v; }
    else if (!strcmp(a, "--expect-malloc")) { NEED_ARG(); o.expect_malloc = v; }
    else if (!strcmp(a, "--checker")) { NEED_ARG(); o.checker = v; }
    else if (!strcmp(a, "--env")) { NEED_ARG(); if (!strchr(v, '=') || o.nenv >= MAX_ENV) { fprintf(stderr, "ms-run: bad --env %s\n", v); return 2; } o.env[o.nenv++] = v; }
    else if (!strcmp(a, "--oom-exit-code")) { NEED_ARG(); o.oom_exit_code = atoi(v); }
    else if (!strcmp(a, "--stdout")) { NEED_ARG(); o.stdout_path = v; }
    else if (!strcmp(a, "--stderr")) { NEED_ARG(); o.stderr_path = v; }
    else if (!strcmp(a, "--tail")) { NEED_ARG(); o.tail_bytes = atoi(v); }
    else if (!strcmp(a, "--sample-ms")) { NEED_ARG(); o.sample_ms = atoi(v) > 0 ? atoi(v) : 10; }
    else if (!strcmp(a, "--no-counters")) o.no_counters = 1;
    else { fprintf(stderr, "ms-run: unknown option %s\n", a); usage(stderr); return 2; }
#undef NEED_ARG
  }
  if (i >= argc) { fprintf(stderr, "ms-run: no command given\n"); usage(stderr); return 2; }
  o.argv = argv + i;

  char checker[PATH_MAX];
  if (o.checker) snprintf(checker, sizeof checker, "%s", o.checker);
  else {
    char self[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(checker, sizeof checker, "%s/libmscheck.so", self);
  }
  int check_malloc = access(checker, R_OK) == 0;

  int out_fd = open_output(o.stdout_path, "stdout");
  int err_fd = open_output(o.stderr_path, "stderr");
  if (out_fd < 0 || err_fd < 0) { perror("ms-run: cannot create output files"); return 2; }

  int probe_pipe[2], go_pipe[2], exec_pipe[2];
  if (pipe2(probe_pipe, O_CLOEXEC) || pipe2(go_pipe, O_CLOEXEC) || pipe2(exec_pipe, O_CLOEXEC)) { perror("ms-run: pipe"); return 2; }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);

  pid_t pid = fork();
  if (pid < 0) { perror("ms-run: fork"); return 2; }
  if (pid == 0) {
    /* Child: its own process group, so that a timeout kills everything it started. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  /* if ms-run itself is killed, take the command with it */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int wfd = dup(probe_pipe[1]);  /* dup clears CLOEXEC: this one survives exec */
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", wfd);
    setenv("MEMSLEUTH_FD", fdstr, 1);
    for (int k = 0; k < o.nenv; k++) putenv((char *)o.env[k]);
    char preload[2 * PATH_MAX + 2] = "";
    if (o.preload) snprintf(preload, sizeof preload, "%s", o.preload);
    if (check_malloc) {
      size_t l = strlen(preload);
      snprintf(preload + l, sizeof preload - l, "%s%s", l ? ":" : "", checker);
      setenv("MEMSLEUTH_CHECK_MALLOC", "1", 1);
    }
    if (preload[0]) setenv("LD_PRELOAD", preload, 1);
    char go;
    if (read(go_pipe[0], &go, 1) != 1) _exit(127);
    execvp(o.argv[0], o.argv);
    int e = errno;
    (void)!write(exec_pipe[1], &e, sizeof e);
    _exit(127);
  }
  setpgid(pid, pid);  /* also from the parent: no race with the kill below */
  close(probe_pipe[1]);
  close(go_pipe[0]);
  close(exec_pipe[1]);

  ms_counters ctr;
  memset(&ctr, 0, sizeof ctr);
  if (!o.no_counters) ms_counters_open(&ctr, pid, MS_OPEN_INHERIT | MS_OPEN_ENABLE_ON_EXEC);
  ms_snapshot s0;
  memset(&s0, 0, sizeof s0);

  uint64_t t0 = now_ns();
  (void)!write(go_pipe[1], "g", 1);
  close(go_pipe[1]);
  int exec_errno = 0;
  if (read(exec_pipe[0], &exec_errno, sizeof exec_errno) != sizeof exec_errno) exec_errno = 0;
  close(exec_pipe[0]);

  sbuf lines = {0};
  static uint64_t samples[MAX_SAMPLES][2];
  int nsamples = 0, interval_ms = o.sample_ms;
  uint64_t peak_rss_kb = 0, next_sample = t0;
  uint64_t deadline = o.timeout_s > 0 ? t0 + (uint64_t)(o.timeout_s * 1e9) : 0;
  int timed_out = 0, over_limit = 0, status = 0, reaped = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  struct pollfd pfd = {probe_pipe[0], POLLIN, 0};
  int pipe_open = 1;

  while (!reaped) {
    int tmo = interval_ms;
    if (poll(&pfd, pipe_open ? 1 : 0, tmo) > 0 && (pfd.revents & (POLLIN | POLLHUP))) {
      char tmp[65536];
      ssize_t n = read(probe_pipe[0], tmp, sizeof tmp);
      if (n > 0) sb_add(&lines, tmp, (size_t)n);
      else if (n == 0) pipe_open = 0;
    }
    pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) { reaped = 1; break; }
    uint64_t t = now_ns();
    if (t >= next_sample) {
      uint64_t rss = rss_kb_of(pid);
      if (rss > peak_rss_kb) peak_rss_kb = rss;
      if (nsamples == MAX_SAMPLES) {
        /* Keep the series bounded for long runs: halve its resolution. */
        for (int k = 0; k < MAX_SAMPLES / 2; k++) { samples[k][0] = samples[2 * k][0]; samples[k][1] = samples[2 * k][1]; }
        nsamples = MAX_SAMPLES / 2;
        interval_ms *= 2;
      }
      samples[nsamples][0] = (t - t0) / 1000000u;
      samples[nsamples][1] = rss;
      nsamples++;
      next_sample = t + (uint64_t)interval_ms * 1000000u;
      if (o.mem_limit_bytes && rss * 1024u > o.mem_limit_bytes && !over_limit) {
        over_limit = 1;
        kill(-pid, SIGKILL);
      }
    }
    if (deadline && t >= deadline && !timed_out) { timed_out = 1; kill(-pid, SIGKILL); }
    if (g_interrupted) kill(-pid, SIGKILL);
  }
  uint64_t wall_ns = now_ns() - t0;
  /* Whatever the command's children still hold, do not wait for them. */
  fcntl(probe_pipe[0], F_SETFL, O_NONBLOCK);
  drain(probe_pipe[0], &lines);
  kill(-pid, SIGKILL);  /* no stragglers from a timed-out or crashed tree */

  ms_snapshot s1;
  memset(&s1, 0, sizeof s1);
  if (!o.no_counters) ms_counters_read(&ctr, &s1);

  uint64_t maxrss_kb = (uint64_t)ru.ru_maxrss;
  if (maxrss_kb > peak_rss_kb) peak_rss_kb = maxrss_kb;

  char resolved[PATH_MAX];
  find_resolved(lines.data ? lines.data : "", resolved, sizeof resolved);
  int preload_ok = -1;  /* unknown */
  const char *preload_why = NULL;
  if (o.expect_malloc) {
    if (!check_malloc) { preload_why = "malloc-resolve checker library not found"; }
    else if (!resolved[0]) { preload_ok = 0; preload_why = "the checker library never loaded (a static binary, or LD_PRELOAD ignored)"; }
    else if (same_file(resolved, o.expect_malloc)) preload_ok = 1;
    else { preload_ok = 0; preload_why = "malloc resolves to another object"; }
  }

  const char *st = "ok";
  int sig = 0, code = -1;
  char detail[256] = "";
  if (exec_errno) {
    st = "error";
    snprintf(detail, sizeof detail, "cannot execute %s: %s", o.argv[0], strerror(exec_errno));
  } else if (g_interrupted) {
    st = "error";
    snprintf(detail, sizeof detail, "interrupted by signal %d", (int)g_interrupted);
  } else if (timed_out) {
    st = "timeout";
    snprintf(detail, sizeof detail, "killed after %.3g s", o.timeout_s);
  } else if (over_limit) {
    st = "oom";
    snprintf(detail, sizeof detail, "resident memory exceeded the %llu-byte limit; killed by ms-run", (unsigned long long)o.mem_limit_bytes);
  } else if (preload_ok == 0) {
    st = "preload-failed";
    snprintf(detail, sizeof detail, "%s: expected %s, got %s", preload_why, o.expect_malloc, resolved[0] ? resolved : "(no report)");
  } else if (WIFSIGNALED(status)) {
    sig = WTERMSIG(status);
    st = "crashed";
    snprintf(detail, sizeof detail, "killed by signal %d (SIG%s)%s", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?",
             WCOREDUMP(status) ? ", core dumped" : "");
  } else if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    if (code != 0 && code == o.oom_exit_code) { st = "oom"; snprintf(detail, sizeof detail, "the command reported out of memory (exit %d)", code); }
    else if (code != 0) { st = "error"; snprintf(detail, sizeof detail, "exited with status %d", code); }
  }
  if (WIFSIGNALED(status)) sig = WTERMSIG(status);
  if (WIFEXITED(status)) code = WEXITSTATUS(status);

  size_t out_tail_len, err_tail_len;
  char *out_tail = file_tail(out_fd, o.tail_bytes, &out_tail_len);
  char *err_tail = file_tail(err_fd, o.tail_bytes, &err_tail_len);

  size_t cap = 65536 + lines.len * 2 + (size_t)nsamples * 48 + (out_tail_len + err_tail_len) * 6;
  char *doc = malloc(cap);
  if (!doc) { perror("ms-run: out of memory"); return 2; }
  ms_json j;
  msj_init(&j, doc, cap);
  msj_obj_begin(&j, NULL);
  msj_i64(&j, "schema", 1);
  msj_arr_begin(&j, "argv");
  for (char **p = o.argv; *p; p++) msj_str(&j, NULL, *p);
  msj_arr_end(&j);
  msj_str(&j, "status", st);
  msj_str(&j, "detail", detail[0] ? detail : NULL);
  if (code >= 0) msj_i64(&j, "exit_code", code); else msj_null(&j, "exit_code");
  if (sig) { msj_i64(&j, "signal", sig); msj_str(&j, "signal_name", sigabbrev_np(sig)); }
  else { msj_null(&j, "signal"); msj_null(&j, "signal_name"); }
  msj_u64(&j, "wall_ns", wall_ns);
  msj_u64(&j, "user_ns", ms_tv_ns(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec));
  msj_u64(&j, "sys_ns", ms_tv_ns(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec));
  msj_i64(&j, "minflt", ru.ru_minflt);
  msj_i64(&j, "majflt", ru.ru_majflt);
  msj_i64(&j, "nvcsw", ru.ru_nvcsw);
  msj_i64(&j, "nivcsw", ru.ru_nivcsw);
  msj_u64(&j, "maxrss_kb", peak_rss_kb);
  if (o.timeout_s > 0) msj_dbl(&j, "timeout_s", o.timeout_s); else msj_null(&j, "timeout_s");
  if (o.mem_limit_bytes) msj_u64(&j, "mem_limit_bytes", o.mem_limit_bytes); else msj_null(&j, "mem_limit_bytes");
  msj_str(&j, "preload", o.preload);
  msj_str(&j, "malloc_expected", o.expect_malloc);
  msj_str(&j, "malloc_object", resolved[0] ? resolved : NULL);
  if (preload_ok < 0) msj_null(&j, "preload_ok"); else { msj_raw(&j, preload_ok ? ",\"preload_ok\":true" : ",\"preload_ok\":false"); }
  msj_i64(&j, "counters_grouped", ctr.grouped);
  if (o.no_counters) {
    msj_obj_begin(&j, "counters"); msj_obj_end(&j);
    msj_obj_begin(&j, "syscalls"); msj_obj_end(&j);
    msj_obj_begin(&j, "running_fraction"); msj_obj_end(&j);
    msj_obj_begin(&j, "unsupported"); msj_obj_end(&j);
  } else {
    put_events_json(&j, &ctr, &s0, &s1);
  }
  msj_i64(&j, "rss_sample_ms", o.sample_ms);
  msj_arr_begin(&j, "rss_kb");
  for (int k = 0; k < nsamples; k++) {
    msj_arr_begin(&j, NULL);
    msj_u64(&j, NULL, samples[k][0]);
    msj_u64(&j, NULL, samples[k][1]);
    msj_arr_end(&j);
  }
  msj_arr_end(&j);
  /* Probe lines are JSON objects already; anything else on the fd is kept as a string. */
  msj_arr_begin(&j, "probe");
  msj_arr_end(&j);
  j.len--;  /* reopen the array */
  j.buf[j.len] = 0;
  j.need_comma = 0;
  for (char *p = lines.data; p && *p;) {
    char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n > 1 && p[0] == '{' && p[n - 1] == '}') {
      if (j.need_comma) msj_raw(&j, ",");
      char save = p[n];
      p[n] = 0;
      msj_raw(&j, p);
      p[n] = save;
      j.need_comma = 1;
    } else if (n) {
      msj_strn(&j, NULL, p, n);
    }
    p += n + (nl ? 1 : 0);
  }
  msj_arr_end(&j);
  msj_strn(&j, "stdout_tail", out_tail ? out_tail : "", out_tail_len);
  msj_strn(&j, "stderr_tail", err_tail ? err_tail : "", err_tail_len);
  msj_obj_end(&j);
  msj_raw(&j, "\n");
  if (j.overflow) { fprintf(stderr, "ms-run: JSON document overflowed its buffer\n"); return 2; }

  int fd = 1;
  if (o.out) {
    fd = open(o.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { fprintf(stderr, "ms-run: cannot write %s: %s\n", o.out, strerror(errno)); return 2; }
  }
  for (size_t off = 0; off < j.len;) {
    ssize_t w = write(fd, doc + off, j.len - off);
    if (w < 0) { if (errno == EINTR) continue; perror("ms-run: write"); return 2; }
    off += (size_t)w;
  }
  if (o.out) close(fd);
  ms_counters_close(&ctr);
  return g_interrupted ? 130 : 0;
}
