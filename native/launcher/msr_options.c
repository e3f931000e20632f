/* ms-run's options: one table declares each (name, value, help, how it is stored, its range); the
 * usage, getopt_long's table and the parsing are all read from it. Every number is validated
 * (range, finiteness), and bad input is one line and exit 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "msr.h"

/* A timeout beyond this (about 31 years) is no limit at all; the nanosecond deadline stays
 * far inside 64 bits. */
#define MAX_TIMEOUT_S 1e9

typedef struct msr_opt msr_opt;
/* Stores an option's value (NULL for a flag) in o; 0, or 2 after one line on stderr. */
typedef int (*msr_setter)(const msr_opt *opt, const char *v, msr_options *o);

struct msr_opt {
  const char *name;    /* --name */
  const char *value;   /* the value's name in the usage; NULL: a flag */
  const char *help;    /* the usage's text ('\n' between its lines) */
  const char *section; /* the usage's heading it stands under */
  msr_setter set;
  size_t field;    /* offsetof the member it sets */
  uint64_t lo, hi; /* a number's range */
  msr_mode mode;   /* set_mode: the mode it selects */
};

static int bad(const char *opt, const char *v, const char *why) {
  fprintf(stderr, "ms-run: bad --%s '%s': %s\n", opt, v, why);
  return 2;
}

#define FIELD(o, opt, type) ((type *)((char *)(o) + (opt)->field))

static int parse_u64(const msr_opt *opt, const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  if (!*v || *v == '-') return bad(opt->name, v, "expected a non-negative integer");
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end) return bad(opt->name, v, "expected a non-negative integer");
  if (x < opt->lo || x > opt->hi) {
    char why[96];
    snprintf(why, sizeof why, "must be in [%llu, %llu]", (unsigned long long)opt->lo, (unsigned long long)opt->hi);
    return bad(opt->name, v, why);
  }
  *out = x;
  return 0;
}

static int parse_seconds(const msr_opt *opt, const char *v, int zero_ok, const char *why, double *out) {
  char *end;
  errno = 0;
  double t = strtod(v, &end);
  if (errno || *end || end == v || !isfinite(t) || t < 0 || (t == 0 && !zero_ok)) return bad(opt->name, v, why);
  *out = t;
  return 0;
}

static int set_string(const msr_opt *opt, const char *v, msr_options *o) {
  *FIELD(o, opt, const char *) = v;
  return 0;
}

static int set_u64(const msr_opt *opt, const char *v, msr_options *o) {
  return parse_u64(opt, v, FIELD(o, opt, uint64_t));
}

static int set_flag(const msr_opt *opt, const char *v, msr_options *o) {
  (void)v;
  *FIELD(o, opt, int) = 1;
  return 0;
}

static int set_mode(const msr_opt *opt, const char *v, msr_options *o) {
  (void)v;
  o->mode = opt->mode;
  return 0;
}

static int set_timeout(const msr_opt *opt, const char *v, msr_options *o) {
  double t;
  if (parse_seconds(opt, v, 0, "expected a positive number of seconds", &t)) return 2;
  o->timeout_s = t > MAX_TIMEOUT_S ? 0 : t; /* beyond any run: no limit */
  return 0;
}

static int set_duration(const msr_opt *opt, const char *v, msr_options *o) {
  return parse_seconds(opt, v, 1, "expected seconds (0: until stopped)", &o->duration_s);
}

static int set_oom_code(const msr_opt *opt, const char *v, msr_options *o) {
  uint64_t u;
  if (parse_u64(opt, v, &u)) return 2;
  o->oom_exit_code = (int)u;
  return 0;
}

static int set_env(const msr_opt *opt, const char *v, msr_options *o) {
  if (!strchr(v, '=') || v[0] == '=') return bad(opt->name, v, "expected KEY=VALUE");
  if (o->nenv >= MSR_MAX_ENV) return bad(opt->name, v, "too many --env options");
  o->env[o->nenv++] = v;
  return 0;
}

static int set_args_every(const msr_opt *opt, const char *v, msr_options *o) {
  char name[32];
  const char *eq = strchr(v, '=');
  if (!eq || eq == v || (size_t)(eq - v) >= sizeof name) return bad(opt->name, v, "expected NAME=P");
  memcpy(name, v, (size_t)(eq - v));
  name[eq - v] = 0;
  int i = msr_args_sampled_index(name);
  if (i < 0) return bad(opt->name, v, "NAME is one of munmap, madvise, mmap, mremap, faults");
  return parse_u64(opt, eq + 1, &o->args_every[i]);
}

static int set_fault_share(const msr_opt *opt, const char *v, msr_options *o) {
  double s;
  if (parse_seconds(opt, v, 0, "expected a share above 0, at most 1", &s)) return 2;
  if (s > 1) return bad(opt->name, v, "expected a share above 0, at most 1");
  o->fault_share = s;
  return 0;
}

static int set_outside_sites(const msr_opt *opt, const char *v, msr_options *o) {
  if (!strchr(v, '=')) return bad(opt->name, v, "expected EVENT=PERIOD[,EVENT=PERIOD...]");
  o->outside_sites = v;
  return 0;
}

static int set_attach(const msr_opt *opt, const char *v, msr_options *o) {
  for (const char *p = v; *p;) {
    char *end;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno || end == p || pid <= 0 || pid > 0x3fffffff || (*end && *end != ','))
      return bad(opt->name, v, "expected PID[,PID...]");
    if (o->nattach >= MSR_MAX_ATTACH) return bad(opt->name, v, "at most 64 processes");
    o->attach[o->nattach++] = (pid_t)pid;
    p = *end ? end + 1 : end;
  }
  o->mode = MSR_ATTACH;
  return 0;
}

#define AT(member) offsetof(msr_options, member)
static const char RUN[] = "", ATTACH[] = "modes (attach):", MODES[] = "modes:";

/* Every option, in the order the usage lists them. */
// clang-format off
static const msr_opt OPTIONS[] = {
    {.name = "out", .value = "FILE", .help = "write the JSON document here (default: stdout)",
     .section = RUN, .set = set_string, .field = AT(out)},
    {.name = "timeout", .value = "SECONDS",
     .help = "kill the command's process tree after this long (status timeout)",
     .section = RUN, .set = set_timeout},
    {.name = "mem-limit", .value = "BYTES",
     .help = "kill it when the tree's resident memory exceeds this (status oom)",
     .section = RUN, .set = set_u64, .field = AT(mem_limit_bytes), .lo = 1, .hi = UINT64_MAX / 2},
    {.name = "preload", .value = "PATH", .help = "LD_PRELOAD this allocator",
     .section = RUN, .set = set_string, .field = AT(preload)},
    {.name = "env", .value = "KEY=VALUE", .help = "set in the command's environment (repeatable)",
     .section = RUN, .set = set_env},
    {.name = "oom-exit-code", .value = "N",
     .help = "an exit with this code means the command ran out of memory",
     .section = RUN, .set = set_oom_code, .lo = 1, .hi = 255},
    {.name = "stdin", .value = "FILE",
     .help = "the command's standard input, read from its start (default: /dev/null)",
     .section = RUN, .set = set_string, .field = AT(stdin_path)},
    {.name = "stdout", .value = "FILE",
     .help = "keep the command's standard output (default: its tail only)",
     .section = RUN, .set = set_string, .field = AT(stdout_path)},
    {.name = "stderr", .value = "FILE",
     .help = "keep the command's standard error (default: its tail only)",
     .section = RUN, .set = set_string, .field = AT(stderr_path)},
    {.name = "tail", .value = "BYTES",
     .help = "how much of each output to keep in the JSON (default 4096)",
     .section = RUN, .set = set_u64, .field = AT(tail_bytes), .hi = 1u << 30},
    {.name = "sample-ms", .value = "N",
     .help = "RSS sampling interval in ms (default 10; doubled, up to 160, while reading the tree costs more than 1/20 of it)",
     .section = RUN, .set = set_u64, .field = AT(sample_ms), .lo = 1, .hi = 60000},
    {.name = "max-points", .value = "N",
     .help = "thin the RSS timeline to at most N points (default 2048)",
     .section = RUN, .set = set_u64, .field = AT(max_points), .lo = 16, .hi = 1u << 20},
    {.name = "no-counters", .help = "open no perf events (to measure the instrumentation's cost)",
     .section = RUN, .set = set_flag, .field = AT(no_counters)},
    {.name = "no-syscalls",
     .help = "count no system call by name (a timed run): a syscall tracepoint registered sends\n"
             "every call of every task through the kernel's slow path, and a counted call costs\n"
             "more again; the probe's regions count none either (MEMSLEUTH_NO_SYSCALLS)",
     .section = RUN, .set = set_flag, .field = AT(no_syscalls)},
    {.name = "inherited-events",
     .help = "follow the tree with perf events copied into each of its tasks, not with per-CPU\n"
             "events of a cgroup of the command's own (each new thread or process then costs more)",
     .section = RUN, .set = set_flag, .field = AT(inherited_events)},
    {.name = "note-cwds",
     .help = "list the working directories the tree's processes ran in (\"cwds\"): where\n"
             "a runtime may have left its files",
     .section = RUN, .set = set_flag, .field = AT(note_cwds)},
    {.name = "syscall-args",
     .help = "record the arguments of munmap/madvise/mmap/mremap/brk (bytes, advice,\n"
             "the break's moves) from the syscall tracepoints",
     .section = RUN, .set = set_flag, .field = AT(syscall_args)},
    {.name = "syscall-args-every", .value = "NAME=P",
     .help = "record one NAME call in P (munmap, madvise, mmap, mremap; P prime),\n"
             "each counted P times: the totals become estimates (repeatable);\n"
             "faults=P samples one user page fault in P, each looked up in the ranges\n"
             "released before it (munmap, purging madvise, the break moving down)",
     .section = RUN, .set = set_args_every, .lo = 1, .hi = 1u << 30},
    {.name = "fault-share", .value = "S",
     .help = "trace the page faults (faults=P) in about this share of the ticks only,\n"
             "chosen at random (each traced fault costs its thread ~0.2 us); the counts\n"
             "are scaled to the run's page faults (0 < S <= 1; default 1)",
     .section = RUN, .set = set_fault_share},
    {.name = "cpu-sample-us", .value = "N",
     .help = "sample the tree's CPU time every N us with kernel call chains: where the\n"
             "kernel time goes, by path and executable (root)",
     .section = RUN, .set = set_u64, .field = AT(cpu_sample_us), .lo = 100, .hi = 1000000},
    {.name = "cpu-stacks-dir", .value = "DIR",
     .help = "with --cpu-sample-us: also sample the CPU time with user call chains (frame\n"
             "pointers), split into user and kernel mode; documents: lines of DIR/cpu.jsonl",
     .section = RUN, .set = set_string, .field = AT(cpu_stacks_dir)},
    {.name = "outside-sites", .value = "SPEC",
     .help = "sample EVENT=PERIOD,... (page-faults, a syscall's name) with user call\n"
             "chains from the kernel, for the processes that do not map --outside-skip",
     .section = RUN, .set = set_outside_sites},
    {.name = "outside-dir", .value = "DIR", .help = "their documents: lines of DIR/sites.jsonl",
     .section = RUN, .set = set_string, .field = AT(outside_dir)},
    {.name = "outside-skip", .value = "LIB",
     .help = "the in-program sampler: a process that maps it is left to it",
     .section = RUN, .set = set_string, .field = AT(outside_skip)},
    {.name = "outside-freq", .value = "HZ",
     .help = "sample each event about HZ times a second per CPU instead of by period",
     .section = RUN, .set = set_u64, .field = AT(outside_freq), .lo = 1, .hi = 10000},
    {.name = "attach", .value = "PID[,PID]",
     .help = "measure running processes (every thread, and those created) for a window,\n"
             "then detach; nothing is started, stopped or signalled",
     .section = ATTACH, .set = set_attach},
    {.name = "duration", .value = "S", .help = "the window (0, the default: until SIGINT or SIGTERM)",
     .section = ATTACH, .set = set_duration},
    {.name = "events", .help = "print which events exist and which open here, then exit",
     .section = MODES, .set = set_mode, .mode = MSR_EVENTS},
    {.name = "hold-events",
     .help = "keep the syscall tracepoints registered until stdin closes (with\n"
             "--syscall-args: the fault and mapping tracepoints too)",
     .section = MODES, .set = set_mode, .mode = MSR_HOLD_EVENTS},
    {.name = "preload-check",
     .help = "run the command only up to its first instruction, with --preload and\n"
             "libmscheck.so, and report which object malloc binds to",
     .section = MODES, .set = set_mode, .mode = MSR_PRELOAD_CHECK},
    {.name = "expect-malloc", .value = "PATH",
     .help = "with --preload-check: whether malloc binds to this object",
     .section = MODES, .set = set_string, .field = AT(expect_malloc)},
    {.name = "checker", .value = "PATH",
     .help = "with --preload-check: the checker library (libmscheck.so)",
     .section = MODES, .set = set_string, .field = AT(checker)},
    {.name = "help", .help = "print this and exit",
     .section = MODES, .set = set_mode, .mode = MSR_HELP},
};
// clang-format on
#define NOPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])
#define HELP_COLUMN 23

void msr_usage(FILE *f) {
  fputs("usage: ms-run [options] -- CMD ARGS...\n", f);
  const char *section = RUN;
  for (size_t i = 0; i < NOPTIONS; i++) {
    const msr_opt *opt = &OPTIONS[i];
    if (opt->section != section) fprintf(f, "%s\n", section = opt->section);
    int n = fprintf(f, "  --%s%s%s", opt->name, opt->value ? " " : "", opt->value ? opt->value : "");
    fprintf(f, "%*s", n < HELP_COLUMN - 1 ? HELP_COLUMN - n : 1, "");
    for (const char *p = opt->help; *p; p++) {
      fputc(*p, f);
      if (*p == '\n') fprintf(f, "%*s", HELP_COLUMN, "");
    }
    fputc('\n', f);
  }
}

int msr_parse_options(int argc, char **argv, msr_options *o) {
  memset(o, 0, sizeof *o);
  o->mode = MSR_RUN;
  o->oom_exit_code = -1;
  o->tail_bytes = 4096;
  o->sample_ms = 10;
  o->max_points = 2048;
  struct option longopts[NOPTIONS + 1];
  for (size_t i = 0; i < NOPTIONS; i++)
    longopts[i] = (struct option){OPTIONS[i].name, OPTIONS[i].value ? required_argument : no_argument, 0, 256 + (int)i};
  longopts[NOPTIONS] = (struct option){0, 0, 0, 0};
  opterr = 0;
  int c;
  /* "+": stop at the first non-option, so the command's own options are never ours. */
  while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
    if (c < 256 || c >= 256 + (int)NOPTIONS) {
      if (optopt) fprintf(stderr, "ms-run: option needs a value or is unknown: %s\n", argv[optind - 1]);
      else fprintf(stderr, "ms-run: unknown option %s\n", argv[optind - 1]);
      return 2;
    }
    const msr_opt *opt = &OPTIONS[c - 256];
    if (opt->set(opt, optarg, o)) return 2;
  }
  if (o->outside_sites && !o->outside_dir) {
    fprintf(stderr, "ms-run: --outside-sites needs --outside-dir\n");
    return 2;
  }
  o->argv = argv + optind;
  if (o->mode == MSR_ATTACH && o->argv[0]) {
    fprintf(stderr, "ms-run: --attach measures running processes: no command is taken\n");
    return 2;
  }
  if ((o->mode == MSR_RUN || o->mode == MSR_PRELOAD_CHECK) && !o->argv[0]) {
    fprintf(stderr, "ms-run: no command given (ms-run [options] -- CMD ARGS...)\n");
    return 2;
  }
  return 0;
}
