/* ms-run's options: getopt_long, every number validated (range, finiteness), one line on error. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "msr.h"

/* A timeout beyond this (about 31 years) is no limit at all; the nanosecond deadline stays
 * far inside 64 bits. */
#define MAX_TIMEOUT_S 1e9

void msr_usage(FILE *f) {
  fputs(
      "usage: ms-run [options] -- CMD ARGS...\n"
      "  --out FILE           write the JSON document here (default: stdout)\n"
      "  --timeout SECONDS    kill the command's process tree after this long (status timeout)\n"
      "  --mem-limit BYTES    kill it when the tree's resident memory exceeds this (status oom)\n"
      "  --preload PATH       LD_PRELOAD this allocator\n"
      "  --env KEY=VALUE      set in the command's environment (repeatable)\n"
      "  --oom-exit-code N    an exit with this code means the command ran out of memory\n"
      "  --stdout FILE, --stderr FILE   keep the command's output (default: tails only)\n"
      "  --tail BYTES         how much of each output to keep in the JSON (default 4096)\n"
      "  --sample-ms N        RSS sampling interval (default 10)\n"
      "  --max-points N       thin the RSS timeline to at most N points (default 2048)\n"
      "  --no-counters        open no perf events (to measure the instrumentation's cost)\n"
      "  --syscall-args       record the arguments of munmap/madvise/mmap/mremap/brk (bytes, advice,\n"
      "                       the break's moves) from the syscall tracepoints\n"
      "  --syscall-args-every NAME=P   record one NAME call in P (munmap, madvise, mmap, mremap; P\n"
      "                       prime), each counted P times: the totals become estimates (repeatable);\n"
      "                       faults=P samples one user page fault in P, each looked up in the ranges\n"
      "                       released before it (munmap, purging madvise, the break moving down)\n"
      "  --cpu-sample-us N    sample the tree's CPU time every N us with kernel call chains: where the\n"
      "                       kernel time goes, by path and executable (root)\n"
      "  --outside-sites SPEC sample EVENT=PERIOD,... (page-faults, a syscall's name) with user call\n"
      "                       chains from the kernel, for the processes that do not map --outside-skip\n"
      "  --outside-dir DIR    their documents: DIR/sites-PID.json\n"
      "  --outside-skip LIB   the in-program sampler: a process that maps it is left to it\n"
      "  --outside-freq HZ    sample each event about HZ times a second per CPU instead of by period\n"
      "modes (attach):\n"
      "  --attach PID[,PID]   measure running processes (every thread, and those created) for a window,\n"
      "                       then detach; nothing is started, stopped or signalled\n"
      "  --duration S         the window (0, the default: until SIGINT or SIGTERM)\n"
      "modes:\n"
      "  --events             print which events exist and which open here, then exit\n"
      "  --hold-events        keep the syscall tracepoints registered until stdin closes\n"
      "  --preload-check      run the command only up to its first instruction, with --preload and\n"
      "                       libmscheck.so, and report which object malloc binds to\n"
      "                       (with --expect-malloc PATH: whether it is that one; --checker PATH)\n",
      f);
}

static int bad(const char *opt, const char *v, const char *why) {
  fprintf(stderr, "ms-run: bad %s '%s': %s\n", opt, v, why);
  return 2;
}

static int parse_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  if (!*v || *v == '-') return bad(opt, v, "expected a non-negative integer");
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end) return bad(opt, v, "expected a non-negative integer");
  if (x < lo || x > hi) {
    char why[96];
    snprintf(why, sizeof why, "must be in [%llu, %llu]", (unsigned long long)lo, (unsigned long long)hi);
    return bad(opt, v, why);
  }
  *out = x;
  return 0;
}

int msr_parse_options(int argc, char **argv, msr_options *o) {
  memset(o, 0, sizeof *o);
  o->mode = MSR_RUN;
  o->oom_exit_code = -1;
  o->tail_bytes = 4096;
  o->sample_ms = 10;
  o->max_points = 2048;
  enum {
    O_OUT = 256,
    O_TIMEOUT,
    O_MEM,
    O_PRELOAD,
    O_EXPECT,
    O_CHECKER,
    O_ENV,
    O_OOM,
    O_STDOUT,
    O_STDERR,
    O_TAIL,
    O_SAMPLE,
    O_POINTS,
    O_NOCTR,
    O_EVENTS,
    O_HOLD,
    O_PCHECK,
    O_HELP,
    O_ARGS,
    O_EVERY,
    O_CPU,
    O_OUTSIDE,
    O_OUTSIDE_DIR,
    O_OUTSIDE_SKIP,
    O_OUTSIDE_FREQ,
    O_ATTACH,
    O_DURATION
  };
  static const struct option longopts[] = {{"out", required_argument, 0, O_OUT},
                                           {"timeout", required_argument, 0, O_TIMEOUT},
                                           {"mem-limit", required_argument, 0, O_MEM},
                                           {"preload", required_argument, 0, O_PRELOAD},
                                           {"expect-malloc", required_argument, 0, O_EXPECT},
                                           {"checker", required_argument, 0, O_CHECKER},
                                           {"env", required_argument, 0, O_ENV},
                                           {"oom-exit-code", required_argument, 0, O_OOM},
                                           {"stdout", required_argument, 0, O_STDOUT},
                                           {"stderr", required_argument, 0, O_STDERR},
                                           {"tail", required_argument, 0, O_TAIL},
                                           {"sample-ms", required_argument, 0, O_SAMPLE},
                                           {"max-points", required_argument, 0, O_POINTS},
                                           {"no-counters", no_argument, 0, O_NOCTR},
                                           {"events", no_argument, 0, O_EVENTS},
                                           {"hold-events", no_argument, 0, O_HOLD},
                                           {"preload-check", no_argument, 0, O_PCHECK},
                                           {"help", no_argument, 0, O_HELP},
                                           {"syscall-args", no_argument, 0, O_ARGS},
                                           {"syscall-args-every", required_argument, 0, O_EVERY},
                                           {"cpu-sample-us", required_argument, 0, O_CPU},
                                           {"outside-sites", required_argument, 0, O_OUTSIDE},
                                           {"outside-dir", required_argument, 0, O_OUTSIDE_DIR},
                                           {"outside-skip", required_argument, 0, O_OUTSIDE_SKIP},
                                           {"outside-freq", required_argument, 0, O_OUTSIDE_FREQ},
                                           {"attach", required_argument, 0, O_ATTACH},
                                           {"duration", required_argument, 0, O_DURATION},
                                           {0, 0, 0, 0}};
  opterr = 0;
  int c;
  uint64_t u;
  /* "+": stop at the first non-option, so the command's own options are never ours. */
  while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
    const char *v = optarg;
    switch (c) {
      case O_OUT:
        o->out = v;
        break;
      case O_TIMEOUT: {
        char *end;
        errno = 0;
        double t = strtod(v, &end);
        if (errno || *end || end == v || !isfinite(t) || t <= 0)
          return bad("--timeout", v, "expected a positive number of seconds");
        o->timeout_s = t > MAX_TIMEOUT_S ? 0 : t; /* beyond any run: no limit */
        break;
      }
      case O_MEM:
        if (parse_u64("--mem-limit", v, 1, UINT64_MAX / 2, &o->mem_limit_bytes)) return 2;
        break;
      case O_PRELOAD:
        o->preload = v;
        break;
      case O_EXPECT:
        o->expect_malloc = v;
        break;
      case O_CHECKER:
        o->checker = v;
        break;
      case O_ENV:
        if (!strchr(v, '=') || v[0] == '=') return bad("--env", v, "expected KEY=VALUE");
        if (o->nenv >= MSR_MAX_ENV) return bad("--env", v, "too many --env options");
        o->env[o->nenv++] = v;
        break;
      case O_OOM:
        if (parse_u64("--oom-exit-code", v, 1, 255, &u)) return 2;
        o->oom_exit_code = (int)u;
        break;
      case O_STDOUT:
        o->stdout_path = v;
        break;
      case O_STDERR:
        o->stderr_path = v;
        break;
      case O_TAIL:
        if (parse_u64("--tail", v, 0, 1u << 30, &o->tail_bytes)) return 2;
        break;
      case O_SAMPLE:
        if (parse_u64("--sample-ms", v, 1, 60000, &o->sample_ms)) return 2;
        break;
      case O_POINTS:
        if (parse_u64("--max-points", v, 16, 1u << 20, &o->max_points)) return 2;
        break;
      case O_NOCTR:
        o->no_counters = 1;
        break;
      case O_ARGS:
        o->syscall_args = 1;
        break;
      case O_EVERY: {
        char name[32];
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || (size_t)(eq - v) >= sizeof name) return bad("--syscall-args-every", v, "expected NAME=P");
        memcpy(name, v, (size_t)(eq - v));
        name[eq - v] = 0;
        int i = msr_args_sampled_index(name);
        if (i < 0) return bad("--syscall-args-every", v, "NAME is one of munmap, madvise, mmap, mremap, faults");
        if (parse_u64("--syscall-args-every", eq + 1, 1, 1u << 30, &o->args_every[i])) return 2;
        break;
      }
      case O_CPU:
        if (parse_u64("--cpu-sample-us", v, 100, 1000000, &o->cpu_sample_us)) return 2;
        break;
      case O_OUTSIDE:
        if (!strchr(v, '=')) return bad("--outside-sites", v, "expected EVENT=PERIOD[,EVENT=PERIOD...]");
        o->outside_sites = v;
        break;
      case O_OUTSIDE_DIR:
        o->outside_dir = v;
        break;
      case O_OUTSIDE_SKIP:
        o->outside_skip = v;
        break;
      case O_OUTSIDE_FREQ:
        if (parse_u64("--outside-freq", v, 1, 10000, &o->outside_freq)) return 2;
        break;
      case O_ATTACH:
        for (const char *p = v; *p;) {
          char *end;
          errno = 0;
          long pid = strtol(p, &end, 10);
          if (errno || end == p || pid <= 0 || pid > 0x3fffffff || (*end && *end != ','))
            return bad("--attach", v, "expected PID[,PID...]");
          if (o->nattach >= MSR_MAX_ATTACH) return bad("--attach", v, "at most 64 processes");
          o->attach[o->nattach++] = (pid_t)pid;
          p = *end ? end + 1 : end;
        }
        o->mode = MSR_ATTACH;
        break;
      case O_DURATION: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || *end || end == v || !isfinite(d) || d < 0)
          return bad("--duration", v, "expected seconds (0: until stopped)");
        o->duration_s = d;
        break;
      }
      case O_EVENTS:
        o->mode = MSR_EVENTS;
        break;
      case O_HOLD:
        o->mode = MSR_HOLD_EVENTS;
        break;
      case O_PCHECK:
        o->mode = MSR_PRELOAD_CHECK;
        break;
      case O_HELP:
        o->mode = MSR_HELP;
        break;
      default:
        if (optopt) fprintf(stderr, "ms-run: option needs a value or is unknown: %s\n", argv[optind - 1]);
        else fprintf(stderr, "ms-run: unknown option %s\n", argv[optind - 1]);
        return 2;
    }
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
