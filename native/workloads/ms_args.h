/* Argument parsing shared by the workloads: every parameter is --name=value, and a bad value is
 * one line on stderr and exit 2 (memsleuth validates first; this guards direct use).
 *
 * Each program declares its options once, in one table (ms_opt), and ms_parse reads argv against
 * it: the range or choices it accepts, what --help prints, and the default (the value the
 * variable holds before parsing). tests/e2e/test_workload_params.py asks every program about every
 * parameter its Python schema declares, so the two declarations cannot drift apart. */
#ifndef MS_ARGS_H
#define MS_ARGS_H
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of --name=VALUE, or NULL when arg is some other option. */
static inline const char *ms_arg_value(const char *arg, const char *name) {
  size_t n = strlen(name);
  if (strncmp(arg, "--", 2) || strncmp(arg + 2, name, n) || arg[2 + n] != '=') return NULL;
  return arg + 3 + n;
}

static inline int ms_arg_u64(const char *prog, const char *arg, const char *name, uint64_t *out, uint64_t lo,
                             uint64_t hi) {
  const char *v = ms_arg_value(arg, name);
  if (!v) return 0;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || *v == '-' || x < lo || x > hi) {
    fprintf(stderr, "%s: --%s must be an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n", prog, name, lo, hi, v);
    exit(2);
  }
  *out = x;
  return 1;
}

/* --name=one-of-choices: *out is the index in choices (a NULL-terminated list). */
static inline int ms_arg_choice(const char *prog, const char *arg, const char *name, const char *const *choices,
                                int *out) {
  const char *v = ms_arg_value(arg, name);
  if (!v) return 0;
  for (int i = 0; choices[i]; i++)
    if (!strcmp(v, choices[i])) {
      *out = i;
      return 1;
    }
  fprintf(stderr, "%s: --%s must be one of", prog, name);
  for (int i = 0; choices[i]; i++) fprintf(stderr, " %s", choices[i]);
  fprintf(stderr, ", got '%s'\n", v);
  exit(2);
}

typedef enum { MS_OPT_U64, MS_OPT_CHOICE, MS_OPT_PARSE } ms_opt_kind;

/* One option: --name=VALUE into *out. A table ends with an entry whose name is NULL. */
typedef struct {
  const char *name;
  ms_opt_kind kind;
  void *out;                                          /* uint64_t * (U64), int * (CHOICE), NULL (PARSE) */
  uint64_t lo, hi;                                    /* U64: the accepted range */
  const char *const *choices;                         /* CHOICE: NULL-terminated; *out is the index */
  void (*parse)(const char *prog, const char *value); /* PARSE: stores the value; exit 2 if bad */
  const char *about;                                  /* one line for --help */
} ms_opt;

#define MS_U64(name, out, lo, hi, about) {name, MS_OPT_U64, out, lo, hi, NULL, NULL, about}
#define MS_CHOICE(name, out, choices, about) {name, MS_OPT_CHOICE, out, 0, 0, choices, NULL, about}
#define MS_PARSE(name, fn, about) {name, MS_OPT_PARSE, NULL, 0, 0, NULL, fn, about}
#define MS_END {NULL, MS_OPT_U64, NULL, 0, 0, NULL, NULL, NULL}

/* --help: the table, with each option's range or choices and its default. */
static inline void ms_usage(FILE *f, const char *prog, const char *what, const ms_opt *opts) {
  fprintf(f, "%s: %s\nusage: %s [--option=VALUE]...\n", prog, what, prog);
  for (const ms_opt *o = opts; o->name; o++) {
    fprintf(f, "  --%-16s %s", o->name, o->about);
    uint64_t now = o->kind == MS_OPT_U64 ? *(const uint64_t *)o->out : 0;
    if (o->kind == MS_OPT_U64 && now == UINT64_MAX && o->hi < UINT64_MAX) /* set after parsing */
      fprintf(f, " (%" PRIu64 " to %" PRIu64 ")", o->lo, o->hi);
    else if (o->kind == MS_OPT_U64) fprintf(f, " (%" PRIu64 " to %" PRIu64 "; default %" PRIu64 ")", o->lo, o->hi, now);
    if (o->kind == MS_OPT_CHOICE) {
      fputs(" (", f);
      for (int i = 0; o->choices[i]; i++) fprintf(f, "%s%s", i ? "|" : "", o->choices[i]);
      fprintf(f, "; default %s)", o->choices[*(const int *)o->out]);
    }
    fputc('\n', f);
  }
}

/* Reads argv against the table: a bad value or an unknown option is one line on stderr and exit
 * 2; --help prints the table and exits 0. Returns only when every argument was an option. */
static inline void ms_parse(const char *prog, const char *what, const ms_opt *opts, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      ms_usage(stdout, prog, what, opts);
      exit(0);
    }
    const ms_opt *o = opts;
    for (; o->name; o++)
      if ((v = ms_arg_value(a, o->name))) break;
    if (!o->name) {
      for (o = opts; o->name; o++)
        if (!strncmp(a, "--", 2) && !strcmp(a + 2, o->name)) {
          fprintf(stderr, "%s: --%s needs a value: --%s=VALUE\n", prog, o->name, o->name);
          exit(2);
        }
      fprintf(stderr, "%s: unknown argument '%s' (--help lists the options)\n", prog, a);
      exit(2);
    }
    if (o->kind == MS_OPT_U64) ms_arg_u64(prog, a, o->name, (uint64_t *)o->out, o->lo, o->hi);
    else if (o->kind == MS_OPT_CHOICE) ms_arg_choice(prog, a, o->name, o->choices, (int *)o->out);
    else o->parse(prog, v);
  }
}
#endif
